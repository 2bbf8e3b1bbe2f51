"""A teacher behind an OpenAI-compatible /v1/embeddings endpoint (``--teacher openai:MODEL``).

The scripted server (tests/fake_llm_server.py) answers each text with a fixed vector, so what
the teacher returns can be checked exactly, and it plants the faults a real server shows:
statuses, timeouts, empty and HTML bodies, too few vectors, vectors of another length, a
server that serves another model, an error text that repeats the key. The real server (vLLM
serving the bundled MiniLM) is in tests/llm/test_vllm.py.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from curate.core.errors import CurateError
from curate.embed.kinds.api import ApiEmbedder
from curate.embed.cache import EmbeddingCache
from curate.embed.teacher import Teacher
from tests.fake_llm_server import FakeLLMServer, _vector
from tests.helpers import assert_one_line_error, read_jsonl, run_curate

TEXTS = [f"text number {i} about topic {i % 7}" for i in range(50)]


def _unit(text: str, dim: int = 8) -> np.ndarray:
    v = np.asarray(_vector(text, dim), dtype=np.float32)
    return v / np.linalg.norm(v)


def _teacher(urls, tmp_path, **kw) -> Teacher:
    return Teacher("openai:fake", base_urls=urls, batch_size=8, cache=EmbeddingCache(tmp_path / "cache"),
                   query_prompt="q: ", doc_prompt="", **kw)


def test_vectors_come_in_batches_from_every_server_and_then_from_the_cache(tmp_path):
    with FakeLLMServer() as a, FakeLLMServer() as b:
        t = _teacher([a.base_url, b.base_url], tmp_path)
        got = t.encode_queries(TEXTS)
        want = np.stack([_unit("q: " + x) for x in TEXTS])  # the prompt in front, as sentence-transformers puts it
        assert got.shape == (50, 8) and np.allclose(got, want, atol=1e-6)
        posts = [r for s in (a, b) for r in s.requests if r.method == "POST"]
        assert len(posts) == 7 and all(len(r.body["input"]) <= 8 for r in posts)  # 50 texts, 8 a request
        assert a.requests and b.requests  # spread over both servers
        assert all(r.body["model"] == "fake" and "truncate_prompt_tokens" not in r.body for r in posts)
        t.close()
        again = _teacher([a.base_url], tmp_path)
        before = len(a.requests)
        assert np.array_equal(again.encode_queries(TEXTS), got) and again.cache_hits == 50
        assert len(a.requests) == before  # every vector from the cache, keyed by the served name and prompt
        assert again.model_id == "openai:fake"
        again.close()


def test_on_vllm_long_texts_are_cut_at_the_models_length(tmp_path):
    with FakeLLMServer(owned_by="vllm") as srv:
        t = _teacher([srv.base_url], tmp_path)
        t.encode_docs(TEXTS[:3])
        post = next(r for r in srv.requests if r.method == "POST")
        assert post.body["truncate_prompt_tokens"] == -1
        t.close()


@pytest.mark.parametrize("faults", ["500,ok", "429s0,ok", "emptybody,ok", "html,ok", "short,ok", "drop,ok"])
def test_transport_and_reply_faults_are_retried(tmp_path, faults):
    with FakeLLMServer() as srv:
        emb = ApiEmbedder("openai:fake", [srv.base_url], batch_size=4, timeout=5, max_retries=2)
        emb.cfg.backoff_base = 0.01
        texts = [f"FAULTS[{faults}] first", "second", "third"]
        got = emb.encode(texts)
        assert np.allclose(got, np.stack([_vector(x, 8) for x in texts]), atol=1e-5)
        assert emb.requests == 2
        emb.close()


@pytest.mark.parametrize("fault, says", [
    ("404", "http-404"),
    ("timeout", "timeout (gave up after 2 attempts)"),
    ("short", "1 vectors for 2 texts"),
    ("emptybody", "empty body"),
])
def test_a_fault_that_stays_is_one_line_and_nothing_is_cached(tmp_path, fault, says):
    with FakeLLMServer(timeout_sleep=3) as srv:
        t = _teacher([srv.base_url], tmp_path)
        cfg = t.source.embedder.cfg
        cfg.timeout, cfg.max_retries, cfg.backoff_base = 1.0, 1, 0.01
        good = t.encode_docs(["fine one", "fine two"])
        with pytest.raises(CurateError) as e:
            t.encode_docs([f"FAULTS[{fault}] bad", "another"])
        assert says in str(e.value) and "\n" not in str(e.value)
        assert t.cache.get_many("openai:fake", "", [f"FAULTS[{fault}] bad", "another"]) == [None, None]
        assert np.allclose(t.cache.get_many("openai:fake", "", ["fine one"])[0], good[0])
        t.close()


def test_another_length_of_vector_is_refused_before_the_cache_takes_it(tmp_path):
    with FakeLLMServer() as srv:
        t = _teacher([srv.base_url], tmp_path)
        t.encode_docs(["first text"])
        with pytest.raises(CurateError, match="9-d vectors, but it answered 8-d ones before"):
            t.encode_docs(["FAULTS[wrongdim] odd one"])
        t.close()
    with FakeLLMServer(embed_dim=16) as other:  # another model under the same name, next run
        t = _teacher([other.base_url], tmp_path)
        with pytest.raises(CurateError, match="16-d vectors, but the embedding cache at .* holds 8-d vectors under the name openai:fake"):
            t.encode_docs(["first text", "a new text"])
        assert t.cache.get_many("openai:fake", "", ["a new text"]) == [None]
        t.close()


def test_a_server_without_the_model_and_a_missing_url_are_one_line(tmp_path, monkeypatch):
    with FakeLLMServer(models=("other-model",)) as srv:
        t = _teacher([srv.base_url], tmp_path)
        with pytest.raises(CurateError, match="serves other-model, not fake"):
            t.encode_docs(["x"])
        t.close()
    monkeypatch.delenv("CURATE_TEACHER_BASE_URL", raising=False)
    with pytest.raises(CurateError, match="needs --teacher-base-url"):
        Teacher("openai:fake")


def test_the_key_is_never_in_an_error_or_a_file(tmp_path, monkeypatch):
    key = "sk-teacher-secret-123456"
    monkeypatch.setenv("CURATE_TEACHER_API_KEY", key)
    with FakeLLMServer() as srv:
        t = _teacher([srv.base_url], tmp_path)
        with pytest.raises(CurateError) as e:
            t.encode_docs(["FAULTS[echokey] leak"])
        assert "http-400" in str(e.value) and key not in str(e.value)
        assert any(key in r.headers.get("authorization", "") for r in srv.requests)  # it was sent
        t.close()
    assert not any(key.encode() in p.read_bytes() for p in (tmp_path / "cache").rglob("*") if p.is_file())


def test_mine_and_filter_take_a_served_teacher_from_the_command_line(tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    rows = [{"query": f"question {i} on subject {i}", "positive": f"an answer about subject {i} and more"}
            for i in range(12)]
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    env = {"CURATE_CACHE_DIR": str(tmp_path / "cache")}
    with FakeLLMServer(embed_dim=32) as srv:
        proc = run_curate("mine", "--pairs", str(pairs), "--out", str(tmp_path / "m"), "-k", "2", "--method", "naive",
                          "--positive-top", "0", "--teacher", "openai:fake", "--teacher-base-url", srv.base_url,
                          env=env)
        assert proc.returncode == 0, proc.stderr
        recs = read_jsonl(tmp_path / "m" / "mined.jsonl")
        assert len(recs) == 12 and all(r["teacher"]["model"] == "openai:fake" and r["negatives"] for r in recs)
        assert any(r.path.endswith("/embeddings") for r in srv.requests)
        recipe = tmp_path / "recipe.yaml"
        recipe.write_text("steps:\n  - teacher_rank: {positive_top: 0, negative_bottom: 0, "
                          "drop_if_negative_outranks: false}\n")
        proc = run_curate("filter", "--in", str(tmp_path / "m" / "mined.jsonl"), "--out", str(tmp_path / "f"),
                          "--recipe", str(recipe), "--teacher", "openai:fake", "--teacher-base-url", srv.base_url,
                          env=env)
        assert proc.returncode == 0, proc.stderr
        kept = read_jsonl(tmp_path / "f" / "filtered.jsonl")
        assert len(kept) == 12 and all(r["teacher"]["model"] == "openai:fake" for r in kept)
        report = json.loads((tmp_path / "f" / "report.json").read_text())
        assert report["teacher"]["model"] == "openai:fake" and report["teacher"]["encoded"] == 0  # the cache mine left


@pytest.mark.bench  # 23 s: a refused connection is retried six times with backoff before the run gives up
def test_a_served_teacher_nobody_answers_is_one_line_from_the_command_line(tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"query": "a question", "positive": "an answer"}) + "\n", encoding="utf-8")
    proc = run_curate("mine", "--pairs", str(pairs), "--out", str(tmp_path / "m2"), "--teacher", "openai:fake",
                      "--teacher-base-url", "http://127.0.0.1:9/v1", env={"CURATE_CACHE_DIR": str(tmp_path / "cache")})
    assert_one_line_error(proc, "teacher openai:fake", "connection")
    assert not (tmp_path / "m2" / "mined.jsonl").exists()


def test_eval_takes_a_served_model(tmp_path):
    """``curate eval --model openai:NAME``: the served model is what is evaluated, every text
    encoded by the server, the report naming it."""
    from tests.mine_helpers import write_beir

    docs = {f"d{i}": f"document {i} about subject {i}" for i in range(30)}
    queries = {f"q{i}": f"subject {i}" for i in range(10)}
    folder = write_beir(tmp_path / "beir", docs, queries, {f"q{i}": {f"d{i}": 1} for i in range(10)}, "test")
    with FakeLLMServer(models=("fake",), embed_dim=16) as srv:
        proc = run_curate("eval", "--model", "openai:fake", "--teacher-base-url", srv.base_url, "--data", str(folder),
                          "--out", str(tmp_path / "eval.json"), env={"CURATE_CACHE_DIR": str(tmp_path / "cache")})
        assert proc.returncode == 0, proc.stderr
        texts = {t for r in srv.requests if r.method == "POST" for t in r.body["input"]}
    report = json.loads((tmp_path / "eval.json").read_text())
    assert set(docs.values()) <= texts and report["queries"] == 10
    assert report["model"]["id"] == "openai:fake" and report["encoded"] == 40
