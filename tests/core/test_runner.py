"""The run folder every stage writes through (curate/core/runner.py): outputs swapped in
together, killed runs finished or discarded by the next run, one writer per folder, lineage,
problems with the folder found before the work, and the user's umask respected."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from curate.core import runner
from curate.core.errors import CurateError
from curate.core.jsonl import atomic_write_jsonl
from tests.helpers import REPO, assert_one_line_error, read_jsonl, run_curate


def _labelled(path: Path, words: tuple[str, ...]) -> Path:
    rows = [{"text": f"{w} number {i}", "label": "ab"[i % 2]} for i, w in enumerate(words)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _convert(inp: Path, out: Path, *extra: str, env: dict | None = None):
    return run_curate("convert", "--kind", "classification", "--random-negatives", "--negatives", "1",
                      "--in", str(inp), "--out", str(out), *extra, env=env)


def _snapshot(out: Path) -> dict[str, object]:
    """Each output's contents, less the clock readings that differ between two equal runs."""
    snap: dict[str, object] = {}
    for p in sorted(out.iterdir()):
        if p.is_file() and not p.name.startswith("."):
            snap[p.name] = p.read_text()
            if p.suffix == ".json":
                snap[p.name] = {k: v for k, v in json.loads(snap[p.name]).items()
                                if k not in ("wall_seconds", "seconds", "started")}
    return snap


def _killed_convert(inp: Path, out: Path, kill_when: str) -> int:
    """``curate convert`` in a process that dies (no clean-up, like SIGKILL) at one rename of
    the commit: ``kill_when`` is 'journal' (before the journal is written: outputs staged,
    nothing swapped) or 'first-swap' (after the first output has been swapped in)."""
    script = textwrap.dedent(f"""
        import os, sys
        real = os.replace
        out = {str(out)!r}
        def replace(src, dst):
            src, dst = str(src), str(dst)
            if {kill_when!r} == "journal" and dst.endswith("{runner.JOURNAL}"):
                os._exit(9)
            real(src, dst)
            if {kill_when!r} == "first-swap" and os.path.dirname(dst) == out and "{runner.STAGING}" in src:
                os._exit(9)
        os.replace = replace
        from curate.cli import cli
        cli(["convert", "--kind", "classification", "--random-negatives", "--negatives", "1",
             "--in", {str(inp)!r}, "--out", out])
    """)
    return subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True).returncode


def _staging_left(out: Path) -> list[str]:
    return [p.name for p in out.glob(f"{runner.STAGING}*")]


