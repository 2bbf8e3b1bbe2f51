"""``promote_top``: for a query an LLM wrote from a passage, the teacher's clear favourite becomes
the positive and the source passage a second positive; a labelled positive is never replaced."""

from __future__ import annotations

import json

import numpy as np
import pytest

from curate.core.errors import CurateError
from curate.core.records import Record
from curate.mine.main import MineOptions, check, run_mine, summary
from curate.mine.miner import promotion
from tests.mine_helpers import HashTeacher, write_jsonl

QUERY = "how do I fit the pump"
SOURCE, BETTER = "the pump manual, part one", "fitting the pump, step by step"
FILLERS = [f"filler document number {k}" for k in range(6)]


def _unit(*pairs: tuple[int, float]) -> np.ndarray:
    v = np.zeros(16, np.float32)
    for axis, value in pairs:
        v[axis] = value
    return v


def _teacher() -> HashTeacher:
    """Scores against the query: BETTER 1.0, SOURCE 0.8, the fillers 0.6 down to 0.1."""
    overrides = {QUERY: _unit((0, 1.0)), BETTER: _unit((0, 1.0)), SOURCE: _unit((0, 0.8), (1, 0.6))}
    for k, text in enumerate(FILLERS):
        s = 0.6 - 0.1 * k
        overrides[text] = _unit((0, s), (2 + k, float(np.sqrt(1 - s * s))))
    return HashTeacher(overrides=overrides)


def _mine(tmp_path, written: bool = True, **opts) -> tuple[dict, dict]:
    corpus = [{"_id": "guide#0", "text": SOURCE}, {"_id": "faq#0", "text": BETTER}]
    corpus += [{"_id": f"f{k}", "text": t} for k, t in enumerate(FILLERS)]
    write_jsonl(tmp_path / "c.jsonl", corpus)
    meta = {"passage": {"id": "guide#0", "doc_id": "guide", "source": "guide.md", "k": 0}} if written else {}
    rec = Record(id="r", task_type="from-corpus", task="t", query=QUERY, positive=SOURCE, positive_id="guide#0",
                 meta=meta)
    write_jsonl(tmp_path / "r.jsonl", [rec.to_dict()])
    out = tmp_path / "o"
    report = run_mine(MineOptions(out=str(out), records=str(tmp_path / "r.jsonl"), corpus=str(tmp_path / "c.jsonl"),
                                  k=3, plots=False, **opts), teachers=[_teacher()])
    (mined,) = [json.loads(line) for line in (out / "mined.jsonl").read_text().splitlines()]
    return mined, report


@pytest.mark.parametrize("method", ["naive", "percpos"])
def test_the_teachers_clear_favourite_becomes_the_positive_and_the_source_stays_one(tmp_path, method):
    mined, report = _mine(tmp_path, method=method, promote_top=0.05)
    assert (mined["positive"], mined["positive_id"]) == (BETTER, "faq#0")
    assert [(p["text"], p["doc_id"]) for p in mined["positives"]] == [(SOURCE, "guide#0")]
    negatives = [n["text"] for n in mined["negatives"]]
    assert BETTER not in negatives and SOURCE not in negatives
    assert len(negatives) == 3
    # the scores line up with the new order: the record's own positive first
    assert mined["teacher"]["positives"] == pytest.approx([1.0, 0.8], abs=1e-5)
    assert mined["teacher"]["positive_rank"] == 1
    assert mined["meta"]["mine"]["promoted"] == {"source_id": "guide#0", "source_rank": 2, "margin": 0.05}
    assert report["positive_promoted"] == {"margin": 0.05, "eligible": 1, "queries": 1}
    assert "  positive promoted on 1 of 1 queries written from a passage: the teacher's first document " \
           "outscored the source by more than 0.05 (the source stays a positive)" in summary(report, tmp_path)


def test_without_the_option_naive_mining_takes_the_favourite_as_a_negative(tmp_path):
    """What the option prevents: the document the teacher ranks first trained on as a negative."""
    mined, report = _mine(tmp_path, method="naive")
    assert mined["positive"] == SOURCE and mined["negatives"][0]["text"] == BETTER
    assert "positive_promoted" not in report and "promoted" not in mined["meta"]["mine"]


def test_a_favourite_within_the_margin_is_not_promoted(tmp_path):
    # 1.0 against 0.8: a margin of 0.3 asks for more than 1.04
    mined, report = _mine(tmp_path, method="naive", promote_top=0.3)
    assert mined["positive"] == SOURCE and mined["positives"] == []
    assert report["positive_promoted"]["queries"] == 0
    assert promotion(1.0, 0.8, 0.25) is False and promotion(1.0, 0.8, 0.2499) is True
    assert promotion(-0.1, -0.2, 0.4) is True  # a negative source score: the bar is above it, not below


def test_a_positive_that_no_llm_wrote_a_query_for_is_never_replaced(tmp_path):
    mined, report = _mine(tmp_path, written=False, method="naive", promote_top=0.0)
    assert mined["positive"] == SOURCE and mined["positives"] == []
    assert report["positive_promoted"] == {"margin": 0.0, "eligible": 0, "queries": 0}
    # a user who set the option on labelled data is told it did nothing, and why
    assert any(line.startswith("  --promote-top acted on no query") for line in summary(report, tmp_path))


def test_hybrid_scores_follow_the_promoted_positive_and_its_weight_the_source(tmp_path):
    """BM25's weight is chosen by how well each weight ranks the passages the queries were written
    from. Judged by the promoted positive instead (the dense teacher's own first), weight 0 always
    won and the hybrid silently dropped BM25: on a real NQ-UTD mine it went from 0.2 to 0."""
    plain, plain_report = _mine(tmp_path / "plain", method="naive", scores="hybrid")
    mined, report = _mine(tmp_path / "promoted", method="naive", promote_top=0.05, scores="hybrid")
    assert mined["positive"] == BETTER
    assert report["scores_from"] == plain_report["scores_from"]
    # the dense teacher ranks BETTER above the source: at weight 0 the source ranks second
    assert report["scores_from"]["mrr_by_weight"]["0"] == pytest.approx(0.5)
    # the run says what the mix is: BM25 in at weight 1 lifts the source to a tie with BETTER (MRR 2/3)
    assert "  scores: BM25 mixed in at weight 1, where the queries' own positives rank best (MRR 0.667; the " \
           "teacher alone 0.500)" in summary(report, tmp_path)
    # each document keeps the score it has without promotion, in the record's new order
    better = next(n["teacher_score"] for n in plain["negatives"] if n["text"] == BETTER)
    assert mined["teacher"]["positives"] == pytest.approx([better, plain["teacher"]["positive"]], abs=1e-6)


def test_promotion_takes_one_teacher(tmp_path):
    opts = MineOptions(out=str(tmp_path / "o"), records="r.jsonl", teachers=("a", "b"), ensemble="intra",
                       promote_top=0.05)
    with pytest.raises(CurateError, match="--promote-top takes one --teacher"):
        check(opts)
