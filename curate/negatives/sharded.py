"""Search a corpus cut into shards, one per Ray worker: for a corpus no single index holds.

Each worker builds a ``SearchIndex`` over its own contiguous slice of the document vectors
(flat, ivf or hnsw, as asked) and answers every query with its slice's top k. The driver
merges the shards' lists by score (ties by document order, as one flat index breaks them) and
keeps the top k, so over flat shards the result is exactly one flat index's. The miner's own
loop does the rest unchanged: thresholds and sampling on the merged candidates, and a query
whose candidates run out asks again, deeper, on its own.

A worker's memory is its shard (vectors, plus an index's codes). A search as deep as the whole
corpus is answered in the driver from the matrix it already holds (the miner needs it for the
positives), as ``SearchIndex`` answers it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from curate.core.executor import Executor, WorkerPool, split
from curate.negatives.search import SearchIndex


@dataclass(frozen=True)
class _ShardSearcher:
    """Builds, in a worker, the index of one shard; answers ``(queries, k)`` with global ids."""

    vectors: np.ndarray
    offset: int
    kind: str
    options: dict

    def __call__(self):
        index = SearchIndex(self.vectors, self.kind, **self.options)

        def search(job):
            queries, k = job
            scores, ids = index.nearest(queries, k)
            return scores, np.where(ids >= 0, ids + self.offset, -1)

        return search


class ShardedIndex:
    def __init__(self, vectors: np.ndarray, kind: str, executor: Executor, **options):
        self.vectors = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))
        self.ntotal, self.dim = self.vectors.shape
        self.kind = kind
        rows = split(range(self.ntotal), executor.shards)
        self.shards = [len(r) for r in rows]
        makers = [_ShardSearcher(self.vectors[r[0]:r[-1] + 1], r[0], kind, options) for r in rows]
        self._pool = WorkerPool(makers, executor)
        self._whole = SearchIndex(self.vectors, "flat", use_gpu=False)  # no index built: brute force on demand

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, indices), each (n_queries, min(k, ntotal)), best first."""
        q = np.ascontiguousarray(np.asarray(queries, dtype=np.float32))
        k = max(0, min(int(k), self.ntotal))
        if k == 0 or len(q) == 0 or k >= self.ntotal:
            return self._whole.search(q, k)
        parts = self._pool.map([(q, k)] * self._pool.size)
        scores = np.concatenate([s for s, _ in parts], axis=1)
        ids = np.concatenate([i for _, i in parts], axis=1)
        order = np.lexsort((np.where(ids < 0, self.ntotal, ids), -scores), axis=1)[:, :k]
        return (np.ascontiguousarray(np.take_along_axis(scores, order, axis=1)),
                np.ascontiguousarray(np.take_along_axis(ids, order, axis=1)))

    def describe(self) -> dict:
        return {"kind": self.kind, "documents": self.ntotal, "gpu": False, "shards": self.shards}

    def close(self) -> None:
        self._pool.close()
