"""SearchIndex: one full-precision copy of the documents (the caller's), exact scores from every kind."""

from __future__ import annotations

import faiss
import numpy as np
import pytest

from curate.negatives.search import SearchIndex


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _random(n_docs=3000, n_q=40, dim=32, seed=0):
    rng = np.random.default_rng(seed)
    return _unit(rng.standard_normal((n_q, dim))), _unit(rng.standard_normal((n_docs, dim)))


def _clustered(n_docs=4000, n_q=60, dim=32, clusters=40, seed=1):
    """Documents around a few centres and queries near documents, as real embeddings are."""
    rng = np.random.default_rng(seed)
    centres = _unit(rng.standard_normal((clusters, dim)))
    d = _unit(centres[rng.integers(0, clusters, n_docs)] + 0.15 * rng.standard_normal((n_docs, dim)))
    q = _unit(d[rng.integers(0, n_docs, n_q)] + 0.13 * rng.standard_normal((n_q, dim)))
    return q, d


def _brute(q, d, k):
    s = q @ d.T
    order = np.argsort(-s, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(s, order, axis=1), order


def _recall(ids, exact) -> float:
    k = exact.shape[1]
    return float(np.mean([len(set(a) & set(b)) / k for a, b in zip(ids.tolist(), exact.tolist())]))


def _assert_exact(q, d, scores, ids, k):
    """The brute-force top k: same scores, same ids except where two scores tie (BLAS and
    numpy round differently, so a near-tie may come out either way)."""
    want_s, want_i = _brute(q, d, k)
    np.testing.assert_allclose(scores, want_s, rtol=0, atol=1e-5)
    np.testing.assert_allclose(scores, np.einsum("qkd,qd->qk", d[ids], q), rtol=0, atol=1e-5)
    assert all(len(set(row)) == k for row in ids.tolist())
    gap = np.abs(np.diff(want_s, axis=1))
    tied = np.zeros(want_s.shape, bool)
    tied[:, 1:] |= gap < 1e-5
    tied[:, :-1] |= gap < 1e-5
    assert ((ids == want_i) | tied).all()


@pytest.mark.parametrize("k", [1, 10, 150, 2999, 3000, 5000])
def test_flat_is_exact_and_keeps_the_callers_array(k):
    q, d = _random()
    index = SearchIndex(d, "flat")
    assert index.vectors is d and index.cpu is None  # no FAISS-owned copy of the documents
    scores, ids = index.search(q, k)
    assert ids.shape == (len(q), min(k, len(d))) and ids.dtype == np.int64 and scores.dtype == np.float32
    _assert_exact(q, d, scores, ids, min(k, len(d)))


def test_other_dtypes_and_layouts_are_converted_once():
    q, d = _random(n_docs=500)
    as64 = d.astype(np.float64)
    index = SearchIndex(as64, "flat")
    assert index.vectors.dtype == np.float32 and index.vectors.flags.c_contiguous
    fortran = np.asfortranarray(d)
    _assert_exact(q, d, *SearchIndex(fortran).search(q, 7), 7)
    with pytest.raises(ValueError, match="2-d"):
        SearchIndex(d[0])


@pytest.mark.parametrize("kind,kw,bound", [("ivf", {"nprobe": 16}, 0.95), ("hnsw", {}, 0.95)])
def test_approximate_kinds_recall_and_report_exact_scores(kind, kw, bound):
    q, d = _clustered()
    k = 50
    index = SearchIndex(d, kind, **kw)
    assert np.shares_memory(index.vectors, d)
    store = index.cpu.storage if kind == "hnsw" else index.cpu
    assert faiss.downcast_index(store).code_size == d.shape[1]  # one byte a dimension: 8-bit codes only
    scores, ids = index.search(q, k)
    _, exact = _brute(q, d, k)
    recall = _recall(ids, exact)
    assert recall >= bound, recall
    assert (ids >= 0).all()
    true = np.einsum("qkd,qd->qk", d[ids], q)
    np.testing.assert_allclose(scores, true, rtol=0, atol=1e-5)  # true inner products, not code estimates
    assert (np.diff(scores, axis=1) <= 0).all()  # re-sorted by the exact scores


def test_ivf_codes_lose_no_recall_against_full_precision_lists():
    # the same coarse lists holding float32 vectors (the IndexIVFFlat this index replaces)
    q, d = _clustered(n_docs=6000)
    k = 100
    index = SearchIndex(d, "ivf", nprobe=4)
    full = faiss.IndexIVFFlat(index._quantizer, d.shape[1], index.nlist, faiss.METRIC_INNER_PRODUCT)
    full.add(d)
    full.nprobe = 4
    _, exact = _brute(q, d, k)
    ours = _recall(index.search(q, k)[1], exact)
    theirs = _recall(full.search(q, k)[1], exact)
    assert theirs < 0.99 and ours >= theirs - 0.002, (ours, theirs)


def test_ivf_visiting_every_list_finds_the_exact_top_k():
    q, d = _random(n_docs=2000)
    index = SearchIndex(d, "ivf", nlist=16, nprobe=16)
    scores, ids = index.search(q, 40)
    _assert_exact(q, d, scores, ids, 40)  # the codes' rounding is undone by the rescoring


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_searches_whose_candidates_cover_the_corpus_are_exact(kind):
    q, d = _random(n_docs=300)
    index = SearchIndex(d, kind, nlist=4, nprobe=1)  # one list of four: alone it would miss most
    for k in (160, 300):  # 2 x 160 candidates >= 300 documents
        scores, ids = index.search(q, k)
        _assert_exact(q, d, scores, ids, k)


def test_missing_candidates_come_back_as_minus_one():
    q, d = _random(n_docs=2000)
    index = SearchIndex(d, "ivf", nlist=32, nprobe=1, rescore=1.0)
    scores, ids = index.search(q, 900)  # one list of 32 holds far fewer than 900 documents
    missing = ids < 0
    assert missing.any() and np.isneginf(scores[missing]).all()
    assert np.isfinite(scores[~missing]).all()
    true = np.einsum("qkd,qd->qk", d[np.maximum(ids, 0)], q)
    np.testing.assert_allclose(scores[~missing], true[~missing], rtol=0, atol=1e-5)


def test_inner_products_by_id():
    q, d = _random(n_docs=100, n_q=3)
    index = SearchIndex(d)
    ids = np.array([[0, 5, -1], [99, 1, 2], [3, 3, 4]])
    got = index.inner_products(q, ids)
    want = np.einsum("qkd,qd->qk", d[np.maximum(ids, 0)], q)
    assert np.isneginf(got[0, 2])
    np.testing.assert_allclose(got[ids >= 0], want[ids >= 0], rtol=0, atol=1e-6)
    with pytest.raises(IndexError):
        index.inner_products(q, np.array([[100], [0], [0]]))


def test_describe():
    _, d = _random(n_docs=1000)
    assert SearchIndex(d, use_gpu=False).describe() == {"kind": "flat", "documents": 1000, "gpu": False}
    ivf = SearchIndex(d, "ivf", nprobe=8, use_gpu=False).describe()
    assert ivf["codes"] == "sq8" and ivf["nprobe"] == 8 and ivf["nlist"] == 25 and ivf["rescore"] == 2.0
