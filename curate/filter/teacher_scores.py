"""Teacher scores for a file of records: cosines and exact ranks against the file's own pool.

The pool is every distinct document text in the file (each record's positive and
negatives) plus ``ctx.corpus``.  For each record the teacher scores its query against the
whole pool and writes::

    rec.teacher = TeacherScores(
        model=...,            # teacher.model_id; records already scored by it are skipped
        positive=cos(q, positive),
        positive_rank=1 + number of pool documents scoring strictly higher,
        margin=positive - max(negative scores)   (None without negatives),
        pool=pool size,
    )

and each negative's ``teacher_score`` and ``teacher_rank`` (the same rank).  A document whose text equals the query is left out of
the ranking (a query should not compete with itself).  Ranks come from a top-``depth``
search; a record with a document deeper than that is re-scored against the full pool in
query chunks, so every rank is exact however deep.

Prompts follow the E5 convention: queries get the query prompt and documents the document
prompt, but in symmetric records (``taskspec.is_symmetric``: sts, bitext) both sides are
encoded with the query prompt.  Steps that prune or reorder negatives go through
``Record.keep_negatives``, which measures the margin again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from curate.negatives.search import rank_targets, top_k
from curate.core.records import Record, TeacherScores, margin_of
from curate.llm.taskspec import is_symmetric



@dataclass
class TeacherDepth:
    """The parameter every teacher-based step shares: how deep the teacher's ranks are computed."""

    depth: int = field(default=100, metadata={"min": 1})


def is_annotated(rec: Record, model_id: str) -> bool:
    """Scored by this model: the record's positive and every negative it has now."""
    t = rec.teacher
    return (t is not None and t.model == model_id and t.positive is not None and t.positive_rank is not None
            and all(n.teacher_score is not None and n.teacher_rank is not None for n in rec.negatives))


def document_pool(records: Sequence[Record], corpus: Sequence[str]) -> tuple[list[str], dict[str, int]]:
    index: dict[str, int] = {}
    for rec in records:
        for text in (rec.positive, *(n.text for n in rec.negatives)):
            index.setdefault(text, len(index))
    for text in corpus:
        if text.strip():  # a blank document is no candidate: it would only take a rank (mine's pool skips it too)
            index.setdefault(text, len(index))
    return list(index), index


def _score_group(teacher, group: list[Record], pool: list[str], index: dict[str, int],
                 doc_prompt: str, depth: int) -> None:
    queries = teacher.encode([r.query for r in group], teacher.query_prompt)
    docs = teacher.encode(pool, doc_prompt)
    targets = [[index[r.positive], *(index[n.text] for n in r.negatives)] for r in group]
    exclude = [index.get(r.query) for r in group]
    k = min(len(pool), max(1, int(depth)) + 1)  # one spare for a query found in the pool
    top_s, top_i = top_k(queries, docs, k)

    results: list[tuple[list[float], list[int]] | None] = []
    deep: list[int] = []
    for qi, tg in enumerate(targets):
        row_i, row_s = top_i[qi], top_s[qi]
        if exclude[qi] is not None and exclude[qi] not in tg:
            keep = row_i != exclude[qi]
            row_i, row_s = row_i[keep], row_s[keep]
        where = {int(d): p for p, d in enumerate(row_i)}
        if all(t in where for t in tg):
            s = [float(row_s[where[t]]) for t in tg]
            r = [int((row_s > row_s[where[t]]).sum()) + 1 for t in tg]
            results.append((s, r))
        else:
            results.append(None)
            deep.append(qi)
    if deep:
        excl = [exclude[qi] if exclude[qi] not in targets[qi] else None for qi in deep]
        ds, dr = rank_targets(queries[deep], docs, [targets[qi] for qi in deep], excl)
        for j, qi in enumerate(deep):
            results[qi] = ([float(x) for x in ds[j]], [int(x) for x in dr[j]])

    for rec, (s, r) in zip(group, results):
        for neg, score, rank in zip(rec.negatives, s[1:], r[1:]):
            neg.teacher_score, neg.teacher_rank = score, rank
        rec.teacher = TeacherScores(model=teacher.model_id, positive=s[0], positive_rank=r[0],
                                    margin=margin_of(s[0], s[1:]), pool=len(pool))


def ensure_teacher_scores(records: Sequence[Record], ctx, depth: int = 100) -> Sequence[Record]:
    """Annotate every record the current teacher has not scored yet; returns ``records``."""
    teacher = ctx.teacher
    todo = [r for r in records if not is_annotated(r, teacher.model_id)]
    if not todo:
        return records
    pool, index = document_pool(records, ctx.corpus or [])
    encoded0, hits0 = teacher.encoded, teacher.cache_hits
    groups: dict[str, list[Record]] = {}
    for rec in todo:
        symmetric = is_symmetric(rec)
        groups.setdefault(teacher.query_prompt if symmetric else teacher.doc_prompt, []).append(rec)
    for doc_prompt, group in groups.items():
        _score_group(teacher, group, pool, index, doc_prompt, depth)
    if hasattr(ctx, "note"):
        ctx.note(teacher_model=teacher.model_id, pool_docs=len(pool), scored_records=len(todo),
                 texts_encoded=teacher.encoded - encoded0,
                 embeddings_from_cache=teacher.cache_hits - hits0)
    return records


def positive_scores(records: Sequence[Record]) -> np.ndarray:
    """Teacher positive scores of the annotated records (for plots and reports)."""
    vals = [r.teacher.positive for r in records if r.teacher is not None and r.teacher.positive is not None]
    return np.asarray(vals, dtype=np.float64)


def teacher_margins(records: Sequence[Record], teacher) -> list[float | None]:
    """Positive minus best negative cosine per record, without ranking against a pool.

    For choosing the best member of a duplicate group before the ranking steps run: only
    the members are encoded (and the cache keeps that work for the ranking later).
    """
    if not records:
        return []
    queries = teacher.encode([r.query for r in records], teacher.query_prompt)
    by_prompt: dict[str, list[str]] = {}
    for rec in records:
        prompt = teacher.query_prompt if is_symmetric(rec) else teacher.doc_prompt
        by_prompt.setdefault(prompt, []).extend([rec.positive, *(n.text for n in rec.negatives)])
    vectors = {p: dict(zip(texts, teacher.encode(texts, p))) for p, texts in by_prompt.items()}
    out: list[float | None] = []
    for q, rec in zip(queries, records):
        prompt = teacher.query_prompt if is_symmetric(rec) else teacher.doc_prompt
        s = [float(vectors[prompt][t] @ q) for t in (rec.positive, *(n.text for n in rec.negatives))]
        out.append(margin_of(s[0], s[1:]))
    return out
