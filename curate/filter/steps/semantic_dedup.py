"""``semantic_dedup``: drop records whose query (or positive) says what another record's says.

``minhash`` compares word 3-grams, so it finds copies; a query reworded with other words, its
clauses swapped or turned from a claim into a question shares few 3-grams and passes. This step
compares the teacher's vectors instead: for each field in ``fields`` (``query``, ``positive``),
in order, across the records still kept, two records whose texts have cosine >= ``threshold``
are duplicates, duplicates link into groups, and one member of each group is kept.

Which member (``keep``): ``margin`` (default) keeps the record with the largest teacher margin
(``record.teacher.margin``, written by ``teacher_rank`` and the other teacher steps, or by
``curate mine``); records without one rank after those with one, in input order, so a file no
teacher step has scored keeps the first seen. ``first`` keeps the first seen, where "first" is
the step's input order (the file as read, less earlier drops), a fact of the file rather than
of how a search happened to visit it. Members are visited best first and one is dropped only
when it is at or above the threshold with an already kept member, so in a chain A~B~C whose
ends are apart both ends stay (as in ``minhash``).

No second encoding: texts go through ``ctx.teacher`` with the prompts the teacher steps use
(queries with the query prompt; positives with the document prompt, or the query prompt in
symmetric records), so behind a teacher step the embedding cache answers every one and the
model runs on nothing; the report's ``texts_encoded`` says how many it did run on.

The search is ``curate.negatives.search``'s, the one the miner uses: the field's vectors are
both the index and the queries, searched ``batch`` rows at a time for their ``k`` nearest
neighbours; a row whose ``k``-th neighbour is still at or above the threshold is searched again
four times as deep, until its list ends below the threshold, so every pair is found however
large a group is. With ``--executor ray`` and at least two rows per worker the index is cut
into one shard per worker (``ShardedIndex``), as ``curate mine`` cuts its corpus; the pairs,
and so the drops, are the same as one flat index's.

Each drop is logged as ``semantic-duplicate-<field>`` with ``{"kept": <id of the kept record>,
"cosine": <its cosine with the kept record's text>}``. The default threshold comes from
``bench/semantic_dedup.py`` (docs/stages/filter.md, "Semantic duplicates").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, Union

import numpy as np

from curate.core.errors import CurateError
from curate.core.params import check_params
from curate.core.records import Record
from curate.filter.base import FilterContext, register

FIELDS = ("query", "positive")
Field = Literal["query", "positive"]


@dataclass
class SemanticDedupParams:
    fields: Union[list[Field], Field] = field(default_factory=lambda: ["query"])
    # cosine at or above which two texts are one; chosen by bench/semantic_dedup.py
    threshold: float = field(default=0.95, metadata={"min": 0.0, "max": 1.0, "min_open": True})
    keep: Literal["margin", "first"] = "margin"
    k: int = field(default=10, metadata={"min": 1})  # neighbours asked for first (deeper where needed)
    batch: int = field(default=4096, metadata={"min": 1})  # rows searched at once


def _check(params: dict) -> SemanticDedupParams:
    p = check_params("semantic_dedup", SemanticDedupParams, params)
    fields = [p.fields] if isinstance(p.fields, str) else list(p.fields)
    if not fields:
        raise CurateError(f"semantic_dedup: fields must name at least one of {', '.join(FIELDS)}")
    p.fields = list(dict.fromkeys(fields))
    return p


def _vectors(records: list[Record], name: str, teacher) -> np.ndarray:
    """The field's vectors, each text encoded with the prompt the teacher steps give it."""
    from curate.llm.taskspec import is_symmetric

    if name == "query":
        return teacher.encode([r.query for r in records], teacher.query_prompt)
    by_prompt: dict[str, list[int]] = {}
    for n, rec in enumerate(records):
        by_prompt.setdefault(teacher.query_prompt if is_symmetric(rec) else teacher.doc_prompt, []).append(n)
    out: np.ndarray | None = None
    for prompt, rows in by_prompt.items():
        vecs = teacher.encode([records[n].positive for n in rows], prompt)
        if out is None:
            out = np.empty((len(records), vecs.shape[1]), np.float32)
        out[rows] = vecs
    return out


