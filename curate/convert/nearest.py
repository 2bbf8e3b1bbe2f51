"""Each query's best pool documents by inner product, skipping the ones it may not use.

``pick_nearest`` first takes a FAISS top-``depth`` list (exact search) per query and keeps
the allowed hits in score order; a query that runs out of allowed hits inside that depth is
scored against the whole pool, so the result is the exact top-``k`` among allowed documents
however many were excluded.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from curate.negatives.search import top_k

Allowed = Callable[[int, int, float], bool]  # (query index, pool index, score) -> may use it


def pick_nearest(queries: np.ndarray, pool: np.ndarray, k: int, allowed: Allowed,
                 depth: int | None = None) -> list[list[tuple[int, float]]]:
    """Up to ``k`` (pool index, score) pairs per query, best first, all of them ``allowed``."""
    nq, nd = len(queries), len(pool)
    if k <= 0 or nd == 0:
        return [[] for _ in range(nq)]
    depth = min(nd, depth or 4 * k + 32)
    scores, indices = top_k(queries, pool, depth)
    out: list[list[tuple[int, float]]] = []
    for i in range(nq):
        picks: list[tuple[int, float]] = []
        for s, j in zip(scores[i], indices[i]):
            if j >= 0 and allowed(i, int(j), float(s)):
                picks.append((int(j), float(s)))
                if len(picks) == k:
                    break
        if len(picks) < k and depth < nd:  # too much excluded near the top: scan the whole pool
            row = pool @ queries[i]
            picks = []
            for j in np.argsort(-row, kind="stable"):
                if allowed(i, int(j), float(row[j])):
                    picks.append((int(j), float(row[j])))
                    if len(picks) == k:
                        break
        out.append(picks)
    return out
