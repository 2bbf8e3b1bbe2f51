"""generate's records file ends in item order, whatever order the answers finished in.

Answers are appended as they arrive (so a killed run resumes); once the run is complete the
file is put in item order (the tasks file's order here: item i uses task i), so one command
gives one file. The scripted server's ``slowN`` marker makes early items finish last.
"""

from __future__ import annotations

import json
import os

from curate.generate.stage import write_in_item_order
from tests.fake_llm_server import fake_llm_server
from tests.generate.test_faults import cli_command, make_specs, run_cmd, write_tasks

# concurrency 4: the first three sleep while the others finish, the first one longest
FAULTS = ["slow0.9", "slow0.6", "slow0.3", "ok", "ok", "ok"]


def _tags_in_file_order(run, specs) -> list[int]:
    return [next(i for i, s in enumerate(specs) if s.tag in r["task"]) for r in run.generated]


def test_records_end_in_item_order_though_answers_finish_out_of_order(tmp_path):
    # the client starts a server at one request in flight (curate.llm.limiter): the first answer
    # comes back alone, then the second item sleeps while those sent after it finish
    specs = make_specs("ok", "slow0.9", "slow0.6", "ok", "ok", "ok")
    tasks = write_tasks(tmp_path / "tasks.jsonl", specs)
    with fake_llm_server() as srv:
        run = run_cmd(cli_command(srv, tasks, len(specs), tmp_path / "out"), tmp_path / "out", tmp_path / "home")
        finished = [r.key for r in sorted(srv.chat_requests, key=lambda r: r.t_done)]
    assert len(run.generated) == len(specs)
    assert specs[1].tag in finished[-1], "the second item's answer came last"
    assert _tags_in_file_order(run, specs) == list(range(len(specs)))


def test_a_killed_run_resumes_and_still_ends_in_item_order(tmp_path):
    """What a kill leaves: records in arrival order and half a line. The rerun asks only for the
    lost item and ends with every record once, in item order."""
    specs = make_specs(*FAULTS)
    tasks = write_tasks(tmp_path / "tasks.jsonl", specs)
    out = tmp_path / "out"
    with fake_llm_server() as srv:
        cmd = cli_command(srv, tasks, len(specs), out)
        run_cmd(cmd, out, tmp_path / "home")
        path = out / "generated.jsonl"
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        path.write_text("".join(reversed(lines[1:])) + lines[0][:30], encoding="utf-8")
        for name in ("report.json", ".curate-done.json"):  # a killed run writes none
            (out / name).unlink(missing_ok=True)
        sent = len(srv.chat_requests)
        again = run_cmd(cmd, out, tmp_path / "home")
        assert len(srv.chat_requests) - sent <= 1, "only the lost item is asked for (or read from the cache)"
    assert _tags_in_file_order(again, specs) == list(range(len(specs)))
    def strip(rec: dict) -> dict:  # meta holds times and cache hits
        return {k: v for k, v in rec.items() if k != "meta"}

    assert [strip(json.loads(line)) for line in lines] == [strip(r) for r in again.generated]
    assert again.generated[1:] == [json.loads(line) for line in lines[1:]], "the kept records, moved only"


def test_lines_are_moved_whole_and_unplanned_ones_go_last(tmp_path):
    path = tmp_path / "generated.jsonl"
    lines = ['{"id":"c","query":"x"}\n', '{"id":"z","query":"left by an earlier run"}\n',
             '{"id":"a","query":"é"}\n', '{"id":"b","query":"y"}\n']
    path.write_bytes("".join(lines).encode("utf-8"))
    assert write_in_item_order(path, ["a", "b", "c"]) is True
    assert path.read_bytes() == "".join(lines[i] for i in (2, 3, 0, 1)).encode("utf-8")
    stamp = path.stat().st_mtime_ns
    os.utime(path, ns=(stamp - 10**9, stamp - 10**9))
    assert write_in_item_order(path, ["a", "b", "c"]) is False, "already in order: not rewritten"
    assert path.stat().st_mtime_ns == stamp - 10**9
    assert write_in_item_order(tmp_path / "none.jsonl", ["a"]) is False
