"""A teacher's scores made stronger with BM25: lexical and dense evidence, mixed by a weight the data picks.

Why: curate's default teacher is the student itself (all-MiniLM-L6-v2), so its scores teach the
student nothing it does not already rank that way. BM25 ranks differently, and fused with the
dense teacher it ranks labelled positives better than either alone on every collection tried
(issue 41). A fused *rank* is not a score a student can be trained to match, so this mixes
scores: a query's BM25 scores are divided by its best BM25 score over the whole corpus (its top
document gets 1), and the hybrid score is ``(1 - w) * cosine + w * that share``.

``w`` is not fitted to a benchmark: each run takes the value in 0, 0.1, .., 1 under which its own
queries rank their own positives highest (mean reciprocal rank of the record's positive among the
union of the dense and the BM25 top 100 and the positives, a positive tied with others ranked in
the middle of them), ties between weights going to the smaller ``w``.
That is a property of the data: on a corpus where words decide relevance BM25 gets weight, where
they mislead it gets none (``w = 0`` is the dense teacher alone).

The scores decide nothing in mining: the dense teacher still picks the negatives (picking by a
stronger ranker surfaces unlabelled relevant documents as "hard negatives"). They are what the
export hands the student to learn from (the ``label`` column, distillation losses).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from curate.core.progress import track

WEIGHTS = tuple(round(0.1 * i, 1) for i in range(11))  # BM25's share, tried in this order (ties: the first)
CANDIDATES = 100  # per query and ranker: the depth of the pool the weight is judged on


@dataclass
class Hybrid:
    """The chosen weight, how each weight ranked the positives, and the rescored texts per query."""

    weight: float
    mrr: dict[float, float]  # weight -> mean reciprocal rank of the records' positives
    positives: list[np.ndarray] = field(default_factory=list)  # per query, its positives' hybrid scores
    picked: list[np.ndarray] = field(default_factory=list)  # per query, its picked documents' hybrid scores

    @property
    def name(self) -> str:
        return f"hybrid(bm25 {self.weight:g})"

    def describe(self) -> dict:
        return {"weight": self.weight, "mrr_by_weight": {f"{w:g}": round(m, 4) for w, m in self.mrr.items()},
                "candidates": CANDIDATES}


def bm25_index(texts: Sequence[str]):
    """BM25 over the corpus (bm25s, English stop words), for ``hybrid_scores``."""
    import bm25s

    index = bm25s.BM25()
    index.index(bm25s.tokenize(list(texts), stopwords="en", show_progress=False), show_progress=False)
    return index


def query_tokens(queries: Sequence[str]) -> list[list[str]]:
    """The queries' words as ``lexical_share`` takes them (the index's tokenizer and stop words)."""
    import bm25s

    return bm25s.tokenize(list(queries), stopwords="en", return_ids=False, show_progress=False)


def hybrid_scores(texts: Sequence[str], queries: Sequence[str], qvecs: np.ndarray, dvecs: np.ndarray,
                  positives: Sequence[Sequence[int]], picked: Sequence[Sequence[int]], index=None,
                  left_out: Sequence[Sequence[int]] | None = None) -> Hybrid:
    """Choose ``w`` on the queries' own positives (``positives[i][0]`` is query i's record positive,
    the rest its other known positives), then score each query's positives and ``picked`` documents.
    ``qvecs``/``dvecs``: the dense teacher's normalised vectors, so a dot product is its cosine.
    ``left_out[i]``: documents that do not compete with query i's positive when ``w`` is chosen
    (a document whose text is the query: BM25 puts it first, and it says nothing of the weight)."""
    index = index if index is not None else bm25_index(texts)
    tokens = query_tokens(queries)
    reciprocal = {w: 0.0 for w in WEIGHTS}
    pos_parts, pick_parts = [], []
    with track(len(queries) if len(queries) > 200 else 0, "hybrid scores") as advance:
        for i, words in enumerate(tokens):
            share = lexical_share(index, words, len(dvecs))
            dense = dvecs @ qvecs[i]
            own = np.asarray(list(positives[i]), dtype=np.int64)
            pool = np.unique(np.concatenate([_top(dense, CANDIDATES), _top(share, CANDIDATES), own]))
            others = pool[~np.isin(pool, own)]
            if left_out is not None and len(left_out[i]):
                others = others[~np.isin(others, np.asarray(list(left_out[i]), dtype=np.int64))]
            for w in WEIGHTS:
                mixed = mix(dense, share, w)
                above, level = mixed[others] > mixed[own[0]], mixed[others] == mixed[own[0]]
                # a tie ranks the positive in the middle of its equals: a query BM25 knows no word of
                # scores every document 0, and must not count as ranking its positive first
                reciprocal[w] += 1.0 / (1 + int(above.sum()) + 0.5 * int(level.sum()))
            pos_parts.append((dense[own], share[own]))
            got = np.asarray(list(picked[i]), dtype=np.int64)
            pick_parts.append((dense[got], share[got]))
            advance()
    n = max(1, len(queries))
    mrr = {w: r / n for w, r in reciprocal.items()}
    weight = max(WEIGHTS, key=lambda w: (round(mrr[w], 9), -w))
    return Hybrid(weight=weight, mrr=mrr, positives=[mix(d, sh, weight) for d, sh in pos_parts],
                  picked=[mix(d, sh, weight) for d, sh in pick_parts])


def hybrid_top_k(index, queries: Sequence[str], qvecs: np.ndarray, dvecs: np.ndarray, weight: float,
                 depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Each query's ``depth`` best documents by the hybrid score at ``weight``, best first, as
    ``(scores, indices)``; exact: every document is scored (BM25 scores them all anyway)."""
    tokens = query_tokens(queries)
    depth = min(depth, len(dvecs))
    scores, hits = np.zeros((len(tokens), depth)), np.zeros((len(tokens), depth), dtype=np.int64)
    for i, words in enumerate(tokens):
        mixed = mix(dvecs @ qvecs[i], lexical_share(index, words, len(dvecs)), weight)
        top = _top(mixed, depth)
        top = top[np.argsort(-mixed[top], kind="stable")]
        scores[i], hits[i] = mixed[top], top
    return scores, hits


def lexical_share(index, words: Sequence[str], n_docs: int) -> np.ndarray:
    """Each document's BM25 score for the query over the query's best one (its top document gets 1);
    all 0 when no word of the query is in the corpus (BM25 has no say)."""
    known = [t for t in words if t in index.vocab_dict]
    lexical = np.asarray(index.get_scores(known), dtype=np.float64) if known else np.zeros(n_docs)
    best = float(lexical.max()) if lexical.size else 0.0
    return lexical / best if best > 0 else np.zeros_like(lexical)


def mix(dense: np.ndarray, share: np.ndarray, weight: float) -> np.ndarray:
    """The hybrid score: the teacher's cosine with BM25's share at ``weight``."""
    return (1 - weight) * dense + weight * share


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    k = min(k, scores.size)
    return np.argpartition(-scores, k - 1)[:k] if k else np.zeros(0, dtype=np.int64)
