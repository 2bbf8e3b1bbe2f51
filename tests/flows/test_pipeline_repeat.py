"""Two unkilled runs of one `curate pipeline` command against one server give the same export.

The scripted model answers after a random pause, so its answers finish in another order each
run; a few passages get one shared query, so minhash's ``keep: first`` has to choose which copy
stays. Each run has its own RUN (its own LLM cache), so every answer comes from the server.
"""

from __future__ import annotations

import random
import threading
import time

import pytest
from pathlib import Path

from tests.fake_llm_server import fake_llm_server
from tests.helpers import SHARED_DATA, read_jsonl, run_curate

N = 12
SHARED_QUERY = "what is known about the cells studied here"


def _answer(body: dict) -> dict:
    """A query from the passage's long words (one passage in three: the one shared query)."""
    passage = body["messages"][-1]["content"].split("Passage:", 1)[1].split("Write one query", 1)[0]
    words = passage.split()
    if len(words) % 3 == 0:
        return {"query": SHARED_QUERY}
    long = [w.strip(".,;:()").lower() for w in words if len(w) > 6][:5]
    return {"query": "what is known about " + " ".join(reversed(long))}


def _scrambling(seed: int):
    """The answer, after a random pause: requests in flight together finish in a random order."""
    draw, lock = random.Random(seed), threading.Lock()

    def respond(body: dict) -> dict:
        with lock:
            pause = draw.uniform(0, 0.3)
        time.sleep(pause)
        return _answer(body)

    return respond


def _export_files(run: Path) -> dict[str, bytes]:
    """Every data file of the export (the report and run.json carry times, the rest must not)."""
    return {str(p.relative_to(run / "export")): p.read_bytes() for p in sorted((run / "export").rglob("*"))
            if p.is_file() and p.name not in ("report.json", "run.json")
            and not p.name.startswith(".curate")}


@pytest.mark.bench
def test_two_runs_of_one_command_export_the_same_bytes(tmp_path):
    docs = tmp_path / "abstracts.jsonl"
    with open(SHARED_DATA / "scifact" / "corpus.jsonl", encoding="utf-8") as fh:
        docs.write_text("".join(line for _, line in zip(range(24), fh)), encoding="utf-8")
    env = {"CURATE_CACHE_DIR": str(tmp_path / "embed-cache"), "NO_COLOR": "1", "TERM": "dumb", "CURATE_DEBUG": ""}
    runs = []
    for k in range(2):
        run = tmp_path / f"run{k}"
        with fake_llm_server(responder=_scrambling(k)) as srv:
            proc = run_curate("pipeline", str(docs), "--out", str(run), "-n", str(N), "--base-url", srv.base_url,
                              "--model", "fake", "--concurrency", "8", "--max-retries", "0", "--max-reasks", "0",
                              "--no-plots", env=env, timeout=900)
            assert proc.returncode == 0, proc.stderr
            assert len(srv.chat_requests) == N, "every answer came from the server"
        runs.append(run)
    generated = [[r["id"] for r in read_jsonl(run / "generate" / "generated.jsonl")] for run in runs]
    assert generated[0] == generated[1], "generate writes its records in item order"
    rejected = read_jsonl(runs[0] / "filter" / "rejected.jsonl")
    assert any(r["reason"] == "near-duplicate-query" for r in rejected), "minhash chose among copies"
    assert rejected == read_jsonl(runs[1] / "filter" / "rejected.jsonl")
    first, second = (_export_files(run) for run in runs)
    assert first and set(first) == set(second)
    for name in first:
        assert first[name] == second[name], f"export/{name} differs between the runs"
