"""Dense retrieval for evaluation: encode with a ``Teacher``, exact top-k by inner product.

Documents go through ``Teacher.encode_docs``, which encodes only what the embedding cache
lacks, longest texts first, so each batch holds texts of similar length and little
padding is computed (the bulk of the cost of a full evaluation).  The search is exact
(``curate.negatives.search.top_k``, FAISS flat inner product), so the metrics depend on the
model alone, never on an approximate index.

Each query's hits are put in trec_eval's order: score descending, equal scores by document
id descending, so two runs with tied scores score the same as pytrec_eval would score them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Ranking:
    """Each query's retrieved documents, best first, with their scores."""

    qids: list[str]
    doc_ids: list[list[str]]
    scores: list[list[float]]

    def run(self) -> dict[str, list[str]]:
        return dict(zip(self.qids, self.doc_ids))


@dataclass
class Timings:
    """Wall-clock seconds per phase, summed when a phase runs more than once."""

    seconds: dict[str, float] = field(default_factory=dict)

    def add(self, phase: str, started: float) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - started


def trec_order(doc_ids: Sequence[str], scores: Sequence[float]) -> list[int]:
    """Positions sorted as trec_eval sorts a run: score descending, ties by doc id descending."""
    by_id = sorted(range(len(doc_ids)), key=doc_ids.__getitem__, reverse=True)
    return sorted(by_id, key=lambda i: -scores[i])  # stable: ties keep the doc-id order


def encode_docs(teacher, corpus: Mapping[str, str], doc_ids: Sequence[str]) -> np.ndarray:
    """(len(doc_ids), dim) document vectors."""
    return teacher.encode_docs([corpus[d] for d in doc_ids])


def search(query_vecs: np.ndarray, qids: Sequence[str], doc_vecs: np.ndarray,
           doc_ids: Sequence[str], depth: int) -> Ranking:
    """Exact top-``depth`` documents per query, in trec_eval order."""
    from curate.negatives.search import top_k

    return ranked(*top_k(query_vecs, doc_vecs, depth), qids, doc_ids)


def ranked(scores: np.ndarray, idx: np.ndarray, qids: Sequence[str], doc_ids: Sequence[str]) -> Ranking:
    """Top-k hits (positions into ``doc_ids``, -1 for none) as a ``Ranking`` in trec_eval order."""
    ranked_ids, ranked_scores = [], []
    for row_s, row_i in zip(scores.tolist(), idx.tolist()):
        ids = [doc_ids[i] for i in row_i if i >= 0]
        row_s = row_s[:len(ids)]
        order = trec_order(ids, row_s)
        ranked_ids.append([ids[i] for i in order])
        ranked_scores.append([row_s[i] for i in order])
    return Ranking(list(qids), ranked_ids, ranked_scores)


def _timed_encode(teacher, timings: Timings, phase: str, fn, *args) -> np.ndarray:
    """Run an encoding step, booking any model loading it triggered as ``load_model``."""
    started, loading = time.perf_counter(), teacher.load_seconds
    vecs = fn(*args)
    timings.add(phase, started)
    loaded = teacher.load_seconds - loading
    timings.seconds[phase] -= loaded
    timings.seconds["load_model"] = timings.seconds.get("load_model", 0.0) + loaded
    return vecs


def retrieve(teacher, queries: Mapping[str, str], qids: Sequence[str], corpus: Mapping[str, str],
             doc_ids: Sequence[str], depth: int,
             timings: Timings | None = None, bm25_weight: float | None = None) -> tuple[Ranking, np.ndarray]:
    """Rank ``doc_ids`` for each of ``qids``; also return the document vectors (for reuse).
    ``bm25_weight``: rank by BM25 mixed into the cosine at that share, the hybrid teacher
    ``curate mine --scores hybrid`` scores with (``curate.negatives.hybrid``).

    The model loads lazily (not at all when everything is cached), so its loading time is
    taken out of the encoding phase it fell into and booked as ``load_model``.
    """
    timings = timings if timings is not None else Timings()
    doc_vecs = _timed_encode(teacher, timings, "encode_docs", encode_docs, teacher, corpus, doc_ids)
    query_vecs = _timed_encode(teacher, timings, "encode_queries", teacher.encode_queries,
                               [queries[q] for q in qids])
    t = time.perf_counter()
    if bm25_weight:
        from curate.negatives.hybrid import bm25_index, hybrid_top_k

        index = bm25_index([corpus[d] for d in doc_ids])
        hits = hybrid_top_k(index, [queries[q] for q in qids], query_vecs, doc_vecs, bm25_weight, depth)
        ranking = ranked(*hits, qids, doc_ids)
    else:
        ranking = search(query_vecs, qids, doc_vecs, doc_ids, depth)
    timings.add("search", t)
    return ranking, doc_vecs
