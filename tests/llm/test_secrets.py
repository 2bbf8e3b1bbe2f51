"""API keys are read from the option or the environment, sent to the server, and written nowhere."""

from __future__ import annotations

import json

from tests.fake_llm_server import fake_llm_server
from tests.helpers import run_curate

SECRET = "sk-test-DO-NOT-LEAK-4f9a1c"


def _tasks(path):
    path.write_text(json.dumps({"task": "FAULTS[500,ok] Given a question, find answers."}) + "\n"
                    + json.dumps({"task": "FAULTS[malformed] Given a claim, find evidence."}) + "\n"
                + json.dumps({"task": "FAULTS[echokey] Given a name, find its biography."}) + "\n")
    return path


def _auth(srv) -> set:
    return {next((v for k, v in r.headers.items() if k.lower() == "authorization"), None) for r in srv.chat_requests}


def _assert_not_written(out, proc):
    assert SECRET not in proc.stdout + proc.stderr
    for f in out.rglob("*"):
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f"key leaked into {f}"


def test_api_key_from_environment_is_used_and_never_written(tmp_path):
    out = tmp_path / "o"
    with fake_llm_server() as srv:
        proc = run_curate("generate", "--task", "short-long", "-n", "3", "--per-task", "1", "--out", str(out),
                          "--tasks-file", str(_tasks(tmp_path / "t.jsonl")), "--model", "fake",
                          "--base-url", srv.base_url, "--backoff-base", "0.01", "--max-reasks", "0",
                          env={"OPENAI_API_KEY": SECRET})
        assert proc.returncode == 0, proc.stderr
        assert _auth(srv) == {f"Bearer {SECRET}"}
    _assert_not_written(out, proc)


def test_api_key_option_is_never_written(tmp_path):
    out = tmp_path / "o"
    with fake_llm_server() as srv:
        proc = run_curate("generate", "--task", "short-long", "-n", "3", "--per-task", "1", "--out", str(out),
                          "--tasks-file", str(_tasks(tmp_path / "t.jsonl")), "--model", "fake",
                          "--base-url", srv.base_url, "--api-key", SECRET, "--backoff-base", "0.01",
                          "--max-reasks", "0")
        assert proc.returncode == 0, proc.stderr
        assert _auth(srv) == {f"Bearer {SECRET}"}
    _assert_not_written(out, proc)
