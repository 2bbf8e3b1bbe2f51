"""Positive-aware false-negative removal (NV-Retriever, TopK-PercPos / TopK-MarginPos).

A negative the teacher scores almost as high as the positive is probably another correct
answer, and training against it teaches the wrong thing.  Its ceiling is set from the
positive's teacher score:

* ``mode: percent`` (default): ``percent`` (0.95) of the positive score, i.e.
  ``pos - (1 - percent) * |pos|``, which stays below the positive even when the positive
  score is negative;
* ``mode: margin``: ``pos - margin`` (0.05).

A negative scoring at or above the ceiling is dropped ("false-negative"); a record left
with no negatives is dropped ("no-negatives-left").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from curate.core.errors import CurateError
from curate.core.params import check_params, field_range
from curate.filter.base import keep_negatives, register
from curate.negatives.knobs import Ceiling
from curate.negatives.select import Thresholds
from curate.filter.teacher_scores import TeacherDepth, ensure_teacher_scores


def threshold(positive: float, mode: str = "percent", percent: float = 0.95,
              margin: float = 0.05) -> float:
    """The highest score a negative may stay below, given the positive's score (mine's rule)."""
    if mode == "percent":
        return Thresholds(percent=percent).ceiling(positive)
    if mode == "margin":
        return Thresholds(margin=margin).ceiling(positive)
    raise CurateError(f"false_negatives: mode must be 'percent' or 'margin', not {mode!r}")


@dataclass
class FalseNegativeParams(TeacherDepth):
    mode: Literal["percent", "margin"] = "percent"
    # the ceilings' ranges are mine's (negatives.knobs.Ceiling), declared once
    percent: float = field(default=0.95, metadata=field_range(Ceiling, "percent"))  # this share of the positive
    margin: float = field(default=0.05, metadata=field_range(Ceiling, "margin"))  # the positive minus this


@register("false_negatives", FalseNegativeParams)
def false_negatives(records, params, ctx):
    p = check_params("false_negatives", FalseNegativeParams, params)
    mode, percent, margin = p.mode, p.percent, p.margin
    ensure_teacher_scores(records, ctx, depth=p.depth)

    kept, dropped = [], 0
    for rec in records:
        pos = rec.teacher.positive
        ceiling = threshold(pos, mode, percent, margin)
        keep = []
        for i, neg in enumerate(rec.negatives):
            if neg.teacher_score >= ceiling:
                ctx.reject(rec, "false-negative", {"score": neg.teacher_score, "positive": pos,
                                                   "threshold": ceiling, "mode": mode},
                           negative=neg)
                dropped += 1
            else:
                keep.append(i)
        had = len(rec.negatives)
        if keep_negatives(rec, [rec.negatives[i] for i in keep], ctx, drop_empty=had > 0):
            kept.append(rec)
    ctx.note(mode=mode, percent=percent if mode == "percent" else None,
             margin=margin if mode == "margin" else None, negatives_dropped=dropped,
             records_in=len(records), records_kept=len(kept))
    return kept
