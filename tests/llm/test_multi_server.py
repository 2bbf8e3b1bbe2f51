"""Several --base-url servers: requests spread over them, and a failing one is routed around."""

from __future__ import annotations

import json

from tests.fake_llm_server import fake_llm_server
from tests.helpers import read_jsonl, run_curate


def _tasks(path, n, marker=""):
    path.write_text("".join(json.dumps({"task": f"{marker}Task number {i}: given a question, find answers."}) + "\n"
                            for i in range(n)))
    return path


def test_requests_spread_over_several_servers(tmp_path):
    with fake_llm_server() as a, fake_llm_server() as b:
        proc = run_curate("generate", "--task", "short-long", "-n", "16", "--per-task", "1", "--out", str(tmp_path / "o"),
                          "--tasks-file", str(_tasks(tmp_path / "t.jsonl", 16)), "--model", "fake",
                          "--base-url", a.base_url, "--base-url", b.base_url, "--concurrency", "2")
        assert proc.returncode == 0, proc.stderr
        assert len(read_jsonl(tmp_path / "o" / "generated.jsonl")) == 16
        na, nb = len(a.chat_requests), len(b.chat_requests)
        assert na + nb == 16
        assert na >= 4 and nb >= 4, (na, nb)


def test_a_dead_server_is_routed_around(tmp_path):
    with fake_llm_server() as good, fake_llm_server() as bad:
        bad.stop()  # nothing listens there any more: connections are refused
        proc = run_curate("generate", "--task", "short-long", "-n", "8", "--per-task", "1", "--out", str(tmp_path / "o"),
                          "--tasks-file", str(_tasks(tmp_path / "t.jsonl", 8)), "--model", "fake",
                          "--base-url", bad.base_url, "--base-url", good.base_url, "--concurrency", "2",
                          "--backoff-base", "0.05", "--max-retries", "3")
        assert proc.returncode == 0, proc.stderr
        assert len(read_jsonl(tmp_path / "o" / "generated.jsonl")) == 8, "every item reached the live server"
        assert read_jsonl(tmp_path / "o" / "failed.jsonl") == []
