"""Inner-product search over one teacher's document vectors.

``flat`` is exact (FAISS ``IndexFlatIP``).  ``ivf`` (``IndexIVFFlat``, ``nprobe`` lists
visited) and ``hnsw`` (``IndexHNSWFlat``, ``efSearch`` raised to at least k) are approximate,
for corpora where exact search costs too much.  A search as deep as the whole corpus is
always exact: every document is scored and sorted, whatever the index.  Flat and IVF indexes
move to the GPU when FAISS sees one (up to FAISS's GPU limit of k = 2048; deeper searches run
on the CPU copy).  Missing results (an approximate index that found fewer than k) come back
as index -1 and score -inf.
"""

from __future__ import annotations

import math

import numpy as np

from curate.embed.search import _gpu_count
from curate.errors import CurateError

INDEX_KINDS = ("flat", "ivf", "hnsw")
_GPU_MAX_K = 2048


class SearchIndex:
    def __init__(self, vectors: np.ndarray, kind: str = "flat", nlist: int | None = None,
                 nprobe: int = 16, ef_search: int = 128, hnsw_m: int = 32, use_gpu: bool | None = None):
        import faiss

        if kind not in INDEX_KINDS:
            raise CurateError(f"unknown index {kind!r} (choose from {', '.join(INDEX_KINDS)})")
        self.vectors = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))
        self.kind = kind
        self.ntotal, dim = self.vectors.shape
        self.ef_search = int(ef_search)
        self.gpu = False
        if kind == "flat":
            cpu = faiss.IndexFlatIP(dim)
        elif kind == "ivf":
            n = max(1, self.ntotal)
            # 4*sqrt(n) lists, capped at 1024: beyond that k-means training (256 points a list)
            # costs more than it saves on a CPU (1M docs: 4,000 lists would out-cost exact search)
            self.nlist = int(nlist or max(1, min(int(4 * math.sqrt(n)), n // 39, 1024)))
            quantizer = faiss.IndexFlatIP(dim)
            cpu = faiss.IndexIVFFlat(quantizer, dim, self.nlist, faiss.METRIC_INNER_PRODUCT)
            self._quantizer = quantizer  # the index does not own its quantizer: keep it alive
            train = self.vectors
            if len(train) > 256 * self.nlist:  # a fixed sample: training cost does not grow with n
                pick = np.random.default_rng(0).choice(len(train), 256 * self.nlist, replace=False)
                train = self.vectors[np.sort(pick)]
            cpu.train(train)
            cpu.nprobe = max(1, min(int(nprobe), self.nlist))
        else:
            cpu = faiss.IndexHNSWFlat(dim, int(hnsw_m), faiss.METRIC_INNER_PRODUCT)
            cpu.hnsw.efConstruction = max(40, 2 * int(hnsw_m))
        cpu.add(self.vectors)
        self.cpu = cpu
        self.device_index = None
        want_gpu = _gpu_count() > 0 if use_gpu is None else use_gpu
        if want_gpu and kind in ("flat", "ivf"):
            try:
                self._gpu_res = faiss.StandardGpuResources()  # alive as long as the index
                self.device_index = faiss.index_cpu_to_gpu(self._gpu_res, 0, cpu)
                self.gpu = True
            except Exception:  # a build without GPU support: stay on the CPU
                self.device_index = None

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, indices), each (n_queries, min(k, ntotal)), best first."""
        q = np.ascontiguousarray(np.asarray(queries, dtype=np.float32))
        k = max(0, min(int(k), self.ntotal))
        if k == 0 or len(q) == 0:
            return np.zeros((len(q), k), np.float32), np.zeros((len(q), k), np.int64)
        if k >= self.ntotal:
            return self.exhaustive(q)
        if self.kind == "hnsw":
            self.cpu.hnsw.efSearch = max(self.ef_search, k)
        index = self.device_index if self.device_index is not None and k <= _GPU_MAX_K else self.cpu
        scores, ids = index.search(q, k)
        scores = np.asarray(scores, dtype=np.float32)
        ids = np.asarray(ids, dtype=np.int64)
        scores[ids < 0] = -np.inf
        return scores, ids

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
        return d
