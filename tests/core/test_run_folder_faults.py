"""The run folder's promise under kills and overlapping paths (README "Run folders").

* A staged run killed at any point of its swap is finished by the next run on that folder,
  whatever the folder held before (nothing, or an earlier export): the result is the same
  files, byte for byte, as a run that was never killed, and no staging folder is left.
* A run never deletes one of its own inputs: an input inside an entry the run writes anew
  is refused, before the work or, at the latest, before anything is moved.
* An export whose trainer needs negatives is refused when no record has one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from curate.core.errors import CurateError
from curate.core.runner import STAGING, open_run
from tests.helpers import REPO, assert_one_line_error, run_curate

# Runs ``curate ARGS`` with the run folder's swap wrapped: every rename or removal inside
# ``_apply`` (and the end of ``_apply``) is one step; at step STOP the process kills itself
# with SIGKILL, so the kill lands between two renames, never at a time chosen by a clock.
# With STOP=0 it runs through and writes the number of steps to STEPS_FILE.
KILLER = r"""
import os, signal, sys
import curate.core.runner as runner

stop, steps_file = int(sys.argv[1]), sys.argv[2]
seen, inside = [0], [False]
real_replace, real_remove, real_apply = os.replace, runner._remove, runner._apply

def step():
    if inside[0]:
        seen[0] += 1
        if seen[0] == stop:
            os.kill(os.getpid(), signal.SIGKILL)

def replace(src, dst):
    step()
    return real_replace(src, dst)

def remove(path):
    step()
    return real_remove(path)

def apply(*args):
    inside[0] = True
    try:
        real_apply(*args)
        step()
    finally:
        inside[0] = False

os.replace, runner._remove, runner._apply = replace, remove, apply
from curate.cli import main
sys.argv = ["curate", *sys.argv[3:]]
try:
    main()
finally:
    with open(steps_file, "w") as fh:
        fh.write(str(seen[0]))
"""


def _records(path: Path, n: int = 40, negatives: int = 2) -> Path:
    rows = [{"id": f"r{i}", "task_type": "retrieval", "task": "Find documents about the claim.",
             "query": f"query number {i} about cells", "positive": f"document {i} on cells and mice",
             "negatives": [{"text": f"negative {i}.{j} about rats", "level": 1 + j} for j in range(negatives)]}
            for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _killed(tmp: Path, stop: int, *args: str) -> tuple[int, int]:
    steps = tmp / "steps.txt"
    proc = subprocess.run([sys.executable, "-c", KILLER, str(stop), str(steps), *args], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    return proc.returncode, int(steps.read_text()) if steps.exists() else -1


def _snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (hidden ones too), without the run's timings."""
    out = {}
    for p in sorted(folder.rglob("*")):
        if not p.is_file() or p.name in (".curate.lock", ".curate-done.json"):  # the marker names the report's bytes
            continue
        rel = str(p.relative_to(folder))
        data = p.read_bytes()
        if p.name in ("run.json", "report.json", "report.json"):
            obj = json.loads(data)
            for key in ("seconds", "started", "wall_seconds", "timings"):
                obj.pop(key, None)
            data = json.dumps(obj, sort_keys=True).encode()
        out[rel] = data
    return out


def _export_args(inp: Path, out: Path, *formats: str) -> list[str]:
    """(The audit is left out: it is not what these tests are about, and it costs seconds a run.)"""
    return ["export", "--in", str(inp), "--out", str(out), "--no-audit",
            *(a for f in formats for a in ("--format", f))]


