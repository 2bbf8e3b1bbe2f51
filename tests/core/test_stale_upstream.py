"""Readers read the run's current upstream, and a re-run never silently destroys a finished
result (issue 52), on a chain of cheap stages through the real command line: convert, then filter
(a heuristics-only recipe) on its records, then export on filter's, all in one run folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from curate.core.stage import stale_reason
from tests.helpers import assert_one_line_error, run_curate

RECIPE = "steps:\n  - heuristics: {min_chars: {query: 1}}\n"


def _labelled(path: Path, words: str) -> Path:
    rows = [{"text": f"the {w} number {i} is an example sentence", "label": "ab"[i % 2]}
            for i, w in enumerate(words.split())]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _convert(inp: Path, run: Path):
    return run_curate("convert", "--kind", "classification", "--random-negatives", "--negatives", "1",
                      "--in", str(inp), "--out", str(run / "convert"))


def _filter(run: Path, recipe: Path):
    return run_curate("filter", "--in", str(run / "convert" / "converted.jsonl"), "--out", str(run / "filter"),
                      "--recipe", str(recipe))


def _export(run: Path, out: Path | None = None):
    return run_curate("export", "--in", str(run / "filter" / "filtered.jsonl"), "--out", str(out or run / "export"),
                      "--format", "sentence-transformers", "--dev-fraction", "0")


@pytest.fixture
def chain(tmp_path) -> dict[str, Path]:
    """convert -> filter -> export in RUN, each reading the product of the one before."""
    run, recipe = tmp_path / "run", tmp_path / "keep.yaml"
    recipe.write_text(RECIPE, encoding="utf-8")
    first = _labelled(tmp_path / "first.jsonl", "cat dog cow pig hen fox owl bat")
    for proc in (_convert(first, run), _filter(run, recipe), _export(run)):
        assert proc.returncode == 0, proc.stderr
    return {"run": run, "recipe": recipe, "tmp": tmp_path}


def test_train_refuses_an_export_whose_upstream_was_made_again(chain):
    tmp = chain["tmp"]
    trained = run_curate("train", str(chain["run"]), "--steps", "1", "--batch-size", "2",
                         env={"CURATE_CACHE_DIR": str(tmp / "c")})
    assert trained.returncode == 0, trained.stderr
    run = tmp / "elsewhere" / "moved"  # links are recorded relative to the run folder: a moved one still reads
    shutil.copytree(chain["run"], run)
    shutil.rmtree(chain["run"])
    assert stale_reason(run / "export") is None and stale_reason(run / "train") is None

    other = _labelled(tmp / "second.jsonl", "red blue green black white grey pink gold")
    assert _convert(other, run).returncode == 0  # convert made anew: filter and export are the old records'
    why = f"{run / 'export'} is from an earlier run: filter was made from an earlier convert/converted.jsonl"
    again = run_curate("train", str(run), "--steps", "1", "--batch-size", "2", env={"CURATE_CACHE_DIR": str(tmp / "c")})
    assert_one_line_error(again, why, "run filter again", "then each stage after it up to export")
    assert again.returncode == 2 and "done earlier" not in again.stdout + again.stderr, "refused, not done earlier"
    assert stale_reason(run / "export").startswith(why)
    assert_one_line_error(_export(run, tmp / "by-hand"), f"{run / 'filter'} is from an earlier run")
    assert not (tmp / "by-hand").exists()

    for proc in (_filter(run, chain["recipe"]), _export(run)):  # the fix the line names
        assert proc.returncode == 0, proc.stderr
    assert stale_reason(run / "export") is None
    assert stale_reason(run / "train").startswith(f"{run / 'train'} is from an earlier run: train was made "
                                                  "from an earlier export/")


def test_a_rerun_with_another_input_keeps_the_finished_result_it_replaces(chain):
    run, tmp = chain["run"], chain["tmp"]
    earlier = (run / "convert" / "converted.jsonl").read_bytes()
    marker = json.loads((run / "convert" / ".curate-done.json").read_text())
    proc = _convert(_labelled(tmp / "second.jsonl", "red blue green black white grey pink gold"), run)
    assert proc.returncode == 0, proc.stderr
    kept = run / ".curate-replaced" / "convert" / marker["fingerprint"][:12]
    assert (kept / "converted.jsonl").read_bytes() == earlier and (kept / "report.json").is_file()
    assert (run / "convert" / "converted.jsonl").read_bytes() != earlier, "the new run's records are the folder's"
    said = " ".join((proc.stdout + proc.stderr).split())
    assert f"convert: the --in input changed since the run in {run / 'convert'}" in said
    assert f"its finished result is kept in {kept}" in said

    bad = tmp / "bad.jsonl"
    bad.write_text("{not json\n", encoding="utf-8")
    failed = _convert(bad, run)  # replaces nothing: no copy of the run still in place, one line said
    assert_one_line_error(failed, "invalid JSON")
    assert [p.name for p in (run / ".curate-replaced" / "convert").iterdir()] == [kept.name]

    second = json.loads((run / "convert" / ".curate-done.json").read_text())["fingerprint"]
    assert _convert(_labelled(tmp / "third.jsonl", "one two three four"), run).returncode == 0
    assert [p.name for p in (run / ".curate-replaced" / "convert").iterdir()] == [second[:12]], \
        "only the latest replaced run is kept"
    again = _convert(tmp / "third.jsonl", run)
    assert again.returncode == 0 and "kept in" not in again.stdout + again.stderr, "the same run replaces nothing"
