"""Exact inner-product search and exact ranks, in query chunks (no full query x corpus matrix).

``top_k`` uses a FAISS ``IndexFlatIP`` (exact), on the GPU when FAISS sees one.
``rank_targets`` answers the question top-k lists cannot: where does *this* document
rank for this query, however deep it is.  It scores each query against every document
(one chunk of queries at a time) and counts the documents that score strictly higher.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_GPU_MAX_K = 2048  # FAISS GPU flat search caps k here; deeper searches run on the CPU


def _as_matrix(x: np.ndarray, name: str) -> np.ndarray:
    x = np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    if x.ndim != 2:
        raise ValueError(f"{name} must be a 2-d array, got shape {x.shape}")
    return x


_GPU_RES: list = []  # one StandardGpuResources for the process, alive as long as it is


def _gpu_resources():
    """FAISS indexes refuse extra attributes, so the GPU resources are held here instead."""
    import faiss

    if not _GPU_RES:
        _GPU_RES.append(faiss.StandardGpuResources())
    return _GPU_RES[0]


def _gpu_count() -> int:
    import faiss

    try:
        return int(faiss.get_num_gpus()) if hasattr(faiss, "get_num_gpus") else 0
    except Exception:  # a CPU build may lack the GPU runtime entirely
        return 0


def _flat_index(docs: np.ndarray, k: int):
    import faiss

    index = faiss.IndexFlatIP(docs.shape[1])
    if k <= _GPU_MAX_K and _gpu_count() > 0:
        index = faiss.index_cpu_to_gpu(_gpu_resources(), 0, index)
    index.add(docs)
    return index


def top_k(queries: np.ndarray, docs: np.ndarray, k: int,
          chunk: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """Each query's ``k`` best documents by inner product, best first.

    Returns ``(scores, indices)``, float32 and int64 arrays of shape (n_queries, k'), where
    k' = min(k, n_docs).  With L2-normalised inputs the scores are cosine similarities.
    """
    queries = _as_matrix(queries, "queries")
    docs = _as_matrix(docs, "docs")
    if queries.shape[1] != docs.shape[1] and len(docs) and len(queries):
        raise ValueError(f"queries are {queries.shape[1]}-d but docs are {docs.shape[1]}-d")
    k = max(0, min(int(k), len(docs)))
    nq = len(queries)
    scores = np.empty((nq, k), dtype=np.float32)
    indices = np.empty((nq, k), dtype=np.int64)
    if k == 0 or nq == 0:
        return scores, indices
    index = _flat_index(docs, k)
    step = max(1, int(chunk))
    for i in range(0, nq, step):
        s, ix = index.search(queries[i:i + step], k)
        scores[i:i + step] = s
        indices[i:i + step] = ix
    return scores, indices


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