def similar_pairs(vecs: np.ndarray, threshold: float, k: int = 10, batch: int = 4096,
                  executor=None) -> tuple[dict[tuple[int, int], float], dict]:
    """Every pair of rows ``(i, j)``, ``i < j``, whose inner product is >= ``threshold``, with it;
    and the index's description. Rows whose list is full down to its last entry are searched
    again deeper, so no pair is missed."""
    n = len(vecs)
    found_i, found_j, found_s = [], [], []
    from curate.negatives.sharded import build_index

    index = build_index(vecs, "flat", executor)  # one shard per Ray worker, as curate mine searches
    try:
        for a in range(0, n, batch):
            rows = np.arange(a, min(n, a + batch))
            depth = min(n, k + 1)  # one more for the row itself
            while len(rows):
                scores, ids = index.search(vecs[rows], depth)
                hit = (scores >= threshold) & (ids >= 0) & (ids != rows[:, None])
                found_i.append(np.broadcast_to(rows[:, None], ids.shape)[hit])
                found_j.append(ids[hit])
                found_s.append(scores[hit])
                if depth >= n:
                    break
                rows = rows[scores[:, -1] >= threshold]
                depth = min(n, depth * 4)
        described = index.describe()
    finally:
        if hasattr(index, "close"):
            index.close()
    i = np.concatenate([np.zeros(0, np.int64), *found_i])
    j = np.concatenate([np.zeros(0, np.int64), *found_j])
    s = np.concatenate([np.zeros(0, np.float32), *found_s])
    pairs: dict[tuple[int, int], float] = {}
    for a, b, x in zip(np.minimum(i, j).tolist(), np.maximum(i, j).tolist(), s.tolist()):
        if x > pairs.get((a, b), -math.inf):  # found from both ends: the larger score
            pairs[(a, b)] = x
    return pairs, described


@register("semantic_dedup", SemanticDedupParams, _check)
def semantic_dedup(records: list[Record], params, ctx: FilterContext) -> list[Record]:
    from curate.dedup.minhash import union_find_groups
    from curate.filter.steps.minhash import teacher_margin

    p = _check(params)
    thr = float(p.threshold)
    alive = list(records)
    if p.keep == "margin":  # the teacher margin only: no generator margin, unlike minhash's tiers
        def rank(i: int):
            m = teacher_margin(alive[i])
            return m is None, -(m or 0.0), i
    else:
        def rank(i: int):
            return i

    teacher = ctx.teacher if len(alive) >= 2 else None
    before = (teacher.encoded, teacher.cache_hits) if teacher is not None else (0, 0)
    for name in p.fields:
        if len(alive) < 2:
            ctx.note(**{f"{name}_groups": 0, f"{name}_dropped": 0})
            continue
        vecs = _vectors(alive, name, teacher)
        pairs, described = similar_pairs(vecs, thr, p.k, p.batch, ctx.executor)
        keys = np.array(list(pairs), dtype=np.int64).reshape(-1, 2)
        groups = union_find_groups(keys[:, 0], keys[:, 1])
        dropped: set[int] = set()
        for group in groups:
            kept: list[int] = []
            for m in sorted(group, key=rank):
                sims = [(pairs.get((min(m, c), max(m, c)), -math.inf), c) for c in kept]
                best = max(sims, key=lambda t: t[0], default=(-math.inf, -1))  # ties: the earlier kept
                if best[0] >= thr:
                    ctx.reject(alive[m], f"semantic-duplicate-{name}",
                               {"kept": alive[best[1]].id, "cosine": round(best[0], 4)})
                    dropped.add(m)
                else:
                    kept.append(m)
        ctx.note(**{f"{name}_groups": len(groups), f"{name}_dropped": len(dropped),
                    f"{name}_index": described})
        alive = [r for i, r in enumerate(alive) if i not in dropped]
    if teacher is not None:
        ctx.note(threshold=thr, texts_encoded=teacher.encoded - before[0],
                 embeddings_from_cache=teacher.cache_hits - before[1])
    return alive
