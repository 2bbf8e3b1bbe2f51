"""``round_trip``: keep a generated query only if it finds its own passage again.

Promptagator's round-trip consistency (Dai et al., ICLR 2023, §3.2): a query an LLM wrote
for a passage should retrieve that passage. For records written from documents (query =
generated, ``positive`` = the source passage), the teacher searches the whole pool with the
query -- every distinct document text of the file plus ``--corpus`` (``ctx.corpus``), the
ranking ``teacher_scores`` already does exactly and caches -- and a record whose positive
ranks below the bar (``top_k``, held to a chance share of a small pool: ``bar``) is dropped as
``round-trip`` with its rank, the bar and the pool size.
Without the documents there is nothing to search, so an empty corpus is an error.

The record's own ``positive`` is the passage that decides. Its rank counts only documents
outside the record's own positives: a multi-hop query (``from-corpus-multihop``) whose bundle
passages outrank its seed passage found what it was written for, and is kept.

Ranks are only comparable across one pool, so a record that arrives scored by this teacher
against another pool (an earlier run without the corpus, say) is scored again here.

The report gets the rank distribution (1, 2-3, 4-10, 11-100, deeper), the median rank, the
share kept, and how many positives were not found verbatim in the corpus (those compete
with whatever near-copy of themselves the corpus holds, so a high count means the records'
passages and the corpus were cut differently).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from curate.core.errors import CurateError
from curate.core.params import check_params
from curate.filter.base import register
from curate.filter.teacher_scores import TeacherDepth, document_pool, ensure_teacher_scores

NO_CORPUS = "round_trip searches the documents the queries were written from: give them with --corpus"
BUCKETS = (("rank_1", 1, 1), ("rank_2_3", 2, 3), ("rank_4_10", 4, 10), ("rank_11_100", 11, 100))


@dataclass
class RoundTripParams(TeacherDepth):
    """``top_k`` 3: Promptagator keeps a query whose source passage is in the retriever's top K
    (its retriever was trained on the generated data itself); the open re-implementation
    Promptodile (CIKM 2025, small open generators) keeps the top 3. Here the judge is an
    off-the-shelf teacher, and a weak generator often writes title-like queries that match
    every passage on the same topic about as well as their own: rank 1 would drop such a query
    on a coin toss between near-equal siblings, the top 3 lets a couple of close siblings
    through and still drops a query that drifted off its passage (README, "Filter")."""

    top_k: int = field(default=3, metadata={"min": 1})
    # A share of the pool instead of a count: the source passage must rank in the best
    # ``top_share`` of the documents (never fewer than ``top_k``). A cut by chance, not by count:
    # an unrelated query lands its passage in the top 1% one time in a hundred whatever the
    # corpus size, while a hard query that finds its passage well above chance stays.
    top_share: float | None = field(default=None, metadata={"min": 0.0, "max": 1.0, "min_open": True})
    # The bar follows the pool: a query unrelated to its passage still passes when the passage
    # lands in the top k by chance, k/N of the time. ``top_k`` 3 keeps that under 1% from 300
    # documents on, but on the 12 of a demo folder a random query would pass one time in four; so
    # k is also held to ``max_chance`` of the pool (at least 1: rank 1 of 12 passes by chance 8%
    # of the time). From 30 documents on (at 0.1) the cap no longer binds and ``top_k`` rules.
    max_chance: float | None = field(default=0.1, metadata={"min": 0.0, "max": 1.0, "min_open": True})


def bar(p: RoundTripParams, pool: int) -> int:
    """The deepest rank a positive may have in a pool of ``pool`` documents."""
    k = p.top_k
    if p.max_chance is not None:
        k = min(k, max(1, math.floor(p.max_chance * pool)))
    if p.top_share:
        k = max(k, math.ceil(p.top_share * pool))
    return k


def rank_counts(ranks: list[int]) -> dict[str, int]:
    """How many ranks fall in each report bucket (1, 2-3, 4-10, 11-100, deeper)."""
    counts = {name: sum(lo <= r <= hi for r in ranks) for name, lo, hi in BUCKETS}
    counts["rank_deeper"] = sum(r > BUCKETS[-1][2] for r in ranks)
    return counts


@register("round_trip", RoundTripParams, needs_corpus=NO_CORPUS)
def round_trip(records, params, ctx):
    p = check_params("round_trip", RoundTripParams, params)
    if not ctx.corpus:
        raise CurateError(NO_CORPUS)
    pool, _ = document_pool(records, ctx.corpus)
    for rec in records:
        if rec.teacher is not None and rec.teacher.pool != len(pool):
            rec.teacher = None  # ranked against another pool: not comparable
    ensure_teacher_scores(records, ctx, depth=p.depth)

    corpus = set(ctx.corpus)
    top_k = bar(p, len(pool))
    above = _own_positives_above(records, ctx)
    kept, ranks = [], []
    for i, rec in enumerate(records):
        t = rec.teacher
        rank = t.positive_rank - above.get(i, 0)
        ranks.append(rank)
        if rank > top_k:
            ctx.reject(rec, "round-trip", {"rank": rank, "top_k": top_k, "pool": t.pool, "score": t.positive})
        else:
            kept.append(rec)
    ctx.note(top_k=top_k, **({"top_share": p.top_share} if p.top_share else {}), pool=len(pool),
             records_in=len(records), records_kept=len(kept),
             kept_share=round(len(kept) / len(records), 4) if records else None,
             **rank_counts(ranks), median_rank=statistics.median(ranks) if ranks else None,
             positives_not_in_corpus=sum(rec.positive not in corpus for rec in records))
    return kept


def _own_positives_above(records, ctx) -> dict[int, int]:
    """Per record with further positives (by index): how many of them the teacher scores above
    its positive, to be taken off its rank."""
    multi = [i for i, rec in enumerate(records) if rec.positives]
    if not multi:
        return {}
    teacher = ctx.teacher
    queries = teacher.encode([records[i].query for i in multi], teacher.query_prompt)
    docs = teacher.encode([p.text for i in multi for p in records[i].positives], teacher.doc_prompt)
    out, start = {}, 0
    for row, i in enumerate(multi):
        end = start + len(records[i].positives)
        out[i] = int(((docs[start:end] @ queries[row]) > records[i].teacher.positive).sum())
        start = end
    return out
