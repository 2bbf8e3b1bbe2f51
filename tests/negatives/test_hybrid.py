"""BM25 mixed into the teacher's scores: the weight follows how the data's own positives rank, and the
scores handed back belong to the documents asked for, in order."""

from __future__ import annotations

import random

import numpy as np

from curate.negatives.hybrid import bm25_index, hybrid_scores

WORDS = [f"w{a}{b}" for a in "abcdefghij" for b in "klmnopqrst"]  # 100 distinct words


def _corpus(rng: random.Random, n: int = 60) -> list[str]:
    return [" ".join(rng.sample(WORDS, 12)) for _ in range(n)]


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_words_that_decide_relevance_earn_bm25_a_weight():
    rng, nrng = random.Random(0), np.random.default_rng(0)
    docs = _corpus(rng)
    queries = [" ".join(docs[i].split()[:4]) for i in range(20)]  # each query: words of its positive
    dvecs = _unit(nrng.normal(size=(len(docs), 16)))  # a dense teacher that knows nothing
    qvecs = _unit(nrng.normal(size=(len(queries), 16)))
    got = hybrid_scores(docs, queries, qvecs, dvecs, [[i] for i in range(20)], [[20 + i] for i in range(20)])
    assert got.weight > 0 and got.mrr[got.weight] > got.mrr[0.0] + 0.3


def test_words_that_mislead_leave_the_dense_teacher_alone():
    rng, nrng = random.Random(1), np.random.default_rng(1)
    docs = _corpus(rng)
    queries = [" ".join(docs[30 + i].split()[:4]) for i in range(20)]  # words of a decoy, not the positive
    dvecs = _unit(nrng.normal(size=(len(docs), 16)))
    qvecs = _unit(dvecs[:20] + 0.05 * nrng.normal(size=(20, 16)))  # the dense teacher finds each positive
    got = hybrid_scores(docs, queries, qvecs, dvecs, [[i] for i in range(20)], [[30 + i] for i in range(20)])
    assert got.weight == 0.0 and got.mrr[0.0] == 1.0
    np.testing.assert_allclose([s[0] for s in got.picked], [dvecs[30 + i] @ qvecs[i] for i in range(20)], rtol=1e-6)


def test_scores_are_the_mix_for_each_document_asked_for():
    import bm25s

    rng, nrng = random.Random(2), np.random.default_rng(2)
    docs = _corpus(rng)
    queries = [" ".join(docs[i].split()[:3] + docs[40 + i].split()[:3]) for i in range(10)]
    dvecs = _unit(nrng.normal(size=(len(docs), 16)))
    qvecs = _unit(dvecs[:10] + 0.8 * nrng.normal(size=(10, 16)))
    picked = [[40 + i, 50, 3] for i in range(10)]
    got = hybrid_scores(docs, queries, qvecs, dvecs, [[i, 20 + i] for i in range(10)], picked)
    index = bm25_index(docs)
    w = got.weight
    for i, q in enumerate(queries):
        lexical = np.asarray(index.get_scores(bm25s.tokenize([q], stopwords="en", return_ids=False,
                                                             show_progress=False)[0]))
        mix = lambda d: (1 - w) * float(dvecs[d] @ qvecs[i]) + w * float(lexical[d] / lexical.max())  # noqa: E731
        np.testing.assert_allclose(got.positives[i], [mix(i), mix(20 + i)], rtol=1e-6)
        np.testing.assert_allclose(got.picked[i], [mix(d) for d in picked[i]], rtol=1e-6)


def test_a_query_bm25_cannot_read_does_not_win_it_the_weight():
    """Queries with no word of the corpus score every document 0 under BM25: that is a tie, not a
    positive ranked first, so it gives BM25 no weight where the dense teacher ranks well."""
    rng, nrng = random.Random(3), np.random.default_rng(3)
    docs = _corpus(rng)
    queries = ["zzz yyy"] * 20  # no word the corpus has
    dvecs = _unit(nrng.normal(size=(len(docs), 16)))
    qvecs = _unit(dvecs[:20] + 0.3 * nrng.normal(size=(20, 16)))
    got = hybrid_scores(docs, queries, qvecs, dvecs, [[i] for i in range(20)], [[] for _ in range(20)])
    assert got.weight == 0.0 and got.mrr[1.0] < 0.2
