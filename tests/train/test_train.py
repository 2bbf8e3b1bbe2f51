"""``curate train`` on a real export: the bundled MiniLM fine-tuned and scored before and after;
killed mid-run it leaves nothing half-written, and the same command finishes it, then is done."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import REPO, run_curate
from tests.mine_helpers import scifact_slice


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, Path]:
    """A slice of SciFact (12 claims, their evidence and 60 abstracts), mined and exported with the
    teacher's scores: what `curate pipeline` leaves in RUN/export."""
    tmp = tmp_path_factory.mktemp("train")
    data = scifact_slice(tmp / "scifact", 12, max_chars=500)
    if data is None:  # pragma: no cover
        pytest.skip("no SciFact copy")
    run = tmp / "run"
    for args in (("mine", "--data", str(data), "--split", "train", "--out", str(run / "mine")),
                 ("export", "--in", str(run / "mine" / "mined.jsonl"), "--out", str(run / "export"),
                  "--format", "sentence-transformers", "--dev-fraction", "0")):
        proc = run_curate(*args)
        assert proc.returncode == 0, proc.stderr
    return {"run": run, "data": data}


def test_train_killed_mid_run_finishes_on_the_same_command_then_is_done(exported):
    import shutil

    run, data = exported["run"], exported["data"]
    out = run / "train"
    shutil.copytree(data, run / "holdout" / "eval")  # as curate pipeline leaves its held-out documents
    cmd = [sys.executable, "-m", "curate", "train", str(run), "--eval", str(data), "--steps", "4", "--batch-size", "4"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while not list(out.glob(".curate-staging-*")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)  # the runner's staging folder: the run has begun its work
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / "report.json").exists(), "a killed run leaves no report"

    proc = run_curate(*cmd[3:])
    assert proc.returncode == 0, proc.stderr
    assert not list(out.glob(".curate-staging-*")), "the killed run's staging is gone"
    report = json.loads((out / "report.json").read_text())
    # the rows carry the teacher's scores, but their queries are SciFact's labelled claims: auto
    # trains the contrastive loss, which beat distillation alone on every labelled set measured
    assert report["loss"] == "mnrl" and report["loss_why"].startswith("12 of 12 records are labelled queries")
    assert "loss auto: 12 of 12 records are labelled queries" in proc.stderr
    import pyarrow.parquet as pq

    rows = sum(pq.read_table(f).num_rows for f in (run / "export" / "data").glob("train-*.parquet"))
    assert report["training"]["steps"] == 4 and report["training"]["rows"] == rows > 0
    held, ev = report["evaluations"]
    assert held["data"] == str(run / "holdout" / "eval"), "the run's own held-out set, first, without asking"
    assert ev["data"] == str(data) and ev["queries"] == 12 and held["after"] == ev["after"]
    for side in ("before", "after"):
        assert set(ev[side]) == {"ndcg@10", "recall@100", "mrr@10"} and 0 < ev[side]["ndcg@10"] <= 1
    assert ev["before"] != ev["after"], "the trained model is another model"
    assert (out / report["model"] / "config_sentence_transformers.json").exists()  # the fit stage's, inside
    card = (out / report["model"] / "README.md").read_text(encoding="utf-8")  # the model carries its number
    assert "## Evaluation by curate train" in card
    assert f"| {ev['before']['ndcg@10']:.4f} | {ev['after']['ndcg@10']:.4f} |" in card
    assert "NDCG@10" in proc.stderr and "->" in proc.stderr

    again = run_curate(*cmd[3:])
    assert again.returncode == 0 and "train: done earlier" in again.stderr


def test_train_says_what_is_missing(tmp_path):
    proc = run_curate("train", str(tmp_path))
    assert proc.returncode != 0 and "no export here" in proc.stderr and "Traceback" not in proc.stderr


def _export(folder: Path, sources: list[dict]) -> Path:
    """A finished export's report as ``curate train`` reads it: its outputs and its sources."""
    folder.mkdir(parents=True)
    (folder / "report.json").write_text(json.dumps(
        {"outputs": {"sentence-transformers": ["data/train-00000-of-00001.parquet"]}, "sources": sources}))
    return folder


@pytest.mark.parametrize("sources, columns, loss", [
    ([{"path": "mined.jsonl", "records": 76}], ["anchor", "positive", "negative_1", "label"], "distill-kl"),
    ([{"path": "mined.jsonl", "records": 40, "dataset": "nq-utd"}], ["anchor", "positive", "label"], "mnrl"),
    ([{"path": "a.jsonl", "records": 30, "dataset": "scifact"}, {"path": "b.jsonl", "records": 70}],
     ["anchor", "positive", "label"], "distill-kl"),  # most queries written from documents
    ([{"path": "a.jsonl", "records": 50, "dataset": "scifact"}, {"path": "b.jsonl", "records": 50}],
     ["anchor", "positive", "label"], "mnrl"),  # half labelled: the labelled recipe
    ([{"path": "mined.jsonl", "records": 76}], ["anchor", "positive", "negative_1"], "mnrl"),  # no scores
])
def test_auto_loss_follows_whether_the_queries_came_with_labels(tmp_path, sources, columns, loss):
    from curate.train.main import auto_loss

    run = tmp_path / "run"
    _export(run / "export", sources)
    chosen, why = auto_loss(run, columns)
    assert chosen == loss and why
