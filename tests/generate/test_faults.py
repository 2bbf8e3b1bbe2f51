"""Fault injection: the real ``curate generate`` CLI against a scripted fake LLM server.

Each task in the tasks file carries a ``FAULTS[...]`` marker that tells the fake server
(tests/fake_llm_server.py) what to do with the Nth request for that task, plus a unique tag
so requests, records and failures can be matched to the task that caused them.

Starting the CLI costs about a second and a half, so the tests share a few runs:

* ``mixed``: every fault at once (concurrency 4, --max-retries 2, --max-reasks 2, --timeout 2),
  which most tests inspect, each for what its name says;
* ``strict``: other limits (--max-retries 1, --max-reasks 0, --timeout 0.5), every item failing;
* a resume sequence (-n 2, then -n 4, then a fresh folder) for resuming and determinism.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

try:
    from tests.fake_llm_server import FakeLLMServer, fake_llm_server
except ImportError:  # pragma: no cover - tests/ on sys.path without a package
    from fake_llm_server import FakeLLMServer, fake_llm_server

REPO = Path(__file__).resolve().parents[1]
CLI_TIMEOUT_S = 120  # a hung CLI fails the test instead of hanging the suite
N_NEGATIVES = 4  # tasks/short-long.yaml
BACKOFF_BASE = 0.05
KNOWN_PREFIXES = ("http-", "timeout", "connection", "invalid-json", "schema", "truncated")


# --------------------------------------------------------------------------- helpers


@lru_cache(maxsize=None)
def generate_help() -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "curate", "generate", "--help"],
        cwd=REPO, env=_env(), capture_output=True, text=True, timeout=60,
    )
    return proc.stdout + proc.stderr


def _env(home: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("OPENAI_BASE_URL", None)
    env.pop("CURATE_DEBUG", None)
    env.update({"OPENAI_API_KEY": "fake-key", "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200",
                "PYTHONPATH": str(REPO) + os.pathsep + env.get("PYTHONPATH", "")})
    if home is not None:  # keep any user-level cache/config out of the tests
        env.update({"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"),
                    "XDG_CONFIG_HOME": str(home / ".config")})
    return env


@dataclass
class Spec:
    """One task line: its fault script and a unique tag to find it again."""

    faults: str
    tag: str
    text: str


@dataclass
class Run:
    cmd: list[str]
    proc: subprocess.CompletedProcess
    out: Path
    generated: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def output(self) -> str:
        return self.proc.stdout + self.proc.stderr

    def record(self, spec: Spec) -> dict[str, Any]:
        hits = [r for r in self.generated if spec.tag in r.get("task", "")]
        assert len(hits) == 1, (
            f"FAULTS[{spec.faults}]: expected 1 record, got {len(hits)}; "
            f"failure: {self.failure_of(spec, strict=False)}"
        )
        return hits[0]

    def failure_of(self, spec: Spec, strict: bool = True) -> dict[str, Any] | None:
        hits = [r for r in self.failed if spec.tag in r.get("task", "")]
        if not strict:
            return hits[0] if hits else None
        assert len(hits) == 1, (
            f"FAULTS[{spec.faults}]: expected 1 failure, got {len(hits)}; "
            f"records: {[r['id'] for r in self.generated if spec.tag in r.get('task', '')]}"
        )
        return hits[0]


def make_specs(*faults: str) -> list[Spec]:
    run = uuid.uuid4().hex[:8]
    specs = []
    for i, f in enumerate(faults):
        tag = f"[case {run}-{i:02d}]"
        text = (f"FAULTS[{f}] Given a short question about topic number {i}, "
                f"find encyclopedia passages that answer it. {tag}")
        specs.append(Spec(f, tag, text))
    return specs


def spec_for(specs: list[Spec], faults: str) -> Spec:
    return next(s for s in specs if s.faults == faults)


def write_tasks(path: Path, specs: list[Spec]) -> Path:
    path.write_text("".join(json.dumps({"task": s.text}) + "\n" for s in specs), encoding="utf-8")
    return path


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(ln) for ln in lines if ln.strip()]


def cli_command(srv: FakeLLMServer, tasks_file: Path, n: int, out: Path, *, max_retries: int = 2,
                max_reasks: int = 2, timeout: float = 5, concurrency: int = 4) -> list[str]:
    cmd = [
        sys.executable, "-m", "curate", "generate",
        "--task", "short-long", "-n", str(n), "--out", str(out),
        "--base-url", srv.base_url, "--model", "fake",
        "--tasks-file", str(tasks_file), "--per-task", "1",
        "--concurrency", str(concurrency),
        "--max-retries", str(max_retries), "--max-reasks", str(max_reasks),
        "--timeout", str(timeout), "--seed", "0",
    ]
    if "--backoff-base" in generate_help():
        cmd += ["--backoff-base", str(BACKOFF_BASE)]
    return cmd


def run_cmd(cmd: list[str], out: Path, home: Path, expect: int = 0) -> Run:
    """``expect``: the exit code; 0 whenever some record was made, even when items fail, and 2
    (one line with the first reason) when none was."""
    proc = subprocess.run(cmd, cwd=REPO, env=_env(home), capture_output=True, text=True,
                          timeout=CLI_TIMEOUT_S)
    run = Run(cmd, proc, out)
    shown = f"command: {' '.join(cmd)}\n--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"
    assert "Traceback" not in run.output, shown
    assert proc.returncode == expect, shown
    run.generated = _read_jsonl(out / "generated.jsonl")
    run.failed = _read_jsonl(out / "failed.jsonl")
    # a run that made no record failed: it leaves its failures (failed.jsonl), not a report
    assert (out / "report.json").exists() == (expect == 0), shown
    if expect == 0:
        run.summary = json.loads((out / "report.json").read_text(encoding="utf-8"))
    return run


def assert_partition(run: Run, specs: list[Spec]) -> None:
    """Every item is in exactly one of generated.jsonl / failed.jsonl; ids are unique."""
    gen_ids = [r["id"] for r in run.generated]
    bad_ids = [r["id"] for r in run.failed]
    assert len(gen_ids) == len(set(gen_ids)), "duplicate ids in generated.jsonl"
    assert len(bad_ids) == len(set(bad_ids)), "duplicate ids in failed.jsonl"
    assert not set(gen_ids) & set(bad_ids), "an item is both generated and failed"
    assert len(gen_ids) + len(bad_ids) == len(specs)
    for s in specs:
        where = [r for r in run.generated + run.failed if s.tag in r.get("task", "")]
        assert len(where) == 1, f"task FAULTS[{s.faults}] {s.tag} appears {len(where)} times"


def assert_summary(run: Run) -> None:
    counts = run.summary["counts"]
    assert counts["ok"] == len(run.generated), counts
    assert counts["failed"] == len(run.failed), counts
    reasons = run.summary["failure_reasons"]
    assert sum(reasons.values()) == len(run.failed), reasons
    for prefix, n in reasons.items():
        assert sum(1 for f in run.failed if str(f["reason"]).startswith(prefix)) == n, (prefix, reasons)


def assert_record_shape(rec: dict[str, Any], spec: Spec) -> None:
    assert rec["task_type"] == "short-long"
    assert rec["task"].strip() == spec.text
    assert isinstance(rec["id"], str) and rec["id"]
    assert isinstance(rec["query"], str) and rec["query"]
    assert isinstance(rec["positive"], str) and rec["positive"]
    assert isinstance(rec["positive_score"], (int, float))
    assert isinstance(rec["positive_answerable"], bool)
    negs = rec["negatives"]
    assert len(negs) == N_NEGATIVES
    assert [n["level"] for n in negs] == list(range(1, N_NEGATIVES + 1))
    for n in negs:
        assert isinstance(n["text"], str) and n["text"]
        assert isinstance(n["score"], (int, float))
        assert isinstance(n["answerable"], bool)
    assert isinstance(rec["meta"]["attempts"], int) and rec["meta"]["attempts"] >= 1


def assert_failure_shape(fail: dict[str, Any], spec: Spec) -> None:
    for key in ("id", "task_type", "task", "reason", "attempts", "raw", "meta"):
        assert key in fail, f"failed.jsonl record lacks {key!r}: {fail}"
    assert fail["task_type"] == "short-long"
    assert fail["task"].strip() == spec.text
    assert str(fail["reason"]).startswith(KNOWN_PREFIXES), fail["reason"]


def reason_kind(reason: str) -> str:
    return reason.split(":", 1)[0].split(" ", 1)[0]


# --------------------------------------------------------------------------- shared runs

MIXED = {
    # fault script -> expected outcome: "ok" or the failure reason's prefix
    "ok": "ok",
    "429,ok": "ok",
    "429s0,429s0,ok": "ok",
    "500,ok": "ok",
    "503,500,ok": "ok",
    "timeout,ok": "ok",
    "drop,ok": "ok",
    "drop,503,ok": "ok",
    "malformed,ok": "ok",
    "truncated,ok": "ok",
    "length,ok": "ok",
    "badschema,ok": "ok",
    "500,malformed,ok": "ok",
    "500": "http-500",
    "503": "http-503",
    "drop": "connection",
    "400": "http-400",
    "malformed": "invalid-json",
    "truncated": "invalid-json",
    "length": "truncated",
    "badschema": "schema",
    "empty": "invalid-json",
    **{f"slow0.{i}": "ok" for i in range(3, 9)},  # slow answers keep several requests in flight
}
MIXED_RETRIES, MIXED_REASKS, MIXED_TIMEOUT = 2, 2, 2.0


@dataclass
class Shared:
    srv: FakeLLMServer
    specs: list[Spec]
    run: Run
    home: Path


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """All faults at once, plus some plain items, with concurrency 4."""
    tmp = tmp_path_factory.mktemp("mixed")
    specs = make_specs(*MIXED, *(["ok"] * 5))
    tasks = write_tasks(tmp / "tasks.jsonl", specs)
    with fake_llm_server(timeout_sleep=300) as srv:  # stop() cuts the sleep short
        cmd = cli_command(srv, tasks, len(specs), tmp / "out", max_retries=MIXED_RETRIES,
                          max_reasks=MIXED_REASKS, timeout=MIXED_TIMEOUT, concurrency=4)
        run = run_cmd(cmd, tmp / "out", tmp / "home")
        yield Shared(srv, specs, run, tmp / "home")


STRICT = {
    # --max-retries 1 --max-reasks 0 --timeout 0.5: every item fails (a 404 is no per-item fault:
    # it stops the whole queue, tests/llm/test_fail_fast.py)
    "500": ("http-500", 2),
    "503,503,ok": ("http-503", 2),
    "timeout": ("timeout", 2),
    "drop": ("connection", 2),
    "malformed,ok": ("invalid-json", 1),
    "length,ok": ("truncated", 1),
    "badschema,ok": ("schema", 1),
}


@pytest.fixture(scope="module")
def strict(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("strict")
    specs = make_specs(*STRICT)
    tasks = write_tasks(tmp / "tasks.jsonl", specs)
    with fake_llm_server(timeout_sleep=300) as srv:  # stop() cuts the sleep short
        cmd = cli_command(srv, tasks, len(specs), tmp / "out", max_retries=1, max_reasks=0,
                          timeout=0.5, concurrency=4)
        yield Shared(srv, specs, run_cmd(cmd, tmp / "out", tmp / "home", expect=2), tmp / "home")


# --------------------------------------------------------------------------- CLI present


def test_cli_generate_help_lists_the_fault_options():
    text = generate_help()
    assert "Traceback" not in text, text
    for opt in ("--tasks-file", "--per-task", "--base-url", "--max-retries", "--max-reasks",
                "--timeout", "--concurrency", "--seed", "--out", "--backoff-base"):
        assert opt in text, f"{opt} missing from `curate generate --help`:\n{text}"


# --------------------------------------------------------------------------- the mixed run


def test_every_item_in_exactly_one_file(mixed):
    assert_partition(mixed.run, mixed.specs)
    assert_summary(mixed.run)


def test_exit_zero_and_no_traceback_with_failures(mixed):
    assert mixed.run.proc.returncode == 0
    assert "Traceback" not in mixed.run.output
    assert mixed.run.failed, "the mixed run should have some failures"


def test_mixed_outcomes_match_the_scripts(mixed):
    srv, run = mixed.srv, mixed.run
    want_failed = Counter()
    for s in mixed.specs:
        want = MIXED[s.faults]
        if want == "ok":
            rec = run.record(s)
            assert_record_shape(rec, s)
            # meta.attempts counts the HTTP requests this item needed
            assert rec["meta"]["attempts"] == srv.count_for(s.tag), s.faults
        else:
            fail = run.failure_of(s)
            assert_failure_shape(fail, s)
            assert fail["reason"].startswith(want), (s.faults, fail["reason"])
            want_failed[want] += 1
    assert Counter(reason_kind(f["reason"]) for f in run.failed) == want_failed
    assert run.summary["failure_reasons"] == dict(want_failed)
    assert run.summary["counts"]["ok"] == sum(1 for s in mixed.specs if MIXED[s.faults] == "ok")


def test_concurrency_limit_holds_and_requests_overlap(mixed):
    peak = mixed.srv.max_inflight(client_timeout=MIXED_TIMEOUT)
    assert peak <= 4, f"{peak} requests in flight with --concurrency 4"
    assert peak >= 2, "requests never overlapped: the run was serial"


def test_429_with_retry_after_then_ok_waits_and_records(mixed):
    s = spec_for(mixed.specs, "429,ok")
    rec = mixed.run.record(s)
    assert_record_shape(rec, s)
    reqs = mixed.srv.requests_for(s.tag)
    assert [r.action for r in reqs] == ["429", "ok"]
    waited = reqs[1].t - reqs[0].t
    assert waited >= 0.9, f"retried {waited:.3f}s after a 429 with Retry-After: 1"
    assert rec["meta"]["attempts"] == 2


def test_persistent_500_fails_after_exactly_max_retries(mixed):
    s = spec_for(mixed.specs, "500")
    fail = mixed.run.failure_of(s)
    assert fail["reason"].startswith("http-500"), fail["reason"]
    reqs = mixed.srv.requests_for(s.tag)
    assert len(reqs) == 1 + MIXED_RETRIES
    assert fail["attempts"] == 1 + MIXED_RETRIES
    gaps = [b.t - a.t for a, b in zip(reqs, reqs[1:])]
    assert all(g >= BACKOFF_BASE / 2 * 0.8 for g in gaps), f"no backoff between retries: {gaps}"


def test_persistent_503_fails_after_exactly_max_retries(mixed):
    s = spec_for(mixed.specs, "503")
    fail = mixed.run.failure_of(s)
    assert fail["reason"].startswith("http-503"), fail["reason"]
    assert mixed.srv.count_for(s.tag) == 1 + MIXED_RETRIES


def test_transient_5xx_then_ok_records(mixed):
    for faults in ("500,ok", "503,500,ok"):
        s = spec_for(mixed.specs, faults)
        assert_record_shape(mixed.run.record(s), s)
        assert mixed.srv.actions_for(s.tag) == faults.split(",")


def test_timeout_then_ok_records(mixed):
    s = spec_for(mixed.specs, "timeout,ok")
    assert_record_shape(mixed.run.record(s), s)
    reqs = mixed.srv.requests_for(s.tag)
    assert [r.action for r in reqs] == ["timeout", "ok"]
    waited = reqs[1].t - reqs[0].t
    assert waited >= MIXED_TIMEOUT * 0.9, f"gave up after {waited:.2f}s, before the {MIXED_TIMEOUT}s timeout"
    assert waited < 10, f"a {MIXED_TIMEOUT}s timeout took {waited:.2f}s to fire"


def test_drop_then_ok_records(mixed):
    for faults in ("drop,ok", "drop,503,ok"):
        s = spec_for(mixed.specs, faults)
        assert_record_shape(mixed.run.record(s), s)
        assert mixed.srv.actions_for(s.tag) == faults.split(",")


def test_persistent_drop_fails_with_connection_reason(mixed):
    s = spec_for(mixed.specs, "drop")
    fail = mixed.run.failure_of(s)
    assert fail["reason"].startswith("connection"), fail["reason"]
    assert mixed.srv.count_for(s.tag) == 1 + MIXED_RETRIES


def test_client_error_4xx_is_not_retried(mixed):
    s = spec_for(mixed.specs, "400")
    fail = mixed.run.failure_of(s)
    assert fail["reason"].startswith("http-400"), fail["reason"]
    assert mixed.srv.count_for(s.tag) == 1


@pytest.mark.parametrize(
    "faults, prefix",
    [("malformed", "invalid-json"), ("truncated", "invalid-json"), ("length", "truncated"),
     ("badschema", "schema"), ("empty", "invalid-json")],
)
def test_persistent_content_fault_fails_after_max_reasks(mixed, faults, prefix):
    s = spec_for(mixed.specs, faults)
    fail = mixed.run.failure_of(s)
    assert_failure_shape(fail, s)
    assert fail["reason"].startswith(prefix), fail["reason"]
    assert fail["attempts"] == 1 + MIXED_REASKS
    reqs = mixed.srv.requests_for(s.tag)
    assert len(reqs) == 1 + MIXED_REASKS
    assert fail["raw"] == reqs[-1].content, "failed.jsonl 'raw' is not the last answer received"
    seeds = [r.body.get("seed") for r in reqs]
    assert len(set(seeds)) == len(seeds), f"re-asks reused a seed: {seeds}"


@pytest.mark.parametrize("fault", ["malformed", "truncated", "length", "badschema"])
def test_content_fault_then_ok_is_reasked_and_recorded(mixed, fault):
    s = spec_for(mixed.specs, f"{fault},ok")
    rec = mixed.run.record(s)
    assert_record_shape(rec, s)
    assert mixed.srv.actions_for(s.tag) == [fault, "ok"]
    assert rec["meta"]["attempts"] == 2


def test_transport_then_content_fault_then_ok(mixed):
    s = spec_for(mixed.specs, "500,malformed,ok")
    rec = mixed.run.record(s)
    assert mixed.srv.actions_for(s.tag) == ["500", "malformed", "ok"]
    assert rec["meta"]["attempts"] == 3


def test_ok_requests_carry_json_schema_and_seed(mixed):
    # (a "timeout" request the client gave up on may still answer, much later: not counted)
    reqs = [r for r in mixed.srv.chat_requests if r.answered == "ok" and not r.action.startswith("timeout")]
    assert len(reqs) == len(mixed.run.generated)
    for r in reqs:
        rf = r.body.get("response_format") or {}
        assert rf.get("type") == "json_schema", rf
        schema = (rf.get("json_schema") or {}).get("schema") or {}
        assert set(schema.get("required", [])) >= {"query", "positive", "negatives"}
        assert isinstance(r.body.get("seed"), int), r.body.get("seed")
        assert r.body.get("model") == "fake"
    # each plain item got its own seed and a prompt with its task text verbatim
    plain = [s for s in mixed.specs if s.faults == "ok"]
    firsts = [mixed.srv.requests_for(s.tag)[0] for s in plain]
    assert len({r.body["seed"] for r in firsts}) == len(firsts)
    for s, r in zip(plain, firsts):
        assert s.text in r.last_user


def test_rerun_sends_nothing_for_finished_items_and_duplicates_nothing(mixed):
    run, srv = mixed.run, mixed.srv
    sent = len(srv.chat_requests)
    gen_before = (run.out / "generated.jsonl").read_text(encoding="utf-8")
    fail_before = (run.out / "failed.jsonl").read_text(encoding="utf-8")

    again = run_cmd(run.cmd, run.out, mixed.home)
    new = srv.chat_requests[sent:]
    assert not new, [(r.key, r.action) for r in new]
    assert_partition(again, mixed.specs)
    assert (run.out / "generated.jsonl").read_text(encoding="utf-8") == gen_before
    assert (run.out / "failed.jsonl").read_text(encoding="utf-8") == fail_before


# --------------------------------------------------------------------------- other limits


def test_strict_limits_all_items_fail_with_exit_two_and_the_first_reason(strict):
    run = strict.run
    assert run.generated == []
    assert_partition(run, strict.specs)
    errors = [line for line in run.proc.stderr.splitlines() if line.startswith("curate: error:")]
    assert run.proc.returncode == 2 and len(errors) == 1 and "no record was made" in errors[0]


def test_strict_limits_are_respected(strict):
    for s in strict.specs:
        prefix, requests = STRICT[s.faults]
        fail = strict.run.failure_of(s)
        assert_failure_shape(fail, s)
        assert fail["reason"].startswith(prefix), (s.faults, fail["reason"])
        assert strict.srv.count_for(s.tag) == requests, (s.faults, strict.srv.actions_for(s.tag))


# --------------------------------------------------------------------------- resume & determinism


def test_resume_with_larger_n_and_same_requests_in_a_fresh_folder(tmp_path):
    specs = make_specs("ok", "429s0,ok", "ok", "malformed,ok")
    tasks = write_tasks(tmp_path / "tasks.jsonl", specs)
    with fake_llm_server() as srv:
        # -n 2: only the first two tasks
        first = run_cmd(cli_command(srv, tasks, 2, tmp_path / "out"), tmp_path / "out", tmp_path / "home")
        assert len(first.generated) == 2
        assert srv.count_for(specs[2].tag) == srv.count_for(specs[3].tag) == 0
        before = {s.tag: srv.count_for(s.tag) for s in specs[:2]}
        # -n 4 in the same folder: another -n starts afresh, but the first two answers come from
        # the request cache, so only the two new items are sent and the first two records return
        second = run_cmd(cli_command(srv, tasks, 4, tmp_path / "out"), tmp_path / "out", tmp_path / "home")
        assert "--num-examples changed" in second.output
        assert_partition(second, specs)
        assert {s.tag: srv.count_for(s.tag) for s in specs[:2]} == before
        assert srv.count_for(specs[2].tag) == 1 and srv.count_for(specs[3].tag) == 2
        without_meta = [{k: v for k, v in r.items() if k != "meta"} for r in second.generated[:2]]
        assert without_meta == [{k: v for k, v in r.items() if k != "meta"} for r in first.generated]
        bodies = sorted(json.dumps(r.body, sort_keys=True) for r in srv.chat_requests)
        ids = sorted(r["id"] for r in second.generated)

    # a fresh folder, a fresh server (so the scripts replay), concurrency 1: the same requests
    with fake_llm_server() as srv:
        third = run_cmd(cli_command(srv, tasks, 4, tmp_path / "out2", concurrency=1),
                        tmp_path / "out2", tmp_path / "home")
        bodies2 = sorted(json.dumps(r.body, sort_keys=True) for r in srv.chat_requests)
    assert bodies == bodies2, "the same items sent different prompts or seeds"
    assert sorted(r["id"] for r in third.generated) == ids


# --------------------------------------------------------------------------- --retry-failed


def test_retry_failed_asks_again(strict):
    """--retry-failed tries earlier failures again: transport and content faults alike.

    The scripts of "503,503,ok", "malformed,ok", "length,ok" and "badschema,ok" now answer ok,
    so every one of those items must reach generated.jsonl with a freshly sent request (a
    cached copy of the bad answer is not a new try).
    """
    run, srv = strict.run, strict.srv
    sent = {s.tag: srv.count_for(s.tag) for s in strict.specs}
    again = run_cmd(run.cmd + ["--retry-failed"], run.out, strict.home)  # some answer now: exit 0
    assert_partition(again, strict.specs)
    for faults in ("503,503,ok", "malformed,ok", "length,ok", "badschema,ok"):
        s = spec_for(strict.specs, faults)
        new = srv.count_for(s.tag) - sent[s.tag]
        assert new >= 1, f"--retry-failed sent no request for FAULTS[{faults}] (reason: {run.failure_of(s)['reason']})"
        assert_record_shape(again.record(s), s)
    for faults in ("500", "timeout", "drop"):  # still failing, still exactly once
        s = spec_for(strict.specs, faults)
        assert again.failure_of(s)["reason"].startswith(STRICT[faults][0])
