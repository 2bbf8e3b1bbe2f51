"""Online runs whose every request fails (issue 52): the real ``curate generate`` against the
scripted server on 127.0.0.1, or a host under the reserved ``.invalid`` TLD.

A server that answers nothing costs about one timeout, not one per record; a failure no retry
fixes (a refused key, a missing model or path, a host that does not resolve) is not retried and
stops the queue, leaving the items to do; a run with no record at all exits 2 with the first
reason on one line, the key masked; a run with some records and some failures exits 0 as always.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.fake_llm_server import fake_llm_server
from tests.helpers import read_jsonl, run_curate

SECRET = "sk-test-refused-5d1e0c"
GOOD_KEY = "sk-test-accepted-93ab"
TIMEOUT = 1.5  # the client's --timeout: scaled down, the server answers never


def _tasks(path: Path, markers: list[str]) -> Path:
    """One task per marker (``""``: none), each line its own so the server scripts each apart."""
    lines = [json.dumps({"task": f"{m} Given a short question about topic number {i}, find encyclopedia "
                                 f"passages that answer it. [item {i}]".strip()}) for i, m in enumerate(markers)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _generate(url: str, out: Path, tasks: Path, n: int, *extra: str, key: str = SECRET):
    return run_curate("generate", "--task", "short-long", "-n", str(n), "--per-task", "1", "--tasks-file", str(tasks),
                      "--out", str(out), "--base-url", url, "--model", "m", "--backoff-base", "0.01", *extra,
                      env={"OPENAI_API_KEY": key, "NO_COLOR": "1", "COLUMNS": "250"}, timeout=300)


def _error_line(proc, *needles: str) -> str:
    """The run failed with exit 2 and one error line, stderr's last (the progress display goes to
    stderr before it), holding every needle, and no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower()]
    assert errors == [lines[-1]] and lines[-1].startswith("curate: error: "), proc.stderr[-3000:]
    for needle in needles:
        assert needle in lines[-1], lines[-1]
    return lines[-1]


def _written(out: Path) -> str:
    """Every file the run left in its folder, as text (to look for a secret in)."""
    return "".join(p.read_text(encoding="utf-8", errors="replace") for p in out.rglob("*")
                   if p.is_file() and not p.name.endswith(".sqlite"))


@pytest.mark.parametrize("concurrency", [1, 8, 64])
def test_a_server_that_answers_nothing_costs_one_timeout_not_one_per_record(tmp_path, concurrency):
    n = 20
    with fake_llm_server(silent=True) as srv:
        started = time.monotonic()
        proc = _generate(srv.base_url, tmp_path / "out", _tasks(tmp_path / "t.jsonl", [""] * n), n,
                         "--timeout", str(TIMEOUT), "--max-retries", "0", "--concurrency", str(concurrency))
        elapsed = time.monotonic() - started
        sent = len(srv.chat_requests)
    _error_line(proc, "answered no request", srv.base_url, "timeout")
    assert sent == 1, f"{sent} requests: one request tries a server that never replied, the rest wait for it"
    assert elapsed < n * TIMEOUT / 2, f"{elapsed:.1f} s: about one timeout, not one per record"
    # nothing was failed: the items stay to do, so the same command asks them once the server is up
    assert read_jsonl(tmp_path / "out" / "failed.jsonl") == []
    assert read_jsonl(tmp_path / "out" / "generated.jsonl") == []


def test_the_first_request_keeps_its_retries_and_the_rest_do_not_each_time_out(tmp_path):
    n = 12
    with fake_llm_server(silent=True) as srv:
        started = time.monotonic()
        proc = _generate(srv.base_url, tmp_path / "out", _tasks(tmp_path / "t.jsonl", [""] * n), n,
                         "--timeout", "1", "--max-retries", "2", "--concurrency", "8")
        elapsed = time.monotonic() - started
        sent = len(srv.chat_requests)
    _error_line(proc, "answered no request", "timeout, 3 attempts")
    assert sent == 3 and elapsed < n * 3 * 1.0 / 2, (sent, elapsed)


def test_a_refused_key_stops_at_once_in_one_masked_line_and_a_good_key_resumes(tmp_path):
    n = 6
    out, tasks = tmp_path / "out", _tasks(tmp_path / "t.jsonl", [""] * n)
    with fake_llm_server(api_key=GOOD_KEY) as srv:  # its 401 repeats the Authorization header it got
        proc = _generate(srv.base_url, out, tasks, n, "--max-retries", "3", "--concurrency", "4")
        refused = len(srv.chat_requests)
        _error_line(proc, "the server refused the key", srv.base_url, "http-401")
        assert SECRET not in proc.stdout + proc.stderr and SECRET not in _written(out)
        assert refused == 1, f"{refused} requests: a refused key is neither retried nor tried on the rest"
        assert read_jsonl(out / "failed.jsonl") == []

        again = _generate(srv.base_url, out, tasks, n, "--max-retries", "3", key=GOOD_KEY)
        assert again.returncode == 0, again.stderr
    assert len(read_jsonl(out / "generated.jsonl")) == n  # the items left to do were asked with the good key


@pytest.mark.parametrize("status, needle", [
    (403, "the server refused the key"),  # the key is known but may not use this model
    (404, "no such model or path"),
])
def test_a_status_no_retry_can_change_is_not_retried_and_stops_the_queue(tmp_path, status, needle):
    n = 4
    with fake_llm_server() as srv:
        proc = _generate(srv.base_url, tmp_path / "out", _tasks(tmp_path / "t.jsonl", [f"FAULTS[{status}]"] * n), n,
                         "--max-retries", "3", "--concurrency", "2")
        sent = len(srv.chat_requests)
    _error_line(proc, needle, srv.base_url, f"http-{status}")
    assert sent == 1, sent


def test_a_host_that_does_not_resolve_is_not_retried(tmp_path):
    n = 2
    started = time.monotonic()
    proc = _generate("http://nohost.invalid/v1", tmp_path / "out", _tasks(tmp_path / "t.jsonl", [""] * n), n,
                     "--max-retries", "6", "--backoff-base", "1")
    elapsed = time.monotonic() - started
    _error_line(proc, "does not resolve", "nohost.invalid")
    assert SECRET not in proc.stdout + proc.stderr
    assert elapsed < 30, f"{elapsed:.1f} s: six retries with backoff would take about a minute"


def test_every_item_failing_exits_2_with_the_first_reason(tmp_path):
    n = 3
    out = tmp_path / "out"
    with fake_llm_server() as srv:
        proc = _generate(srv.base_url, out, _tasks(tmp_path / "t.jsonl", ["FAULTS[500]"] * n), n,
                         "--max-retries", "1")
    _error_line(proc, "no record was made", "http-500")
    assert len(read_jsonl(out / "failed.jsonl")) == n  # ordinary failures: kept, --retry-failed asks them again


def test_some_records_and_some_failures_exit_0_with_the_counts(tmp_path):
    out = tmp_path / "out"
    with fake_llm_server() as srv:
        proc = _generate(srv.base_url, out, _tasks(tmp_path / "t.jsonl", ["", "FAULTS[500]", ""]), 3,
                         "--max-retries", "0")
    assert proc.returncode == 0, proc.stderr
    assert len(read_jsonl(out / "generated.jsonl")) == 2 and len(read_jsonl(out / "failed.jsonl")) == 1
