"""Distillation targets agree with the labels: through ``curate export`` as a user runs it, on records
whose teacher scores a negative at or above the labelled positive, no row's ``label`` puts a negative
at or above its positive, the other rows keep the teacher's scores as given, and the card and the
report count the contradicted rows as false-negative candidates and name them."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from curate.export.targets import LIFT
from tests.helpers import run_curate
from tests.mine_helpers import write_jsonl

N = 8
CONTRADICTED = {1: 0.72, 4: 0.60, 6: 0.65}  # row -> its best negative's score; the positive scores 0.60 on every row


def _records() -> list[dict]:
    """Eight short labelled records, two negatives each; on three of them the teacher scores a
    negative above the positive (one of them exactly at it)."""
    out = []
    for k in range(N):
        negs = [CONTRADICTED.get(k, 0.50), 0.40]
        out.append({"id": f"r{k}", "task_type": "retrieval", "task": "Given a question, retrieve the answer.",
                    "query": f"question {k} about topic {k}", "positive": f"the answer to question {k}",
                    "positive_id": f"d{k}",
                    "negatives": [{"text": f"passage {j} near topic {k}", "doc_id": f"n{k}-{j}", "source": "mined",
                                   "teacher_score": s} for j, s in enumerate(negs)],
                    "teacher": {"model": "a-teacher", "positive": 0.60, "positive_rank": 1, "positives": [0.60],
                                "stage": "mine"}})
    return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("label-targets")
    write_jsonl(tmp / "records.jsonl", _records())
    proc = run_curate("export", "--in", str(tmp / "records.jsonl"), "--out", str(tmp / "out"),
                      "--negatives-per-row", "all", "--batch-size", "4", "--dev-fraction", "0", "--no-audit")
    assert proc.returncode == 0, proc.stderr
    rows = [row for f in sorted((tmp / "out").glob("**/*.parquet")) for row in pq.read_table(f).to_pylist()]
    return {"out": tmp / "out", "rows": {row["anchor"]: row for row in rows}}


def test_no_label_puts_a_negative_at_or_above_its_positive(exported):
    rows = exported["rows"]
    assert len(rows) == N
    for row in rows.values():
        assert row["label"][0] > max(row["label"][1:]), row


def test_contradicted_rows_lift_only_the_positive_and_the_rest_keep_the_teachers_scores(exported):
    for k, rec in enumerate(_records()):
        row = exported["rows"][rec["query"]]
        negatives = {n["text"]: n["teacher_score"] for n in rec["negatives"]}
        written = [row[c] for c in sorted(c for c in row if c.startswith("negative_"))]
        assert row["label"][1:] == pytest.approx([negatives[t] for t in written])  # the negatives' as given
        expected = CONTRADICTED[k] + LIFT if k in CONTRADICTED else 0.60
        assert row["label"][0] == pytest.approx(expected)


def test_the_card_and_the_report_count_the_false_negative_candidates(exported):
    report = json.loads((exported["out"] / "report.json").read_text(encoding="utf-8"))
    entry = report["label_targets"]
    assert entry["rows_scored"] == N
    assert entry["false_negative_candidates"] == len(CONTRADICTED)
    assert sorted(entry["examples"]) == sorted(f"r{k}" for k in CONTRADICTED)
    card = (exported["out"] / "README.md").read_text(encoding="utf-8")
    assert "Label targets" in card and "false_negative_candidates" in card.replace(" ", "_")
    assert all(f"r{k}" in card for k in CONTRADICTED)


def test_targets_teacher_keeps_the_raw_scores_and_says_so(exported, tmp_path):
    """``--targets teacher``, the lift's ablation arm: every row's label is the teacher's scores as
    given, contradicted rows included; the card, report and summary say the label was not lifted, and
    a default export's identity and card do not name the option (earlier exports stay the same run)."""
    write_jsonl(tmp_path / "records.jsonl", _records())
    proc = run_curate("export", "--in", str(tmp_path / "records.jsonl"), "--out", str(tmp_path / "out"),
                      "--negatives-per-row", "all", "--batch-size", "4", "--dev-fraction", "0", "--no-audit",
                      "--targets", "teacher")
    assert proc.returncode == 0, proc.stderr
    rows = {row["anchor"]: row for f in sorted((tmp_path / "out").glob("**/*.parquet"))
            for row in pq.read_table(f).to_pylist()}
    for k, rec in enumerate(_records()):
        row = rows[rec["query"]]
        assert row["label"][0] == pytest.approx(0.60), "the positive's own score, never lifted"
        assert (max(row["label"][1:]) >= row["label"][0]) == (k in CONTRADICTED)
    entry = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))["label_targets"]
    assert entry["false_negative_candidates"] == len(CONTRADICTED) and entry["lifted"] is False
    assert "--targets teacher" in " ".join(proc.stderr.split())
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert "never lifted" in card
    default = json.loads((exported["out"] / "run.json").read_text(encoding="utf-8"))
    assert "targets" not in default["params"] and default["fingerprint"] != json.loads(
        (tmp_path / "out" / "run.json").read_text(encoding="utf-8"))["fingerprint"]
