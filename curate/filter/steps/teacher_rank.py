"""Teacher rank filter (Linq-Embed-Mistral, Table 10: "Filtering with a Teacher Model").

Against the file's document pool (see ``teacher_scores``):

* a record whose positive ranks below ``positive_top`` is dropped ("positive-rank");
* a record where a negative outranks the positive is dropped
  ("negative-outranks-positive"), when ``drop_if_negative_outranks``;
* a negative ranked below ``negative_bottom`` is too easy to teach anything and is
  dropped on its own ("negative-too-easy");
* a record that had negatives and is left with none is dropped ("no-negatives-left").

A limit set to ``null``/0 switches that check off.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from curate.core.params import check_params
from curate.filter.base import keep_negatives, register
from curate.filter.teacher_scores import TeacherDepth, ensure_teacher_scores


@dataclass
class TeacherRankParams(TeacherDepth):
    positive_top: int | None = field(default=10, metadata={"min": 0})  # 0 or null: no limit
    negative_bottom: int | None = field(default=50, metadata={"min": 0})  # 0 or null: no limit
    drop_if_negative_outranks: bool = True


@register("teacher_rank", TeacherRankParams)
def teacher_rank(records, params, ctx):
    p = check_params("teacher_rank", TeacherRankParams, params)
    pos_top = p.positive_top or None
    neg_bottom = p.negative_bottom or None
    outranks = p.drop_if_negative_outranks
    ensure_teacher_scores(records, ctx, depth=p.depth)

    kept, pruned = [], 0
    for rec in records:
        t = rec.teacher
        pos_rank, pos_score = t.positive_rank, t.positive
        if pos_top is not None and pos_rank > pos_top:
            ctx.reject(rec, "positive-rank", {"rank": pos_rank, "score": pos_score,
                                              "limit": pos_top, "pool": t.pool})
            continue
        if outranks:
            worst = None
            for i, neg in enumerate(rec.negatives):
                if neg.teacher_rank < pos_rank or neg.teacher_score > pos_score:
                    if worst is None or neg.teacher_score > rec.negatives[worst].teacher_score:
                        worst = i
            if worst is not None:
                neg = rec.negatives[worst]
                ctx.reject(rec, "negative-outranks-positive", {
                    "negative_rank": neg.teacher_rank, "negative_score": neg.teacher_score,
                    "negative_level": neg.level, "positive_rank": pos_rank,
                    "positive_score": pos_score})
                continue
        had = len(rec.negatives)
        keep = []
        for i, neg in enumerate(rec.negatives):
            rank = neg.teacher_rank
            if neg_bottom is not None and rank > neg_bottom:
                ctx.reject(rec, "negative-too-easy", {"rank": rank, "score": neg.teacher_score,
                                                      "limit": neg_bottom}, negative=neg)
                pruned += 1
            else:
                keep.append(i)
        if keep_negatives(rec, [rec.negatives[i] for i in keep], ctx, drop_empty=had > 0):
            kept.append(rec)
    ctx.note(positive_top=pos_top, negative_bottom=neg_bottom, negatives_dropped=pruned,
             records_in=len(records), records_kept=len(kept))
    return kept
