"""Retrieval metrics: NDCG@k, Recall@k and MRR@k, per query and averaged, in numpy.

The definitions follow trec_eval (what pytrec_eval, BEIR and MTEB report):

* NDCG@k uses *graded linear* gains -- a document judged 2 counts twice a document judged
  1 -- discounted by ``1 / log2(rank + 1)``; the ideal ordering is all judged documents of
  the query sorted by grade, so relevant documents the ranking never reached still count.
* Recall@k and MRR@k are binary: a document is relevant when its grade is >= 1.  Recall
  divides by every relevant document in the qrels, retrieved or not; MRR@k is the inverse
  rank of the first relevant document within the top k (0 when there is none).
* A query without any relevant document has no defined score and is skipped; a query with
  relevant documents but no ranking scores 0 everywhere (trec_eval's ``-c``).
* BEIR/MTEB leave out a retrieved document whose id equals the query id (some datasets
  put each query in the corpus as well); ``ignore_identical_ids`` does the same, before
  cutting at k, so the list still holds k documents.

The ranking of a query is a list of document ids, best first; ordering ties is the
caller's job (``curate.evaluate.retrieve`` orders them as trec_eval does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

# The three numbers ``curate eval`` reports: (name, kind, k).
DEFAULT_METRICS: tuple[tuple[str, str, int], ...] = (
    ("ndcg@10", "ndcg", 10), ("recall@100", "recall", 100), ("mrr@10", "mrr", 10))


@dataclass
class Scores:
    """Per-query values and their means, for the queries that have relevant documents."""

    means: dict[str, float]
    per_query: dict[str, dict[str, float]] = field(default_factory=dict)  # metric -> qid -> value

    @property
    def n_queries(self) -> int:
        return len(next(iter(self.per_query.values()), {}))


def scored_queries(qrels: Mapping[str, Mapping[str, int]]) -> list[str]:
    """Query ids with at least one relevant (grade >= 1) document, in qrels order."""
    return [q for q, docs in qrels.items() if any(g >= 1 for g in docs.values())]


def _discounts(k: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, k + 2, dtype=np.float64))


def gain_matrix(ranked: Sequence[Sequence[str]], judged: Sequence[Mapping[str, int]],
                k: int) -> np.ndarray:
    """(n_queries, k) grades of the top-k documents of each ranking (0 when unjudged,
    negative grades clipped to 0, short rankings padded with 0)."""
    gains = np.zeros((len(ranked), k), dtype=np.float64)
    for i, (docs, rel) in enumerate(zip(ranked, judged)):
        row = [max(rel.get(d, 0), 0) for d in docs[:k]]
        gains[i, :len(row)] = row
    return gains


def ndcg(gains: np.ndarray, judged: Sequence[Mapping[str, int]], k: int) -> np.ndarray:
    """NDCG@k per row of a gain matrix (graded gains, ideal DCG from the qrels)."""
    disc = _discounts(k)
    top = gains[:, :k]
    dcg = top @ disc[:top.shape[1]]
    ideal = np.zeros((len(judged), k), dtype=np.float64)
    for i, rel in enumerate(judged):
        best = sorted((g for g in rel.values() if g > 0), reverse=True)[:k]
        ideal[i, :len(best)] = best
    idcg = ideal @ disc
    return np.divide(dcg, idcg, out=np.zeros_like(dcg), where=idcg > 0)


def recall(gains: np.ndarray, judged: Sequence[Mapping[str, int]], k: int) -> np.ndarray:
    """Recall@k per row: relevant documents in the top k over all relevant documents."""
    n_rel = np.array([sum(g >= 1 for g in rel.values()) for rel in judged], dtype=np.float64)
    hits = (gains[:, :k] >= 1).sum(axis=1)
    return np.divide(hits, n_rel, out=np.zeros_like(n_rel), where=n_rel > 0)


def mrr(gains: np.ndarray, k: int) -> np.ndarray:
    """MRR@k per row: 1 / rank of the first relevant document in the top k, else 0."""
    hit = gains[:, :k] >= 1
    first = hit.argmax(axis=1)
    return np.where(hit.any(axis=1), 1.0 / (first + 1), 0.0)


def evaluate(run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]],
             metrics: Sequence[tuple[str, str, int]] = DEFAULT_METRICS,
             ignore_identical_ids: bool = True) -> Scores:
    """Score ``run`` (query id -> ranked doc ids) against ``qrels`` (query id -> {doc: grade}).

    Every query of ``qrels`` with a relevant document is scored, found in ``run`` or not.
    """
    qids = scored_queries(qrels)
    judged = [qrels[q] for q in qids]
    ranked = []
    for q in qids:
        docs = list(run.get(q, ()))
        if ignore_identical_ids:
            docs = [d for d in docs if d != q]
        ranked.append(docs)
    depth = max((k for _, _, k in metrics), default=0)
    gains = gain_matrix(ranked, judged, depth)
    per_query: dict[str, dict[str, float]] = {}
    means: dict[str, float] = {}
    for name, kind, k in metrics:
        if kind == "ndcg":
            values = ndcg(gains, judged, k)
        elif kind == "recall":
            values = recall(gains, judged, k)
        elif kind == "mrr":
            values = mrr(gains, k)
        else:
            raise ValueError(f"unknown metric kind {kind!r}")
        per_query[name] = dict(zip(qids, values.tolist()))
        means[name] = float(values.mean()) if len(values) else 0.0
    return Scores(means=means, per_query=per_query)
