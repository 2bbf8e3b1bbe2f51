"""``curate train --loss pick``: every candidate loss trained on the same export, the one the
held-out queries score highest kept, and the choice reported with each lead's interval; refused in
one line, before any training, where there is nothing to pick on."""

from __future__ import annotations

import json
import shutil

import pytest

from curate.train.main import CANDIDATES, PICKED_ON
from tests.helpers import run_curate
from tests.train.test_train import exported  # noqa: F401  (the module's tiny mined export)
from tests.train.test_verdict import _held_out_run


def test_pick_keeps_the_candidate_the_queries_score_highest(exported, tmp_path):  # noqa: F811
    run = tmp_path / "run"
    shutil.copytree(exported["run"], run, ignore=shutil.ignore_patterns("train", "holdout"))
    data = exported["data"]
    proc = run_curate("train", str(run), "--loss", "pick", "--eval", str(data), "--steps", "3", "--batch-size", "4",
                      env={"COLUMNS": "400"})
    assert proc.returncode == 0, proc.stderr
    out = run / "train"
    report = json.loads((out / "report.json").read_text())
    pick = report["pick"]
    assert pick["on"] == str(data) and pick["queries"] == 12
    tried = {c["loss"]: c for c in pick["candidates"]}
    assert list(tried) == list(CANDIDATES)
    best = max(CANDIDATES, key=lambda loss: tried[loss]["ndcg@10"])  # the first of equals
    assert report["loss"] == best and tried[best]["kept"] and sum(c["kept"] for c in tried.values()) == 1
    (ev,) = report["evaluations"]
    assert ev["after"]["ndcg@10"] == tried[best]["ndcg@10"], "the model kept is the one scored best"
    assert ev["picked_on"] and f"on {data}, 12 queries: {ev['verdict']} (95% interval" in proc.stderr
    assert f"){'; ' + PICKED_ON}" in proc.stderr, "a number picked on its own queries says so"

    assert (out / "fit" / "model" / "config_sentence_transformers.json").is_file(), "the kept model is the run's model"
    kept = json.loads((out / "fit" / "report.json").read_text())
    assert kept["training"]["loss"] == best
    for loss, c in tried.items():
        if loss == best:
            assert not (out / "candidates" / loss).exists(), "the kept candidate moved to fit/"
            continue
        lead = c["lead"]
        assert lead["mean"] == pytest.approx(tried[best]["ndcg@10"] - c["ndcg@10"], abs=2e-4) and lead["mean"] >= 0
        assert lead["low"] <= lead["mean"] <= lead["high"], "12 queries: an interval"
        assert json.loads((out / "candidates" / loss / "report.json").read_text())["training"]["loss"] == loss
        assert not (out / "candidates" / loss / "model").exists(), "a candidate not kept leaves no model behind"

    said = f"loss picked on {data.as_posix()} (12 queries): "
    assert said in proc.stderr and f"kept {best}" in proc.stderr
    assert said in (out / "fit" / "model" / "README.md").read_text(encoding="utf-8")

    again = run_curate("train", str(run), "--loss", "pick", "--eval", str(data), "--steps", "3", "--batch-size", "4")
    assert again.returncode == 0 and "train: done earlier" in again.stderr


def test_pick_needs_queries_to_pick_on(exported, tmp_path):  # noqa: F811
    run = tmp_path / "run"
    shutil.copytree(exported["run"], run, ignore=shutil.ignore_patterns("train", "holdout"))
    proc = run_curate("train", str(run), "--loss", "pick")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "--loss pick keeps the loss that held-out queries score highest" in proc.stderr
    assert not (run / "train").exists(), "refused before anything is written"

    _held_out_run(run, tmp_path)  # a pipeline's run of -n 20: 3 held-out queries
    proc = run_curate("train", str(run), "--loss", "pick", "--steps", "2", "--batch-size", "4")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "has 3 queries, too few to pick a loss by (at least 10); -n 200 would hold out about 30" in proc.stderr
    assert not (run / "train" / "report.json").exists() and not (run / "train" / "fit").exists()
