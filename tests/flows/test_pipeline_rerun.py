"""A re-run of `curate pipeline` with another --seed on the same --out (issue 52).

Two promises, through the real command line and the scripted chat server: a re-run that stops
at generate (the model answers nonsense) leaves the earlier run's later stages in their folders,
and nothing that reads the run takes them for this run's (`curate train` refuses, `curate
export --in` refuses, the report names them as an earlier run's); and a re-run that replaces a
finished result keeps it, once, in `RUN/.curate-replaced/<stage>/` and says so.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.fake_llm_server import fake_llm_server
from tests.helpers import REPO, assert_one_line_error, run_curate

N = 8
LATER = ("filter", "holdout", "mine", "export")


def _env(tmp: Path) -> dict[str, str]:
    return {"CURATE_CACHE_DIR": str(tmp / "embed-cache"), "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200",
            "CURATE_DEBUG": ""}


def _responder(state: dict):
    """A query from the passage's long words; nonsense (no query at all) once ``state`` says so."""
    def respond(body: dict) -> dict:
        if state["nonsense"]:
            return {"answer": "I cannot help with that."}
        words = body["messages"][-1]["content"].split("Passage:", 1)[1].split("Write one query", 1)[0].split()
        long = [w.strip(".,;:()").lower() for w in words if len(w) > 6][:5]
        return {"query": "what is known about " + " ".join(long)}
    return respond


def _pipeline(srv, out: Path, *extra: str):
    return run_curate("pipeline", str(REPO / "data" / "demo"), "--out", str(out), "-n", str(N), "--no-plots",
                      "--no-report", "--base-url", srv.base_url, "--model", "fake", "--max-retries", "0",
                      "--max-reasks", "0", "--backoff-base", "0", *extra, env=_env(out.parent), timeout=900)


@pytest.fixture(scope="module")
def first(tmp_path_factory):
    """One finished pipeline run over the demo documents, and the server that answered it."""
    tmp = tmp_path_factory.mktemp("rerun")
    state = {"nonsense": False}
    with fake_llm_server(responder=_responder(state)) as srv:
        proc = _pipeline(srv, tmp / "run")
        assert proc.returncode == 0, proc.stderr
        yield {"tmp": tmp, "run": tmp / "run", "srv": srv, "state": state}


def _copy(first, name: str) -> Path:
    run = first["tmp"] / name
    shutil.copytree(first["run"], run)
    return run


def test_a_rerun_stopped_at_generate_is_never_read_as_the_earlier_runs_export(first):
    run = _copy(first, "stopped")
    generated = (run / "generate" / "generated.jsonl").read_bytes()
    first["state"]["nonsense"] = True
    try:
        proc = _pipeline(first["srv"], run, "--seed", "1")
    finally:
        first["state"]["nonsense"] = False
    assert proc.returncode == 2, proc.stderr  # generate made no record: the run stops there
    assert "generate: no record was made" in proc.stderr or "generate left no record for filter" in proc.stderr
    assert not set(json.loads((run / "pipeline.json").read_text())["stages"]) & set(LATER)
    assert (run / "export" / ".curate-done.json").is_file(), "the earlier run's export is left where it was"

    train = run_curate("train", str(run), "--steps", "1", env=_env(run.parent))
    assert_one_line_error(train, f"{run / 'export'} is from an earlier run", "has not reached",
                          f"curate pipeline again with --out {run}")
    assert train.returncode == 2 and not (run / "train").exists(), "nothing trained on the earlier export"

    export = run_curate("export", "--in", str(run / "mine" / "mined.jsonl"), "--out", str(run.parent / "by-hand"),
                        env=_env(run.parent))
    assert_one_line_error(export, f"{run / 'mine'} is from an earlier run")

    from curate.report.collect import collect

    data = collect(run)
    assert [row["stage"] for row in data["funnel"]] in ([], ["generate"])
    assert data["earlier"] == list(LATER), "the earlier run's stages are named as such, not shown as this run's"

    kept = list((run / ".curate-replaced" / "generate").iterdir())
    assert len(kept) == 1 and (kept[0] / "generated.jsonl").read_bytes() == generated, "seed 0's records kept"
    said = " ".join(proc.stderr.split())
    assert f"generate: --seed changed since the run in {run / 'generate'}" in said
    assert f"kept in {kept[0]}" in said


def test_a_rerun_that_replaces_finished_results_keeps_the_latest_of_each_and_says_where(first):
    run = _copy(first, "reseeded")
    before = {stage: (run / stage / "report.json").read_bytes() for stage in ("generate", *LATER)}
    rows = sorted(p.relative_to(run / "export") for p in (run / "export").rglob("*.parquet"))
    proc = _pipeline(first["srv"], run, "--seed", "1")
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stderr.split())
    assert not list(run.glob("*/.curate-replaced")), "each stage folder holds its current run only"
    for stage, report in before.items():
        (kept,) = (run / ".curate-replaced" / stage).iterdir()
        assert (kept / "report.json").read_bytes() == report, f"{stage}: the earlier finished report, kept"
        assert kept.name == _fingerprint(first["run"] / stage)[:12]
        assert (kept / ".curate-done.json").is_file() and (kept / "run.json").is_file()
        assert f"changed since the run in {run / stage}" in said and f"kept in {kept}" in said, stage
    assert all((kept / r).is_file()
               for kept in (run / ".curate-replaced" / "export").iterdir() for r in rows), "the earlier rows too"
    from curate.core.stage import stale_reason

    assert stale_reason(run / "export") is None, "the new export is the run's own"

    seed_1 = {stage: _fingerprint(run / stage) for stage in before}
    again = _pipeline(first["srv"], run, "--seed", "2")
    assert again.returncode == 0, again.stderr
    for stage in before:
        kept = [p.name for p in (run / ".curate-replaced" / stage).iterdir()]
        assert kept == [seed_1[stage][:12]], f"{stage}: only the latest replaced run (seed 1's) is kept"


def _fingerprint(folder: Path) -> str:
    return json.loads((folder / ".curate-done.json").read_text())["fingerprint"]
