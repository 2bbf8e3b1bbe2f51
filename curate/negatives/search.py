"""Nearest-neighbour search, the one implementation every stage uses: mine's index, the
teacher's top-k lists and exact ranks (filter), convert's nearest examples, evaluation.

``SearchIndex`` searches one teacher's document vectors, held once at full precision.

The caller's float32 matrix is the only full-precision copy of the documents (it is used
as is when it is already float32 and C-contiguous); the miner needs it anyway for the
positives' scores, and at 1M x 384 a second copy would cost another 1.5 GB.

``flat`` is exact: brute force over that matrix in blocks (``faiss.knn``), no index of its
own.  ``ivf`` (``IndexIVFScalarQuantizer``, ``nprobe`` lists visited) and ``hnsw``
(``IndexHNSWSQ``) are approximate and keep only 8-bit codes (a quarter of the matrix).
They propose ``rescore`` x k candidates, which are scored exactly against the matrix and
re-sorted, so every reported score is a true inner product and only the choice of
candidates is approximate (the over-fetch keeps the codes' rounding from costing recall).
A search as deep as the whole corpus, or whose candidates would cover it, is always exact:
every document is scored and sorted, whatever the index.  On a GPU that FAISS sees,
``flat`` keeps a GPU-resident copy and ``ivf`` a GPU copy of its codes (up to FAISS's GPU
limit of 2048 results a query; deeper searches run on the CPU).  Missing results (an
approximate index that found fewer than k) come back as index -1 and score -inf.
"""

from __future__ import annotations

import math

import numpy as np

from curate.core.errors import CurateError

INDEX_KINDS = ("flat", "ivf", "hnsw")
_GPU_MAX_K = 2048
_BLOCK_CELLS = 1 << 21  # candidates fetched and rescored at once (ids + scores: about 24 MB)
_SQ_SAMPLE = 1 << 16  # rows the hnsw codes' value ranges are learned from


def _gpu_count() -> int:
    import faiss

    try:
        return int(faiss.get_num_gpus()) if hasattr(faiss, "get_num_gpus") else 0
    except Exception:  # a CPU build may lack the GPU runtime entirely
        return 0


