"""`curate generate --batch api` when the batches server misbehaves (tests/fake_batch_server.py's
fault knobs): each failure is one line naming the (masked) server, never a key and never a
traceback; a batch that ended without answers is never adopted again; a bad or repeated output
line is counted and said, and a run cut off while it polls resumes the same batch."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fake_batch_server import fake_batch_server
from tests.fake_llm_server import fake_llm_server
from tests.generate.test_from_pairs import _env
from tests.helpers import REPO, read_jsonl, run_curate
from tests.llm.test_batch import N, _args, _docs, answer

KEY = "sk-test-0123456789abcdefSECRET"
POLL = ("--batch", "api", "--batch-poll", "0.05")


def _one_line_error(proc, *needles: str) -> str:
    """The run's single error line (exit 2), after checking it says each of ``needles``."""
    errors = [line for line in proc.stderr.splitlines() if line.startswith("curate: ")]
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert len(errors) == 1 and errors[0].startswith("curate: error: "), proc.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


def _state(out: Path) -> list[dict]:
    return json.loads((out / "batch" / "generate" / "state.json").read_text())["rounds"]


def _all_text(folder: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())


def _once_each(out: Path) -> None:
    records = read_jsonl(out / "generated.jsonl")
    assert len(records) == N and len({r["id"] for r in records}) == N and not read_jsonl(out / "failed.jsonl")


def test_a_server_that_refuses_the_key_and_echoes_it_is_one_line_without_the_key(tmp_path):
    docs, out = _docs(tmp_path / "docs"), tmp_path / "out"
    with fake_llm_server() as chat, fake_batch_server(chat, refuse_key=True) as srv:
        proc = run_curate(*_args(docs, out, srv.base_url, *POLL, "--api-key", KEY), env=_env(tmp_path / "h"))
        assert srv.created == 0
    _one_line_error(proc, "the server refused the key", srv.base_url)
    assert KEY not in proc.stderr + proc.stdout and "SECRET" not in proc.stderr
    assert KEY not in _all_text(out), "nothing written keeps the key"


