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

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from curate.core.executor import Executor, WorkerPool, split
from curate.negatives.search import SearchIndex


@dataclass(frozen=True)
class _ShardSearcher:
    """Builds, in a worker, the index of one shard; answers ``(queries, k)`` with global ids."""

    vectors: np.ndarray | Callable[[], np.ndarray]  # or what makes them, in the worker
    offset: int
    kind: str
    options: dict

    def __call__(self):
        vectors = self.vectors() if callable(self.vectors) else self.vectors
        index = SearchIndex(vectors, self.kind, **self.options)

        def search(job):
            queries, k = job
            scores, ids = index.nearest(queries, k)
            return scores, np.where(ids >= 0, ids + self.offset, -1)

        return search


def build_index(vecs, kind: str, executor=None, **options):
    """One index here, or, with an executor of several shards (``--executor ray``), one shard of
    ``vecs`` per worker when each gets at least two rows: how mining and ``semantic_dedup`` both
    search."""
    if executor is not None and executor.shards > 1 and len(vecs) >= 2 * executor.shards:
        return ShardedIndex(vecs, kind, executor, **options)
    return SearchIndex(vecs, kind, **options)


class ShardedIndex:
    def __init__(self, vectors: np.ndarray | None, kind: str, executor: Executor,
                 shard_makers: Sequence[tuple[Callable[[], np.ndarray], int]] = (), **options):
        """Over ``vectors`` cut in ``executor.shards`` slices; or, with ``vectors`` None, over
        shards each worker makes itself (``shard_makers``: (make its vectors, their count)), so
        the driver never holds the corpus (then no search may reach the whole corpus)."""
        self.kind = kind
        if vectors is not None:
            self.vectors = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))
            rows = split(range(len(self.vectors)), executor.shards)
            shard_makers = [(self.vectors[r[0]:r[-1] + 1], len(r)) for r in rows]
            self._whole = SearchIndex(self.vectors, "flat", use_gpu=False)  # no index built: brute force on demand
        else:
            self.vectors, self._whole = None, None
        self.shards = [size for _, size in shard_makers]
        self.ntotal = sum(self.shards)
        offsets = np.cumsum([0, *self.shards])[:-1].tolist()
        self._pool = WorkerPool([_ShardSearcher(v, off, kind, options) for (v, _), off in zip(shard_makers, offsets)],
                                executor)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, indices), each (n_queries, min(k, ntotal)), best first."""
        q = np.ascontiguousarray(np.asarray(queries, dtype=np.float32))
        k = max(0, min(int(k), self.ntotal))
        if k == 0 or len(q) == 0:
            return np.zeros((len(q), k), np.float32), np.zeros((len(q), k), np.int64)
        if k >= self.ntotal:
            if self._whole is None:
                raise ValueError("a search of the whole corpus needs the vectors in the driver")
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
