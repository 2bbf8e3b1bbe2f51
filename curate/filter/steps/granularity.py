"""Graded-negative check (the MGH paper's difficulty levels, Table 4).

Level 1 is meant to be the hardest negative (closest to the query) and level 4 the
easiest, so teacher similarity should fall as the level rises; the paper reports mean
query-negative cosines of 0.881 / 0.857 / 0.845 / 0.793 for levels 1..4.  This step
reports the same means for the file (with the paper's numbers beside them; they were
measured with a different model, so compare the trend, not the values) and finds
*inverted* records: a negative of a lower level scoring below a negative of a higher
level by more than ``tolerance``.

``policy``:

* ``keep`` (default): only report; inverted records get ``scores["granularity"]``.
* ``reorder``: in each inverted record, sort the negatives by teacher score, highest first, and hand the
  graded ones their levels again in that order: with ``renumber: existing`` (default) the
  record's own level values, sorted (levels 1,2,3,4 stay 1,2,3,4 and a lone level-4
  negative stays level 4); with ``renumber: sequential`` simply 1..n.  Records whose order
  and levels change keep their former levels in ``scores["granularity"]["original_levels"]``
  (in the new order).
* ``drop-inverted``: drop inverted records ("levels-inverted").
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Literal

from curate.core.params import check_params
from curate.filter.base import register
from curate.filter.teacher_scores import TeacherDepth, ensure_teacher_scores

MGH_REFERENCE = {"1": 0.881, "2": 0.857, "3": 0.845, "4": 0.793}


def inversions(negatives, tolerance: float = 0.0) -> list[dict]:
    """Pairs (harder level, easier level) where the harder one scores lower beyond tolerance."""
    graded = [n for n in negatives if n.level is not None and n.teacher_score is not None]
    out = []
    for a in graded:
        for b in graded:
            if a.level < b.level and a.teacher_score + tolerance < b.teacher_score:
                out.append({"level": a.level, "score": a.teacher_score,
                            "higher_level": b.level, "higher_score": b.teacher_score})
    return out


def level_means(records) -> tuple[dict[str, float], dict[str, int]]:
    sums: dict[int, float] = defaultdict(float)
    counts: dict[int, int] = defaultdict(int)
    for rec in records:
        for n in rec.negatives:
            if n.level is not None and n.teacher_score is not None:
                sums[n.level] += n.teacher_score
                counts[n.level] += 1
    levels = sorted(counts)
    return ({str(lv): sums[lv] / counts[lv] for lv in levels},
            {str(lv): counts[lv] for lv in levels})


@dataclass
class GranularityParams(TeacherDepth):
    policy: Literal["keep", "reorder", "drop-inverted"] = "keep"
    tolerance: float = field(default=0.0, metadata={"min": 0.0})
    renumber: Literal["existing", "sequential"] = "existing"


@register("granularity", GranularityParams)
def granularity(records, params, ctx):
    p = check_params("granularity", GranularityParams, params)
    policy, tolerance, renumber = p.policy, p.tolerance, p.renumber
    ensure_teacher_scores(records, ctx, depth=p.depth)

    means, counts = level_means(records)
    levels = [int(k) for k in means]
    monotone = all(means[str(a)] >= means[str(b)] for a, b in zip(levels, levels[1:]))
    graded_records = sum(any(n.level is not None for n in r.negatives) for r in records)

    kept, inverted, reordered = [], 0, 0
    for rec in records:
        pairs = inversions(rec.negatives, tolerance)
        if pairs:
            inverted += 1
            rec.scores["granularity"] = {"inverted": True, "pairs": len(pairs)}
            if policy == "drop-inverted":
                ctx.reject(rec, "levels-inverted", {"pairs": pairs[:6], "inverted_pairs": len(pairs),
                                                    "tolerance": tolerance})
                continue
        if policy == "reorder" and pairs:
            before = [(n.text, n.level) for n in rec.negatives]
            order = sorted(range(len(rec.negatives)),
                           key=lambda i: -(rec.negatives[i].teacher_score or 0.0))
            rec.keep_negatives(order)
            original = [n.level for n in rec.negatives]
            graded = [n for n in rec.negatives if n.level is not None]
            new_levels = (range(1, len(graded) + 1) if renumber == "sequential"
                          else sorted(n.level for n in graded))
            for n, lv in zip(graded, new_levels):
                n.level = lv
            if [(n.text, n.level) for n in rec.negatives] != before:
                reordered += 1
                g = rec.scores.setdefault("granularity", {})
                g.update({"reordered": True, "original_levels": original})
        kept.append(rec)

    ctx.note(policy=policy, tolerance=tolerance, renumber=renumber if policy == "reorder" else None,
             mean_similarity_by_level=means, negatives_by_level=counts, reference_mgh=MGH_REFERENCE, means_fall_with_level=monotone,
             graded_records=graded_records, inverted_records=inverted,
             inverted_fraction=(inverted / graded_records) if graded_records else None,
             reordered_records=reordered)
    return kept