def test_an_unreachable_server_is_one_line_naming_its_masked_url(tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://user:pw-secret-4242@127.0.0.1:{port}/v1"
    proc = run_curate(*_args(_docs(tmp_path / "docs"), tmp_path / "out", url, *POLL), env=_env(tmp_path / "h"))
    _one_line_error(proc, f"http://***@127.0.0.1:{port}/v1")
    assert "pw-secret-4242" not in proc.stderr + proc.stdout


@pytest.mark.parametrize("dead", ["expired", "allfailed", "failed"])
@pytest.mark.parametrize("then", ["retry-failed", "fresh-out"])
def test_a_batch_that_ended_without_answers_is_never_adopted_again(tmp_path, dead, then):
    """Every follow-up round of a run whose batches all die sends a new batch (the requests file is
    the same, so is its digest); once the server answers again, a retry or a fresh run gets a new
    batch and its records instead of the dead batch's failures."""
    docs, out = _docs(tmp_path / "docs"), tmp_path / "out"
    with fake_llm_server(responder=answer) as chat, fake_batch_server(chat, dead=dead) as srv:
        first = run_curate(*_args(docs, out, srv.base_url, *POLL), env=_env(tmp_path / "h"))
        assert "Traceback" not in first.stderr and "internal error" not in first.stderr, first.stderr  # all failed
        state = _state(out)
        assert len(state) >= 2 and srv.created == len(state), "each round a batch of its own"
        assert len({r["id"] for r in state}) == len(state) and len(read_jsonl(out / "failed.jsonl")) == N
        srv.dead = None  # the server answers again
        before = srv.created
        if then == "retry-failed":
            again = run_curate(*_args(docs, out, srv.base_url, *POLL, "--retry-failed"), env=_env(tmp_path / "h"))
        else:
            out = tmp_path / "fresh"
            again = run_curate(*_args(docs, out, srv.base_url, *POLL), env=_env(tmp_path / "h2"))
        assert again.returncode == 0, again.stderr
        assert srv.created == before + 1, "a new batch, not the dead one found again by its digest"
    _once_each(out)


def test_an_output_line_that_is_not_json_is_named_counted_and_asked_again(tmp_path):
    docs, out = _docs(tmp_path / "docs"), tmp_path / "out"
    with fake_llm_server(responder=answer) as chat, fake_batch_server(chat, garble={1: 3}) as srv:
        proc = run_curate(*_args(docs, out, srv.base_url, *POLL), env=_env(tmp_path / "h"))
        assert proc.returncode == 0, proc.stderr
        assert str(out / "batch" / "generate" / "output-1.jsonl") in proc.stderr and "line 3: not JSON" in proc.stderr
        assert srv.created == 2 and _state(out)[1]["count"] == 1, "its request went out again, alone"
        assert _state(out)[0]["bad_lines"] == 1
        again = run_curate(*_args(docs, out, srv.base_url, *POLL), env=_env(tmp_path / "h"))
        assert again.returncode == 0 and srv.created == 2, again.stderr
    _once_each(out)


def test_a_repeated_custom_id_keeps_the_first_answer_and_says_so(tmp_path):
    docs, out = _docs(tmp_path / "docs"), tmp_path / "out"
    with fake_llm_server(responder=answer) as chat, fake_batch_server(chat, duplicate={1}) as srv:
        proc = run_curate(*_args(docs, out, srv.base_url, *POLL), env=_env(tmp_path / "h"))
        assert proc.returncode == 0, proc.stderr
        assert srv.created == 1
    assert "1 repeated custom_id" in proc.stderr and "the first answer kept" in proc.stderr
    assert _state(out)[0]["duplicates"] == 1
    _once_each(out)
    assert not [r for r in read_jsonl(out / "generated.jsonl") if "SECOND" in json.dumps(r)], "the second answer lost"


def test_a_404_on_retrieve_is_one_line_and_the_next_run_polls_the_same_batch(tmp_path):
    docs, out = _docs(tmp_path / "docs"), tmp_path / "out"
    with fake_llm_server(responder=answer) as chat, fake_batch_server(chat, lost=True) as srv:
        proc = run_curate(*_args(docs, out, srv.base_url, *POLL), env=_env(tmp_path / "h"))
        _one_line_error(proc, "batch_1", "404", srv.base_url, str(out / "batch" / "generate" / "state.json"))
        assert srv.created == 1 and _state(out)[0]["id"] == "batch_1"
        srv.lost = False
        again = run_curate(*_args(docs, out, srv.base_url, *POLL), env=_env(tmp_path / "h"))
        assert again.returncode == 0, again.stderr
        assert "polling the batch a killed run left" in again.stderr and srv.created == 1
    _once_each(out)


def test_a_server_gone_mid_poll_is_one_line_and_the_next_run_polls_the_same_batch(tmp_path):
    docs, out = _docs(tmp_path / "docs"), tmp_path / "out"
    with fake_llm_server(responder=answer) as chat, fake_batch_server(chat, hold=10**6) as srv:
        cmd = [sys.executable, "-m", "curate", *_args(docs, out, srv.base_url, *POLL)]
        proc = subprocess.Popen(cmd, cwd=REPO, env=_env(tmp_path / "h"), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while srv.retrieves < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # polled a few times: the batch is in progress
        srv.stop()
        _, stderr = proc.communicate(timeout=120)
        proc.stderr = stderr
        _one_line_error(proc, "batch_1", srv.base_url, str(out / "batch" / "generate" / "state.json"))
        assert srv.created == 1 and not read_jsonl(out / "generated.jsonl")
        srv.hold = 0
        srv.start()  # back on the same port
        again = run_curate(*cmd[3:], env=_env(tmp_path / "h"))
        assert again.returncode == 0, again.stderr
        assert "polling the batch a killed run left" in again.stderr and srv.created == 1
    _once_each(out)


def test_redact_masks_a_bearer_token_the_server_echoes_but_not_prose():
    from curate.llm.redact import Scrubber

    scrub = Scrubber.for_config(None, ["http://127.0.0.1:1/v1"])
    assert scrub(f"bad key Bearer {KEY}.") == "bad key Bearer ***."
    assert scrub("Bearer instruments pay the holder") == "Bearer instruments pay the holder"


def test_batch_output_reading_skips_bad_lines_and_keeps_the_first_of_a_repeated_custom_id():
    from curate.llm.batch import read_output

    def line(key: str, text: str) -> str:
        body = {"choices": [{"message": {"content": text}}]}
        return json.dumps({"custom_id": key, "response": {"status_code": 200, "body": body}})

    got = read_output("\n".join([line("a", "first"), '{"custom_id": "b", "resp', line("a", "second"), "[1]"]))
    assert got.answers["a"]["choices"][0]["message"]["content"] == "first" and "b" not in got.answers
    assert got.bad_lines == [2, 4] and got.duplicates == [3]
