"""`curate generate --batch api`: the requests go out as one batch file through the files and
batches endpoints (a scripted server, tests/fake_batch_server.py, in front of the scripted chat
server), and the answers become the same records an online run makes. A run killed while it polls
polls the same batch again; a failed or expired line is asked again in a follow-up batch."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fake_batch_server import fake_batch_server
from tests.fake_llm_server import fake_llm_server
from tests.generate.test_from_pairs import _env
from tests.helpers import REPO, read_jsonl, run_curate

N = 6


def _docs(folder: Path, marked: str = "") -> Path:
    """Six one-paragraph documents; ``marked`` goes into the third (a FAULTS marker scripts its lines)."""
    folder.mkdir(parents=True)
    topics = ["tides follow the moon", "qubits hold superpositions", "aspirin thins the blood",
              "glaciers carve valleys", "bees dance to share directions", "rust is iron oxide"]
    for i, t in enumerate(topics):
        extra = f" {marked}" if i == 2 and marked else ""
        (folder / f"d{i}.txt").write_text(f"In short, {t}, as the sources agree.{extra}\n", encoding="utf-8")
    return folder


def _args(docs: Path, out: Path, url: str, *extra: str) -> list[str]:
    return ["generate", "--from-corpus", str(docs), "-n", str(N), "--out", str(out), "--base-url", url,
            "--model", "m", "--max-retries", "0", "--max-reasks", "1", "--backoff-base", "0.01", "--timeout", "10",
            *extra]


def answer(body: dict) -> dict:
    """The scripted model answers from the request alone (its passage and seed), never from arrival
    order, so the same requests get the same answers online and in a batch."""
    passage = body["messages"][-1]["content"].split("Passage:", 1)[-1].split()
    return {"query": f"what about {' '.join(passage[2:5])} (seed {body['seed'] % 1000})"}


def _same(records: list[dict]) -> list[tuple]:
    return sorted((r["id"], r["query"], r["positive"]) for r in records)


def test_a_batch_run_makes_the_online_runs_records(tmp_path):
    docs = _docs(tmp_path / "docs", "FAULTS[badschema,ok]")  # a re-ask: the second batch asks it again
    with fake_llm_server(responder=answer) as chat:
        online = run_curate(*_args(docs, tmp_path / "online", chat.base_url), env=_env(tmp_path / "h1"))
        assert online.returncode == 0, online.stderr
        assert "in flight " in online.stderr, "the online bar shows the client's adaptive limit"
        chat.reset()
        with fake_batch_server(chat) as srv:
            proc = run_curate(*_args(docs, tmp_path / "batch", srv.base_url, "--batch", "api", "--batch-poll", "0.05",
                                     "--price-per-1k-tokens", "0.5"), env=_env(tmp_path / "h2"))
            assert proc.returncode == 0, proc.stderr
            assert srv.created == 2, "the re-ask after a bad answer went out in a follow-up batch"
    assert "at $0.5/1k, the batch price)" in proc.stderr and "sent as batches" in proc.stderr
    assert _same(read_jsonl(tmp_path / "batch" / "generated.jsonl")) == \
        _same(read_jsonl(tmp_path / "online" / "generated.jsonl"))
    state = json.loads((tmp_path / "batch" / "batch" / "generate" / "state.json").read_text())["rounds"]
    assert [(r["count"], r["status"]) for r in state] == [(N, "completed"), (1, "completed")]
    lines = read_jsonl(tmp_path / "batch" / "batch" / "generate" / "requests-1.jsonl")
    assert {line["url"] for line in lines} == {"/v1/chat/completions"} and len({x["custom_id"] for x in lines}) == N


def test_a_run_killed_while_polling_polls_the_same_batch_and_never_submits_twice(tmp_path):
    docs = _docs(tmp_path / "docs")
    out = tmp_path / "out"
    with fake_llm_server() as chat, fake_batch_server(chat, hold=10**6) as srv:
        cmd = [sys.executable, "-m", "curate", *_args(docs, out, srv.base_url, "--batch", "api", "--batch-poll", "0.05")]
        proc = subprocess.Popen(cmd, cwd=REPO, env=_env(tmp_path / "h"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while srv.retrieves < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # polled a few times: the batch is in progress
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL and srv.retrieves >= 3, "killed while it polled"
        assert srv.created == 1 and not read_jsonl(out / "generated.jsonl")
        srv.hold = 0  # the batch finishes now
        again = run_curate(*cmd[3:], env=_env(tmp_path / "h"))
        assert again.returncode == 0, again.stderr
        assert "polling the batch a killed run left" in again.stderr
        assert srv.created == 1, "exactly one batch created"
    records = read_jsonl(out / "generated.jsonl")
    assert len(records) == N and len({r["id"] for r in records}) == N, "every record once"


def test_a_failed_line_and_an_expired_batch_are_asked_again_in_follow_up_batches(tmp_path):
    docs = _docs(tmp_path / "docs", "FAULTS[503,ok]")  # its line fails in the batch, then answers
    out = tmp_path / "out"
    with fake_llm_server() as chat, fake_batch_server(chat, expire={1}) as srv:
        proc = run_curate(*_args(docs, out, srv.base_url, "--batch", "api", "--batch-poll", "0.05"),
                          env=_env(tmp_path / "h"))
        assert proc.returncode == 0, proc.stderr
        state = json.loads((out / "batch" / "generate" / "state.json").read_text())["rounds"]
        assert state[0]["status"] == "expired" and state[0]["failed"] >= N // 2
        assert state[1]["count"] == state[0]["failed"], "only the unanswered lines again"
        assert srv.created == len(state) >= 2
    records = read_jsonl(out / "generated.jsonl")
    assert len(records) == N and len({r["id"] for r in records}) == N and not read_jsonl(out / "failed.jsonl")


def test_batch_api_needs_a_server(tmp_path):
    docs = _docs(tmp_path / "docs")
    proc = run_curate("generate", "--from-corpus", str(docs), "--out", str(tmp_path / "o"), "--batch", "api",
                      env=_env(tmp_path / "h"))
    assert proc.returncode != 0 and "--batch api sends the requests to a server's batches endpoint" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "o" / "generated.jsonl").exists()


def _judged(tmp_path: Path) -> Path:
    """Five records with two negatives each, for a judge and for relabel."""
    topics = ["tides", "qubits", "aspirin", "glaciers", "bees"]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps({
        "id": f"r{i}", "task_type": "short-long", "task": "Given a question, retrieve passages that answer it",
        "query": f"what do we know about {t}", "positive": f"A passage that explains {t} in some detail.",
        "negatives": [{"text": f"An unrelated passage number {k} about cooking {t}."} for k in (1, 2)]}) + "\n"
        for i, t in enumerate(topics)), encoding="utf-8")
    return path


@pytest.mark.parametrize("recipe", ["judge", "relabel"])
def test_the_judges_of_filter_and_relabel_ask_in_one_batch_and_decide_as_online(tmp_path, recipe):
    records = _judged(tmp_path)
    if recipe == "judge":
        recipe = tmp_path / "judge.yaml"
        recipe.write_text("name: judge-only\nsteps:\n  - judge_answerable: {on_error: keep}\n")
    args = ["filter", "--in", str(records), "--recipe", str(recipe), "--model", "m", "--max-retries", "0"]
    with fake_llm_server() as chat:
        online = run_curate(*args, "--out", str(tmp_path / "online"), "--base-url", chat.base_url,
                            env=_env(tmp_path / "h"))
        assert online.returncode == 0, online.stderr
        asked = len(chat.chat_requests)
        with fake_batch_server(chat) as srv:
            out = tmp_path / "batch"
            proc = run_curate(*args, "--out", str(out), "--base-url", srv.base_url, "--batch", "api",
                              "--batch-poll", "0.05", env=_env(tmp_path / "h"))
            assert proc.returncode == 0, proc.stderr
            assert srv.created == 1 and len(chat.chat_requests) == 2 * asked, "every call once, in one batch"

    def decided(folder):  # what each record became: kept (with its negatives and verdicts) or dropped and why
        kept = [(r["id"], [n["text"] for n in r["negatives"]], len(r.get("positives") or []),
                 json.dumps(r.get("scores", {}).get("judges"), sort_keys=True))
                for r in read_jsonl(folder / "filtered.jsonl")]
        return kept + sorted((d["id"], d["reason"]) for d in read_jsonl(folder / "rejected.jsonl"))

    assert decided(out) == decided(tmp_path / "online") and decided(out)
    state = json.loads((out / "batch" / recipe_step(recipe) / "state.json").read_text())["rounds"]
    assert [r["status"] for r in state] == ["completed"] and state[0]["count"] == asked


def recipe_step(recipe) -> str:
    return "relabel" if str(recipe) == "relabel" else "judge_answerable"


def test_a_batch_created_by_a_run_killed_before_it_saved_the_id_is_found_not_created_again(tmp_path):
    """The requests file's hash rides in the batch's metadata: a run that lost the id (killed between
    creating the batch and writing state.json) finds that batch on the server and polls it."""
    import asyncio

    from curate.llm.batch import api_runner, file_digest, request_line

    requests = tmp_path / "requests-1.jsonl"
    body = {"model": "m", "messages": [{"role": "user", "content": "Passage: a b c d"}], "seed": 1}
    requests.write_text(json.dumps(request_line("k1", body)) + "\n", encoding="utf-8")
    with fake_llm_server(responder=answer) as chat, fake_batch_server(chat) as srv:
        import httpx

        up = httpx.post(srv.base_url + "/files", files={"file": ("r.jsonl", requests.read_bytes())},
                        data={"purpose": "batch"}).json()
        httpx.post(srv.base_url + "/batches", json={"input_file_id": up["id"], "endpoint": "/v1/chat/completions",
                                                    "completion_window": "24h",
                                                    "metadata": {"curate_requests": file_digest(requests)}})
        saved = []
        run = api_runner(srv.base_url, None, 0.01, lambda line: None)
        record = asyncio.run(run(requests, {"round": 1, "requests": requests.name, "count": 1}, saved.append))
        assert srv.created == 1 and record["id"] == "batch_1" and saved[0]["id"] == "batch_1"
        assert record["status"] == "completed" and (tmp_path / record["output"]).is_file()