def test_run_writes_run_json_with_inputs_counts_and_versions(tmp_path):
    inp = _labelled(tmp_path / "in.jsonl", ("cat", "dog", "cow", "pig"))
    proc = _convert(inp, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert run["stage"] == "convert"
    assert run["params"]["kind"] == "classification" and run["params"]["negatives"] == 1
    import hashlib

    assert run["inputs"] == [{"path": str(inp), "bytes": inp.stat().st_size,
                              "sha256": hashlib.sha256(inp.read_bytes()).hexdigest()}]
    assert run["counts"]["records_out"] == 4
    assert run["outputs"] == ["converted.jsonl", "report.json"]  # no legacy copy of the report
    marker = json.loads((tmp_path / "out" / ".curate-done.json").read_text())
    assert run["fingerprint"] == marker["fingerprint"], "run.json records the runner's one identity"
    assert run["versions"]["curate"] and run["versions"]["python"]
    assert not _staging_left(tmp_path / "out")


@pytest.mark.parametrize("kill_when, expect", [("journal", "old"), ("first-swap", "new")])
def test_a_run_killed_while_writing_leaves_all_old_or_all_new(tmp_path, kill_when, expect):
    out = tmp_path / "out"
    old_in = _labelled(tmp_path / "old.jsonl", ("cat", "dog", "cow", "pig"))
    new_in = _labelled(tmp_path / "new.jsonl", ("red", "blue", "green", "black", "white", "grey"))
    assert _convert(old_in, out).returncode == 0
    old = _snapshot(out)
    assert _convert(new_in, tmp_path / "reference").returncode == 0
    new = _snapshot(tmp_path / "reference")

    assert _killed_convert(new_in, out, kill_when) == 9
    assert _staging_left(out), "the kill should have left a staging folder"
    if kill_when == "journal":
        assert _snapshot(out) == old  # nothing swapped yet
    else:
        mixed = _snapshot(out)
        assert mixed != old and mixed != new  # half swapped: what the next run must repair

    # the next run on the folder (here one that fails on its input) finishes or discards it first
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    assert_one_line_error(_convert(bad, out), f"{bad}:1")
    after = _snapshot(out)
    strip = lambda snap: {k: v for k, v in snap.items() if k != "run.json"}  # noqa: E731
    assert strip(after) == strip(old if expect == "old" else new)
    assert after["run.json"]["inputs"][0]["path"] == str(old_in if expect == "old" else new_in)
    assert not _staging_left(out)


def test_second_run_on_a_locked_folder_refuses_naming_the_holder(tmp_path):
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, time
            from curate.core.runner import open_run
            with open_run("hold", {str(out)!r}):
                print("holding", flush=True)
                sys.stdin.readline()
        """)], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        inp = _labelled(tmp_path / "in.jsonl", ("cat", "dog", "cow", "pig"))
        proc = _convert(inp, out)
        assert_one_line_error(proc, str(out), f"pid {holder.pid}", "another curate run")
        assert not (out / "converted.jsonl").exists()
    finally:
        holder.communicate("\n", timeout=60)
    assert holder.returncode == 0
    assert _convert(inp, out).returncode == 0  # free again once the holder is done


def test_generate_on_a_locked_folder_refuses_before_any_server_starts(tmp_path):
    out = tmp_path / "gen"
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import sys\nfrom curate.core.runner import open_run\n"
                               f"with open_run('hold', {str(out)!r}):\n print('in', flush=True); sys.stdin.readline()"],
        cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "in"
        proc = run_curate("generate", "--task", "short-long", "-n", "2", "--out", str(out),
                          "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
        assert_one_line_error(proc, f"pid {holder.pid}")
        assert not (out / "generated.jsonl").exists()
    finally:
        holder.communicate("\n", timeout=60)


def test_export_reading_a_file_inside_its_own_out_keeps_that_file(tmp_path):
    from curate.core.records import Negative, Record

    out = tmp_path / "exp"
    recs = [Record(id=f"r{i}", task_type="short-long", task="Find it.", query=f"question {i} about cells",
                   positive=f"an answer {i} about cells", negatives=[Negative(text=f"other text {i}", level=1)])
            for i in range(8)]
    first = tmp_path / "in.jsonl"
    atomic_write_jsonl(first, [r.to_dict() for r in recs])
    assert run_curate("export", "--in", str(first), "--out", str(out), "--batch-size", "2").returncode == 0
    inside = out / "more.jsonl"  # the user keeps records in the export folder and exports them again
    atomic_write_jsonl(inside, [r.to_dict() for r in recs[:4]])
    proc = run_curate("export", "--in", str(inside), "--out", str(out), "--batch-size", "2")
    assert proc.returncode == 0, proc.stderr
    assert len(read_jsonl(inside)) == 4  # still there, untouched
    report = json.loads((out / "report.json").read_text())
    assert [(s["path"], s["records"]) for s in report["sources"]] == [("more.jsonl", 4)]  # relative to the export
    assert not _staging_left(out) and not list(tmp_path.glob(".exp*"))


def test_stale_outputs_are_removed_but_never_an_input(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with runner.open_run("demo", out) as run:
        atomic_write_jsonl(run.path("a.jsonl"), [{"x": 1}])
        atomic_write_jsonl(run.path("b.jsonl"), [{"x": 2}])
    # the next run reads b.jsonl (inside --out) and writes only c.jsonl
    with runner.open_run("demo", out, inputs=[out / "b.jsonl"]) as run:
        atomic_write_jsonl(run.path("c.jsonl"), read_jsonl(out / "b.jsonl"))
    assert not (out / "a.jsonl").exists()  # an output the new run no longer makes
    assert read_jsonl(out / "b.jsonl") == [{"x": 2}]  # read by the run: kept
    assert read_jsonl(out / "c.jsonl") == [{"x": 2}]
    assert json.loads((out / "run.json").read_text())["outputs"] == ["c.jsonl"]
    # another stage writing into the same folder leaves this one's outputs alone
    with runner.open_run("other", out) as run:
        atomic_write_jsonl(run.path("d.jsonl"), [{"x": 3}])
    assert read_jsonl(out / "c.jsonl") == [{"x": 2}] and read_jsonl(out / "d.jsonl") == [{"x": 3}]


def test_rejections_are_written_and_counted(tmp_path):
    with runner.open_run("demo", tmp_path / "out") as run:
        atomic_write_jsonl(run.path("kept.jsonl"), [{"id": "a"}])
        run.reject("b", "too-short", length=2)
        run.reject("c", "too-short", length=1)
    assert read_jsonl(tmp_path / "out" / "rejected.jsonl") == [
        {"id": "b", "stage": "demo", "reason": "too-short", "target": "record", "detail": {"length": 2}},
        {"id": "c", "stage": "demo", "reason": "too-short", "target": "record", "detail": {"length": 1}}]
    assert json.loads((tmp_path / "out" / "run.json").read_text())["counts"]["dropped"] == {"too-short": 2}


def test_a_failed_run_leaves_the_old_outputs_and_no_folder_it_made(tmp_path):
    out = tmp_path / "out"
    with runner.open_run("demo", out) as run:
        atomic_write_jsonl(run.path("a.jsonl"), [{"x": 1}])
    with pytest.raises(RuntimeError):
        with runner.open_run("demo", out) as run:
            atomic_write_jsonl(run.path("a.jsonl"), [{"x": 2}])
            raise RuntimeError("boom")
    assert read_jsonl(out / "a.jsonl") == [{"x": 1}] and not _staging_left(out)
    fresh = tmp_path / "fresh"
    with pytest.raises(RuntimeError):
        with runner.open_run("demo", fresh):
            raise RuntimeError("boom")
    assert not fresh.exists()


def test_a_full_disk_is_one_line_before_the_work(tmp_path, monkeypatch):
    import shutil
    from collections import namedtuple

    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(1 << 30, (1 << 30) - 4096, 4096))
    worked = []
    with pytest.raises(CurateError, match=f"{tmp_path / 'out'}: cannot write: no space left"):
        with runner.open_run("demo", tmp_path / "out"):
            worked.append(1)
    assert not worked


def test_a_disk_that_fills_while_writing_is_one_line_and_keeps_the_old_outputs(tmp_path, monkeypatch):
    out = tmp_path / "out"
    with runner.open_run("demo", out) as run:
        atomic_write_jsonl(run.path("a.jsonl"), [{"x": 1}])
    from curate.core import jsonl

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device", str(out / "a.jsonl"))

    with pytest.raises(CurateError) as err:
        with runner.open_run("demo", out) as run:
            monkeypatch.setattr(jsonl.os, "fsync", full)
            atomic_write_jsonl(run.path("a.jsonl"), [{"x": 2}])
    monkeypatch.undo()
    assert str(err.value) == f"{out / 'a.jsonl'}: cannot write: no space left on the device"
    assert read_jsonl(out / "a.jsonl") == [{"x": 1}] and not _staging_left(out)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder_is_one_line_naming_it(tmp_path):
    out = tmp_path / "ro"
    out.mkdir()
    out.chmod(0o555)
    try:
        proc = _convert(_labelled(tmp_path / "in.jsonl", ("cat", "dog", "cow", "pig")), out)
        assert_one_line_error(proc, str(out), "cannot write")
    finally:
        out.chmod(0o755)


def test_an_unwritable_folder_is_one_line_naming_it(tmp_path, monkeypatch):
    """The same check without needing an unprivileged user: the folder reports no write access."""
    out = tmp_path / "ro"
    out.mkdir()
    real = os.access
    monkeypatch.setattr(runner.os, "access", lambda p, mode: False if Path(p) == out else real(p, mode))
    with pytest.raises(CurateError, match=f"^{out}: cannot write here: permission denied$"):
        with runner.open_run("demo", out):
            pass


def test_outputs_follow_the_umask(tmp_path):
    inp = _labelled(tmp_path / "in.jsonl", ("cat", "dog", "cow", "pig"))
    for mask, mode in ((0o022, 0o644), (0o027, 0o640)):
        out = tmp_path / f"out-{mask:o}"
        proc = subprocess.run(
            ["bash", "-c", f'umask {mask:03o} && exec "$0" -m curate convert --kind classification '
                           f'--random-negatives --in {inp} --out {out}', sys.executable],
            cwd=REPO, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        for name in ("converted.jsonl", "report.json", "run.json"):
            assert (out / name).stat().st_mode & 0o777 == mode, (name, oct((out / name).stat().st_mode))


def test_lock_is_released_when_its_holder_is_killed(tmp_path):
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", f"from curate.core.runner import open_run\nimport time\n"
                               f"with open_run('hold', {str(out)!r}):\n print('in', flush=True); time.sleep(600)"],
        cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "in"
    holder.kill()
    holder.wait(timeout=60)
    started = time.monotonic()
    with runner.open_run("demo", out) as run:
        atomic_write_jsonl(run.path("a.jsonl"), [{"x": 1}])
    assert time.monotonic() - started < 30 and not _staging_left(out)
