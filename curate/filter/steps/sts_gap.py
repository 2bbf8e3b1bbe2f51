"""Score-gap filter for STS-style records (Linq-Embed-Mistral, Table 10).

The generator grades the positive and every negative on the same 1-10 scale. A negative whose
score is within ``min_gap`` of the positive's (or above it) is not a clear negative: the pair
teaches nothing reliable, so that negative goes (``score-gap``). Records of other families pass
untouched; records or negatives without scores pass too and are counted in the report.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from curate.core.params import check_params
from curate.core.records import Record
from curate.filter.base import FilterContext, keep_negatives, register


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x)


@dataclass
class StsGapParams:
    min_gap: float = field(default=1.5, metadata={"min": 0.0})  # positive score minus negative score
    families: list[str] | str = field(default_factory=lambda: ["sts"])
    drop_if_no_negatives: bool = True  # a record whose negatives all went is dropped as no-negatives-left


@register("sts_gap", StsGapParams, kind="map")
def sts_gap(records: list[Record], params: dict[str, Any], ctx: FilterContext) -> list[Record]:
    p = asdict(check_params("sts_gap", StsGapParams, params))
    min_gap = p["min_gap"]
    families = p["families"]
    families = {families} if isinstance(families, str) else set(families or [])

    kept: list[Record] = []
    checked = unscored_records = unscored_negatives = dropped = 0
    for rec in records:
        if rec.task_type not in families:
            kept.append(rec)
            continue
        pos = _number(rec.positive_score)
        if pos is None:
            unscored_records += 1
            kept.append(rec)
            continue
        checked += 1
        survivors = []
        for i, neg in enumerate(rec.negatives):
            score = _number(neg.score)
            if score is None:
                unscored_negatives += 1
                survivors.append(neg)
                continue
            gap = pos - score
            if gap < min_gap:
                ctx.reject(rec, "score-gap", {"index": i, "positive": pos, "negative": score,
                                              "gap": round(gap, 4), "min_gap": min_gap}, negative=neg)
                dropped += 1
            else:
                survivors.append(neg)
        if keep_negatives(rec, survivors, ctx, drop_empty=p["drop_if_no_negatives"]):
            kept.append(rec)

    ctx.note(records_checked=checked, unscored_records=unscored_records,
             unscored_negatives=unscored_negatives, negatives_dropped=dropped, min_gap=float(min_gap),
             families=sorted(families))
    return kept