@pytest.fixture(scope="module")
def kill_case(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kill")
    recs = _records(tmp / "recs.jsonl")
    reference = {}
    for name, formats in (("all", ("all",)), ("two", ("nemo", "beir"))):
        out = tmp / f"ref-{name}"
        assert run_curate(*_export_args(recs, out, *formats)).returncode == 0
        reference[name] = _snapshot(out)
    rc, steps = _killed(tmp, 0, *_export_args(recs, tmp / "count", "all"))
    assert rc == 0 and steps > 5  # one rename per entry, at least, and the end of the swap
    return tmp, recs, reference, steps


@pytest.mark.bench
@pytest.mark.parametrize("before", ["nothing", "an earlier export"])
def test_export_killed_at_every_step_of_its_swap_is_finished_by_the_next_run(kill_case, before):
    """Every kill point between two renames: the next export (same command) ends with the
    same files as an export never killed; a different export after a kill is not refused."""
    tmp, recs, reference, steps = kill_case
    if before == "an earlier export":  # its files are set aside and replaced, one by one
        count = tmp / "count-over-earlier"
        assert run_curate(*_export_args(recs, count, "nemo", "beir")).returncode == 0
        _, steps = _killed(tmp, 0, *_export_args(recs, count, "all"))
    for stop in range(1, steps + 1):
        out = tmp / f"{before.replace(' ', '-')}-{stop}"
        if before == "an earlier export":
            assert run_curate(*_export_args(recs, out, "nemo", "beir")).returncode == 0
        rc, _ = _killed(tmp, stop, *_export_args(recs, out, "all"))
        assert rc == -9, f"step {stop} of {steps} did not kill"
        assert any(p.name.startswith(STAGING) for p in out.iterdir())  # cut short inside its swap
        again = run_curate(*_export_args(recs, out, "all"))
        assert again.returncode == 0, (stop, again.stderr)
        assert not any(p.name.startswith(STAGING) for p in out.iterdir())
        assert _snapshot(out) == reference["all"], f"killed at step {stop} of {steps}"
        # another command on the recovered folder works too (and replaces the export whole)
        if stop in (1, steps // 2, steps):
            other = run_curate(*_export_args(recs, out, "nemo", "beir"))
            assert other.returncode == 0, other.stderr
            assert _snapshot(out) == reference["two"]


def _failing_commands(recs: Path, out: Path) -> list[list[str]]:
    """Commands on ``out`` that fail on their own input, each at a different place: the option
    parser (no --in), an option's check (a licence with a space), an input file that is not
    there, and another stage's recipe that does not exist."""
    return [["export", "--out", str(out), "--format", "all"],
            [*_export_args(recs, out, "all"), "--license", "x y"],
            _export_args(out.parent / "no-such-records.jsonl", out, "all"),
            ["filter", "--in", str(recs), "--out", str(out), "--recipe", "no-such-recipe"]]


@pytest.mark.bench
def test_a_failing_command_finishes_the_swap_a_killed_export_left(kill_case):
    """Killed at every rename of its swap over an earlier export, then a command that fails on
    its input: it exits 2 with one line, and the folder holds the killed export's files, whole,
    with no staging folder left (the failing run settles the folder before its checks)."""
    tmp, recs, reference, _ = kill_case
    count = tmp / "count-before-failing"
    assert run_curate(*_export_args(recs, count, "nemo", "beir")).returncode == 0
    _, steps = _killed(tmp, 0, *_export_args(recs, count, "all"))
    for stop in range(1, steps + 1):
        out = tmp / f"then-failing-{stop}"
        assert run_curate(*_export_args(recs, out, "nemo", "beir")).returncode == 0
        rc, _ = _killed(tmp, stop, *_export_args(recs, out, "all"))
        assert rc == -9, f"step {stop} of {steps} did not kill"
        assert any(p.name.startswith(STAGING) for p in out.iterdir())
        failing = _failing_commands(recs, out)
        proc = run_curate(*failing[stop % len(failing)])
        assert proc.returncode == 2, (stop, proc.stderr)
        assert "Traceback" not in proc.stderr
        assert not any(p.name.startswith(STAGING) for p in out.iterdir()), f"killed at step {stop}"
        assert _snapshot(out) == reference["all"], f"killed at step {stop} of {steps}"


def test_an_export_killed_into_a_new_folder_is_not_refused_by_a_different_export(kill_case):
    """The fault the issue names: the partial folder used to be 'not an earlier export'."""
    tmp, recs, reference, steps = kill_case
    out = tmp / "new-then-other"
    rc, _ = _killed(tmp, 2, *_export_args(recs, out, "all"))
    assert rc == -9
    proc = run_curate(*_export_args(recs, out, "nemo", "beir"))
    assert proc.returncode == 0, proc.stderr
    assert _snapshot(out) == reference["two"]
    assert not any(p.name.startswith(STAGING) for p in out.iterdir())


@pytest.mark.parametrize("inside", ["hf", "sentence-transformers/data"])
def test_export_refuses_an_input_inside_a_folder_it_replaces(tmp_path, inside):
    recs = _records(tmp_path / "recs.jsonl")
    out = tmp_path / "E"
    assert run_curate(*_export_args(recs, out, "all")).returncode == 0
    before = _snapshot(out)
    moved = out / inside / "x.jsonl"
    moved.write_bytes(recs.read_bytes())
    proc = run_curate(*_export_args(moved, out, "all"))
    assert_one_line_error(proc, str(moved), "move it out of")
    assert moved.read_bytes() == recs.read_bytes()  # the input is still there
    assert _snapshot(out) == {**before, str(moved.relative_to(out)): recs.read_bytes()}  # nothing else moved
    assert proc.returncode == 2


def test_export_keeps_an_input_at_the_top_of_its_folder(tmp_path):
    """A file beside the export's outputs is not one of them: it stays, and so does the export."""
    recs = _records(tmp_path / "recs.jsonl")
    out = tmp_path / "E"
    assert run_curate(*_export_args(recs, out, "all")).returncode == 0
    beside = out / "x.jsonl"
    beside.write_bytes(recs.read_bytes())
    proc = run_curate(*_export_args(beside, out, "hf"))
    assert proc.returncode == 0, proc.stderr
    assert beside.read_bytes() == recs.read_bytes()
    assert (out / "data").is_dir() and not (out / "nemo").exists()


def test_a_run_whose_outputs_would_replace_its_input_is_refused_before_anything_moves(tmp_path):
    """The exact check at commit: whatever stage and whatever it wrote last time."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "data.jsonl").write_text("mine\n", encoding="utf-8")
    with pytest.raises(CurateError, match="data.jsonl: this input is an output this run writes anew"):
        with open_run("filter", out, inputs=[out / "data.jsonl"]) as run:
            run.path("data.jsonl").write_text("theirs\n", encoding="utf-8")
    assert (out / "data.jsonl").read_text(encoding="utf-8") == "mine\n"
    assert sorted(p.name for p in out.iterdir()) == [".curate.lock", "data.jsonl"]  # no staging, no run.json


def test_a_run_over_an_output_it_declares_is_refused_before_the_work(tmp_path):
    out = tmp_path / "out"
    with open_run("filter", out) as run:
        run.path("filtered.jsonl").write_text("first\n", encoding="utf-8")
    worked = []
    with pytest.raises(CurateError, match="filtered.jsonl: this input is an output this run writes anew"):
        with open_run("filter", out, inputs=[out / "filtered.jsonl"], writes=["filtered.jsonl"]):
            worked.append(True)
    assert not worked
    assert (out / "filtered.jsonl").read_text(encoding="utf-8") == "first\n"
    # another stage's output in the same folder is its input, not something it replaces
    with open_run("export", out, inputs=[out / "filtered.jsonl"]) as run:
        run.path("train.jsonl").write_text("rows\n", encoding="utf-8")
    assert (out / "filtered.jsonl").exists() and (out / "train.jsonl").exists()


@pytest.mark.parametrize("fmt", ["flagembedding", "tevatron", "nemo", "nemo-automodel", "all"])
def test_export_without_any_negative_refuses_the_formats_that_need_one(tmp_path, fmt):
    recs = _records(tmp_path / "recs.jsonl", negatives=0)
    out = tmp_path / "E"
    proc = run_curate(*_export_args(recs, out, fmt))
    assert_one_line_error(proc, "no record has a negative", "--format sentence-transformers")
    assert proc.returncode == 2
    assert not out.exists()  # nothing half-written


def test_export_without_any_negative_writes_pairs_for_sentence_transformers(tmp_path):
    recs = _records(tmp_path / "recs.jsonl", negatives=0)
    proc = run_curate(*_export_args(recs, tmp_path / "E", "sentence-transformers"))
    assert proc.returncode == 0, proc.stderr


def test_export_with_one_record_without_negatives_borrows_from_its_batch(tmp_path):
    """The part the issue calls fine stays: one empty row is filled, no format refuses."""
    recs = _records(tmp_path / "recs.jsonl")
    lines = recs.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["negatives"] = []
    lines[0] = json.dumps(first)
    recs.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "E"
    proc = run_curate(*_export_args(recs, out, "nemo"))
    assert proc.returncode == 0, proc.stderr
    rows = [x for f in ("train.json", "dev.json") if (out / f).exists()
            for x in json.loads((out / f).read_text(encoding="utf-8"))]
    assert rows and all(r["neg_doc"] for r in rows)


def test_export_from_python_refuses_true_as_a_count_of_negatives(tmp_path):
    from curate.export.main import ExportOptions, run_export

    recs = _records(tmp_path / "recs.jsonl")
    with pytest.raises(CurateError, match="--negatives-per-row True: give a count of at least 1"):
        run_export(ExportOptions(inputs=(str(recs),), out=str(tmp_path / "E"), negatives_per_row=True))
    assert not (tmp_path / "E").exists()


@pytest.mark.parametrize("stage, output", [("mine", "mined.jsonl"), ("filter", "filtered.jsonl")])
def test_mine_and_filter_refuse_their_own_output_as_input_before_any_model(tmp_path, stage, output):
    """`curate mine --in M/mined.jsonl --out M` would replace its input with its output."""
    out = tmp_path / "M"
    out.mkdir()
    inp = _records(out / output)
    before = inp.read_bytes()
    proc = run_curate(stage, "--in", str(inp), "--out", str(out), env={"HF_HUB_OFFLINE": "1"})
    assert_one_line_error(proc, f"{inp}: this input is an output this run writes anew", "move it out of")
    assert proc.returncode == 2
    assert inp.read_bytes() == before
    assert sorted(p.name for p in out.iterdir()) == [".curate.lock", output]  # no staging, no run.json
