"""The ``shortcut`` filter step: it drops the negatives its probe tells apart most easily,
leaves a file without a shortcut alone, and its parameters are checked when a recipe loads."""

from __future__ import annotations

import pytest

from curate.core.errors import CurateError
from curate.filter.base import STEPS, FilterContext, merge_params
from tests.audit.planted import CLOSING, control, make_records, passages


def _run(records, params, tmp_path):
    ctx = FilterContext(out_dir=tmp_path)
    ctx.step_name = "shortcut"
    kept = STEPS.get("shortcut").fn(records, merge_params("shortcut", params), ctx)
    return kept, ctx


def test_the_planted_negatives_are_the_ones_dropped(tmp_path):
    # each record: two LLM negatives carrying the closing phrase, two plain ones
    records = make_records(passages(), lambda t, k: (t + CLOSING if k < 2 else t, "llm"), n=100, negatives=4)
    kept, ctx = _run(records, {"against": "corpus", "share": 0.5}, tmp_path)
    dropped = [d for d in ctx.rejections if d.reason == "shortcut"]
    n_planted = 2 * len(records)
    assert len(dropped) == n_planted
    assert sum(d.text.endswith(CLOSING) for d in dropped) >= 0.95 * n_planted
    assert all(0 <= d.detail["probability"] <= 1 and d.detail["against"] == "corpus" for d in dropped)
    assert len(kept) == len(records) and all(len(r.negatives) >= 1 for r in kept)
    note = ctx.notes["shortcut"]
    assert note["auc"] >= 0.7 and note["negatives_dropped"] == n_planted and note["candidates"] == 4 * len(records)
    assert any(g.strip() in CLOSING for g in note["toward_negatives"])


def test_keep_one_spares_a_records_last_negative_or_drops_it(tmp_path):
    # 30 records whose one negative carries the phrase, 30 with two plain negatives
    records = make_records(passages(), lambda t, k: (t + CLOSING, "llm"), n=30, negatives=1)
    records += make_records(passages()[200:], lambda t, k: (t, "llm"), n=30, negatives=2)
    for i, r in enumerate(records):
        r.id = f"r{i}"
    # a cue in a third of the negatives lifts the AUC to 2/3 at most: min_auc is lowered for it
    kept, ctx = _run(records, {"against": "corpus", "share": 1 / 3, "min_auc": 0.55}, tmp_path)
    spared = ctx.notes["shortcut"]["records_spared"]
    assert len(kept) == len(records) and spared >= 25
    assert all(r.negatives for r in kept)
    kept, ctx = _run(records, {"against": "corpus", "share": 1 / 3, "min_auc": 0.55, "keep_one": False}, tmp_path)
    emptied = ctx.reasons("shortcut")["no-negatives-left"]
    assert emptied >= 25 and len(kept) == len(records) - emptied


def test_a_file_without_a_shortcut_keeps_every_negative(tmp_path):
    records = control()
    kept, ctx = _run(records, {}, tmp_path)
    assert ctx.rejections == [] and kept == records
    note = ctx.notes["shortcut"]
    assert note["against"] == "positives" and note["auc"] < 0.7 and "no shortcut" in note["skipped"]


@pytest.mark.parametrize("params, needle", [({"share": 0}, "share"), ({"against": "llm"}, "against"),
                                            ({"min_aucc": 0.8}, "did you mean min_auc")])
def test_bad_parameters_are_one_line(params, needle):
    with pytest.raises(CurateError, match=needle):
        merge_params("shortcut", params)