class SearchIndex:
    def __init__(self, vectors: np.ndarray, kind: str = "flat", nlist: int | None = None,
                 nprobe: int = 16, ef_search: int = 128, hnsw_m: int = 32, use_gpu: bool | None = None,
                 rescore: float = 2.0):
        import faiss

        if kind not in INDEX_KINDS:
            raise CurateError(f"unknown index {kind!r} (choose from {', '.join(INDEX_KINDS)})")
        vecs = np.asarray(vectors, dtype=np.float32)
        if vecs.ndim != 2:
            raise ValueError(f"document vectors must be a 2-d array, got shape {vecs.shape}")
        self.vectors = np.ascontiguousarray(vecs)  # the caller's array itself when it is float32 C-order
        self.kind = kind
        self.ntotal, self.dim = self.vectors.shape
        self.ef_search = int(ef_search)
        self.rescore = max(1.0, float(rescore))
        self.gpu = False
        self.cpu = None  # the FAISS index of 8-bit codes (ivf, hnsw); flat needs none
        if kind == "ivf":
            self.cpu = self._build_ivf(faiss, nlist, nprobe)
        elif kind == "hnsw":
            self.cpu = self._build_hnsw(faiss, int(hnsw_m))
        self.device_index = None
        want_gpu = _gpu_count() > 0 if use_gpu is None else use_gpu
        if want_gpu and kind in ("flat", "ivf"):
            try:
                self._gpu_res = faiss.StandardGpuResources()  # alive as long as the index
                if kind == "flat":  # built on the device directly: no CPU index in between
                    self.device_index = faiss.GpuIndexFlatIP(self._gpu_res, self.dim)
                    _add_in_blocks(self.device_index, self.vectors)
                else:
                    self.device_index = faiss.index_cpu_to_gpu(self._gpu_res, 0, self.cpu)
                self.gpu = True
            except Exception:  # a build without GPU support: stay on the CPU
                self.device_index = None

    # -- building -----------------------------------------------------------------------

    def _sample(self, rows: int) -> np.ndarray:
        """A fixed random subset for training (a temporary copy; the whole matrix when small)."""
        if self.ntotal <= rows:
            return self.vectors
        pick = np.random.default_rng(0).choice(self.ntotal, rows, replace=False)
        return self.vectors[np.sort(pick)]

    def _build_ivf(self, faiss, nlist: int | None, nprobe: int):
        n = max(1, self.ntotal)
        # 4*sqrt(n) lists, capped at 1024: beyond that k-means training (256 points a list)
        # costs more than it saves on a CPU (1M docs: 4,000 lists would out-cost exact search)
        self.nlist = int(nlist or max(1, min(int(4 * math.sqrt(n)), n // 39, 1024)))
        self._quantizer = faiss.IndexFlatIP(self.dim)  # the index does not own it: keep it alive
        # codes of the vectors themselves, not of residuals: training then needs no second
        # sample-sized array, and the exact rescoring repairs the coarser rounding
        index = faiss.IndexIVFScalarQuantizer(self._quantizer, self.dim, self.nlist,
                                              faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT, False)
        index.train(self._sample(256 * self.nlist))  # a fixed sample: training cost does not grow with n
        index.nprobe = max(1, min(int(nprobe), self.nlist))
        _add_in_blocks(index, self.vectors)
        return index

    def _build_hnsw(self, faiss, m: int):
        index = faiss.IndexHNSWSQ(self.dim, faiss.ScalarQuantizer.QT_8bit, m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = max(40, 2 * m)
        index.train(self._sample(_SQ_SAMPLE))  # learns each dimension's value range
        _add_in_blocks(index, self.vectors)
        return index

    # -- searching ----------------------------------------------------------------------

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, indices), each (n_queries, min(k, ntotal)), best first."""
        q = np.ascontiguousarray(np.asarray(queries, dtype=np.float32))
        k = max(0, min(int(k), self.ntotal))
        if k == 0 or len(q) == 0:
            return np.zeros((len(q), k), np.float32), np.zeros((len(q), k), np.int64)
        if k >= self.ntotal:
            return self.exhaustive(q)
        if self.kind == "flat":
            return self._exact(q, k)
        fetch = min(self.ntotal, max(k + 1, math.ceil(self.rescore * k)))
        if fetch >= self.ntotal:  # the candidates would be every document: score them all
            s, i = self.exhaustive(q)
            return np.ascontiguousarray(s[:, :k]), np.ascontiguousarray(i[:, :k])
        return self._rescored(q, k, fetch)

    def nearest(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """``search``, but a flat index scores with FAISS even as deep as all its documents: a
        shard's part of a larger search must round its scores as the whole index would."""
        q = np.ascontiguousarray(np.asarray(queries, dtype=np.float32))
        k = max(0, min(int(k), self.ntotal))
        if self.kind != "flat" or k == 0 or len(q) == 0:
            return self.search(q, k)
        return self._exact(q, k)

    def _exact(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        import faiss

        if self.device_index is not None and k <= _GPU_MAX_K:
            scores, ids = self.device_index.search(q, k)
        else:  # blocked brute force over the caller's matrix, nothing copied
            scores, ids = faiss.knn(q, self.vectors, k, faiss.METRIC_INNER_PRODUCT)
        return np.asarray(scores, dtype=np.float32), np.asarray(ids, dtype=np.int64)

    def _rescored(self, q: np.ndarray, k: int, fetch: int) -> tuple[np.ndarray, np.ndarray]:
        """The approximate index's ``fetch`` candidates, rescored exactly; the best ``k`` kept."""
        if self.kind == "hnsw":
            self.cpu.hnsw.efSearch = max(self.ef_search, fetch)
        index = self.device_index if self.device_index is not None and fetch <= _GPU_MAX_K else self.cpu
        scores = np.empty((len(q), k), np.float32)
        ids = np.empty((len(q), k), np.int64)
        step = max(1, _BLOCK_CELLS // fetch)
        for a in range(0, len(q), step):
            block = q[a:a + step]
            _, cand = index.search(block, fetch)
            cand = np.ascontiguousarray(cand, dtype=np.int64)
            exact = self.inner_products(block, cand)
            order = np.argsort(-exact, axis=1, kind="stable")[:, :k]
            scores[a:a + step] = np.take_along_axis(exact, order, axis=1)
            ids[a:a + step] = np.take_along_axis(cand, order, axis=1)
        return scores, ids

    def inner_products(self, q: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """``q[i] . vectors[ids[i, j]]`` for every (i, j) without gathering the rows; -inf where ids < 0."""
        import faiss

        q = np.ascontiguousarray(q, dtype=np.float32)
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        if ids.shape[0] != len(q) or (ids.size and int(ids.max()) >= self.ntotal):
            raise IndexError("candidate ids do not match the queries or the documents")
        out = np.empty(ids.shape, np.float32)
        if ids.size:
            faiss.fvec_inner_products_by_idx(faiss.swig_ptr(out), faiss.swig_ptr(q), faiss.swig_ptr(self.vectors),
                                             faiss.swig_ptr(ids), self.dim, len(q), ids.shape[1])
        out[ids < 0] = -np.inf
        return out

    def exhaustive(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every document, sorted (ties by document order)."""
        s = q @ self.vectors.T
        order = np.argsort(-s, axis=1, kind="stable")
        return np.take_along_axis(s, order, axis=1).astype(np.float32), order.astype(np.int64)

    def describe(self) -> dict:
        d = {"kind": self.kind, "documents": self.ntotal, "gpu": self.gpu}
        if self.kind == "ivf":
            d.update(nlist=self.nlist, nprobe=int(self.cpu.nprobe))
        if self.kind == "hnsw":
            d.update(ef_search=self.ef_search)
        if self.kind != "flat":
            d.update(codes="sq8", rescore=self.rescore)
        return d


def _add_in_blocks(index, vectors: np.ndarray, rows: int = 65536) -> None:
    """Adds row blocks (views), so FAISS's per-call temporaries stay small."""
    for a in range(0, len(vectors), rows):
        index.add(vectors[a:a + rows])


def _as_matrix(x: np.ndarray, name: str) -> np.ndarray:
    x = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    if x.ndim != 2:
        raise ValueError(f"{name} must be a 2-d array, got shape {x.shape}")
    return x


def top_k(queries: np.ndarray, docs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each query's ``k`` best documents by inner product, best first (exact).

    Returns ``(scores, indices)``, float32 and int64 arrays of shape (n_queries, k'), where
    k' = min(k, n_docs).  With L2-normalised inputs the scores are cosine similarities.
    """
    queries = _as_matrix(queries, "queries")
    docs = _as_matrix(docs, "docs")
    if queries.shape[1] != docs.shape[1] and len(docs) and len(queries):
        raise ValueError(f"queries are {queries.shape[1]}-d but docs are {docs.shape[1]}-d")
    k = max(0, min(int(k), len(docs)))
    if k == 0 or len(queries) == 0:
        return np.empty((len(queries), k), np.float32), np.empty((len(queries), k), np.int64)
    return SearchIndex(docs, "flat").search(queries, k)


def _torch_cuda():
    try:
        import torch

        return torch if torch.cuda.is_available() else None
    except Exception:
        return None


def rank_targets(queries: np.ndarray, docs: np.ndarray, targets: Sequence[Sequence[int]],
                 exclude: Sequence[int | None] | None = None,
                 max_cells: int = 25_000_000) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Exact scores and 1-based ranks of chosen documents for each query.

    ``targets[i]`` lists document indices for query ``i``.  The rank of a target is 1 plus
    the number of documents scoring strictly higher for that query (ties share a rank).
    ``exclude[i]``, when given, is a document left out of the count for query ``i`` (e.g.
    the query's own text sitting in the pool); it is still scored if it is a target.
    Scores and ranks come from the same score row, so they always agree.  Queries are
    scored ``max_cells // n_docs`` at a time (on a CUDA GPU through torch when present).
    """
    queries = _as_matrix(queries, "queries")
    docs = _as_matrix(docs, "docs")
    nq, nd = len(queries), len(docs)
    if len(targets) != nq:
        raise ValueError("rank_targets needs one target list per query")
    width = max((len(t) for t in targets), default=0)
    out_scores = [np.empty(0, dtype=np.float32) for _ in range(nq)]
    out_ranks = [np.empty(0, dtype=np.int64) for _ in range(nq)]
    if nq == 0 or nd == 0 or width == 0:
        return out_scores, out_ranks
    tmat = np.zeros((nq, width), dtype=np.int64)
    for i, t in enumerate(targets):
        tmat[i, :len(t)] = t
        if len(t) and (min(t) < 0 or max(t) >= nd):
            raise IndexError(f"target index out of range for query {i}")
    excl = np.array([-1 if exclude is None or exclude[i] is None else int(exclude[i])
                     for i in range(nq)], dtype=np.int64)
    step = max(1, int(max_cells) // nd)
    torch = _torch_cuda()
    docs_dev = torch.from_numpy(docs).cuda() if torch is not None else None
    for a in range(0, nq, step):
        b = min(nq, a + step)
        rows = np.arange(b - a)
        if torch is not None:
            s_dev = torch.from_numpy(queries[a:b]).cuda() @ docs_dev.T
            t_dev = torch.from_numpy(tmat[a:b]).cuda()
            tscore = torch.gather(s_dev, 1, t_dev)
            ex = torch.from_numpy(excl[a:b]).cuda()
            has = ex >= 0
            if bool(has.any()):
                r = torch.nonzero(has).squeeze(1)
                s_dev[r, ex[r]] = float("-inf")
            counts = torch.stack([(s_dev > tscore[:, j:j + 1]).sum(1) for j in range(width)], 1)
            tscore, counts = tscore.cpu().numpy(), counts.cpu().numpy()
        else:
            s = queries[a:b] @ docs.T
            tscore = s[rows[:, None], tmat[a:b]]
            ex = excl[a:b]
            has = ex >= 0
            s[rows[has], ex[has]] = -np.inf
            counts = np.stack([(s > tscore[:, j:j + 1]).sum(1) for j in range(width)], 1)
        for r in rows:
            n = len(targets[a + r])
            out_scores[a + r] = tscore[r, :n].astype(np.float32)
            out_ranks[a + r] = counts[r, :n].astype(np.int64) + 1
    return out_scores, out_ranks
