"""The verdict ``curate train`` gives on each change: a paired bootstrap over the queries, and no
verdict at all (with the ``-n`` that would give one) for a held-out set too small to say anything."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from curate.evaluate.paired import MIN_QUERIES, bootstrap_interval, paired_change
from tests.helpers import run_curate
from tests.mine_helpers import scifact_slice
from tests.train.test_train import exported  # noqa: F401  (the module's tiny mined export)


def _scores(values) -> dict[str, float]:
    return {f"q{i}": float(v) for i, v in enumerate(values)}


def test_a_gain_on_most_queries_is_a_clear_gain():
    rng = np.random.default_rng(1)
    before = rng.uniform(0.2, 0.8, 40)
    after = before + rng.uniform(0.02, 0.1, 40)  # every query a little better
    change = paired_change(_scores(before), _scores(after))
    assert change.verdict == "clear gain" and change.queries == 40
    assert 0 < change.low <= change.mean <= change.high
    loss = paired_change(_scores(after), _scores(before))
    assert loss.verdict == "clear loss" and loss.high < 0


def test_identical_scores_are_no_clear_change():
    scores = _scores(np.linspace(0, 1, 25))
    change = paired_change(scores, dict(scores))
    assert change.verdict == "no clear change" and change.low == change.mean == change.high == 0


def test_a_noisy_change_is_no_clear_change_and_its_interval_holds_the_mean():
    rng = np.random.default_rng(2)
    before = rng.uniform(0, 1, 30)
    after = np.clip(before + rng.normal(0, 0.2, 30), 0, 1)
    change = paired_change(_scores(before), _scores(after))
    assert change.low < change.mean < change.high
    assert change.verdict == "no clear change"


def test_the_interval_is_seeded_and_paired_by_query():
    diffs = np.random.default_rng(3).normal(0.05, 0.1, 50)
    assert bootstrap_interval(diffs, seed=7) == bootstrap_interval(diffs, seed=7)
    assert bootstrap_interval(diffs, seed=7) != bootstrap_interval(diffs, seed=8)
    before = {f"q{i}": 0.5 for i in range(50)}
    after = {f"q{49 - i}": 0.5 + d for i, d in enumerate(diffs[::-1])}  # another order, same pairs
    change = paired_change(before, after)
    assert change.mean == pytest.approx(diffs.mean())


def test_too_few_queries_get_no_interval():
    change = paired_change(_scores([0.1, 0.5, 0.9]), _scores([0.9, 1.0, 1.0]))
    assert change.low is None and change.verdict == "too few queries to say (3)"
    assert MIN_QUERIES == 10


def _held_out_run(run: Path, tmp: Path) -> None:
    """Make ``run`` look like a pipeline's run of ``-n 20``: 15 filtered queries, a fifth of the
    documents held out with 3 queries (a SciFact slice stands in for the LLM's)."""
    small = scifact_slice(tmp / "small", 3, extra_docs=20, max_chars=500)
    shutil.copytree(small, run / "holdout" / "eval")
    (run / "holdout" / "report.json").write_text(json.dumps(
        {"records_in": 15, "documents_with_queries": 15, "documents_held_out": 3, "eval_queries": 3,
         "share": 0.2, "min_documents": 5, "eval": "eval"}), encoding="utf-8")
    (run / "pipeline.json").write_text(json.dumps(
        {"generate": {"sampled": 20}, "documents": {"documents": 20, "passages": 400}}), encoding="utf-8")


def test_train_prints_every_evaluation_with_its_size_and_verdict(exported, tmp_path):  # noqa: F811
    """The held-out set of 3 queries: too few to say, and which -n would do; an --eval folder of
    80 queries, cut by --light (which leaves the held-out set whole): the change with its interval."""
    from curate.report.collect import _funnel_row
    from curate.train.main import STAGE

    run = tmp_path / "run"
    shutil.copytree(exported["run"], run, ignore=shutil.ignore_patterns("train", "holdout"))
    _held_out_run(run, tmp_path)
    big = scifact_slice(tmp_path / "big", 80, extra_docs=40, max_chars=500)
    proc = run_curate("train", str(run), "--eval", str(big), "--light", "--steps", "2", "--batch-size", "4",
                      env={"CURATE_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "400"})
    assert proc.returncode == 0, proc.stderr
    report = json.loads((run / "train" / "report.json").read_text())
    held, ev = report["evaluations"]
    assert held["held_out"] and not held["light"] and held["queries"] == 3, "--light leaves the held-out set whole"
    # 0.2 of 15 filtered queries from 20 sampled passages: 0.15 held out a passage, 200 for 30
    assert held["verdict"] == "too few queries to say (3); -n 200 would hold out about 30"
    assert re.search(r"NDCG@10 \d\.\d{4} -> \d\.\d{4} \([+-]\d\.\d{4}\) on \S+holdout/eval, 3 queries: "
                     r"too few queries to say \(3\); -n 200 would hold out about 30", proc.stderr)

    assert ev["light"] and MIN_QUERIES <= ev["queries"] < 80, "the --eval folder is cut to its light set"
    change = ev["change"]
    assert change["low"] <= change["mean"] <= change["high"] and change["queries"] == ev["queries"]
    assert ev["verdict"] in ("clear gain", "clear loss", "no clear change")
    assert change["mean"] == pytest.approx(ev["after"]["ndcg@10"] - ev["before"]["ndcg@10"], abs=2e-4)
    line = (f"on {big}, {ev['queries']} queries: {ev['verdict']} "
            f"(95% interval {change['low']:+.4f} to {change['high']:+.4f})")
    assert line in proc.stderr

    row = _funnel_row("train", "ran", STAGE.funnel(report, run / "train"))  # the report page's train row
    cells = {c["label"]: c["value"] for c in row["cells"]}
    assert cells["held-out queries"] == 3 and cells["verdict"] == held["verdict"]
    assert "too few queries to say (3)" in (run / "train" / "fit" / "model" / "README.md").read_text(encoding="utf-8")
