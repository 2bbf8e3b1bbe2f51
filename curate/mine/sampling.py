"""Choosing k negatives among a query's valid candidates (best first).

=============  ===========================================================================
``top``        the first k
``uniform``    k drawn uniformly, without replacement, from the first ``pool`` valid ones
``softmax``    k drawn without replacement from the first ``pool``, each with probability
               proportional to ``exp(score / temperature)`` (NV-Retriever's footnote 13)
``top1+``      the best one, then k - 1 drawn as in ``softmax`` from the rest of the pool
=============  ===========================================================================

Draws without replacement with softmax weights use the Gumbel-top-k trick (add Gumbel noise
to ``score / temperature`` and keep the k largest), which samples exactly that sequential
scheme and never underflows.  Every query has its own generator, seeded from the run's seed
and the query's key, so results do not depend on the order or the batching of queries and
no global random state is touched.  The chosen candidates are returned best first.
"""

from __future__ import annotations

import hashlib

import numpy as np

from curate.core.errors import CurateError

STRATEGIES = ("top", "uniform", "softmax", "top1+")


def query_rng(seed: int, key: str) -> np.random.Generator:
    """A generator owned by one query: the same (seed, key) always gives the same draws."""
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()
    return np.random.default_rng([int(seed) & 0xFFFFFFFFFFFFFFFF, int.from_bytes(digest[:8], "big")])


def needed(strategy: str, k: int, pool: int) -> int:
    """How many valid candidates a query needs before the strategy has its full choice."""
    return k if strategy == "top" else max(k, pool)


def _gumbel_top(scores: np.ndarray, n: int, temperature: float, rng: np.random.Generator) -> np.ndarray:
    keys = np.asarray(scores, dtype=np.float64) / temperature + rng.gumbel(size=len(scores))
    return np.argsort(-keys, kind="stable")[:n]


def choose(scores, k: int, strategy: str = "top", pool: int = 10, temperature: float = 0.05,
           rng: np.random.Generator | None = None) -> np.ndarray:
    """Positions (into ``scores``, which is sorted best first) of the chosen negatives, ascending."""
    if strategy not in STRATEGIES:
        raise CurateError(f"unknown sampling {strategy!r} (choose from {', '.join(STRATEGIES)})")
    scores = np.asarray(scores, dtype=np.float64)
    n = len(scores)
    k = max(0, int(k))
    if strategy == "top" or n == 0:
        return np.arange(min(k, n))
    if rng is None:
        raise ValueError("sampling needs a generator (see query_rng)")
    size = min(n, max(int(pool), 1))
    if size <= k:  # nothing to choose between: take the whole pool
        return np.arange(size)
    if temperature <= 0:
        raise CurateError("--temperature must be above 0")
    if strategy == "uniform":
        picked = rng.choice(size, size=k, replace=False)
    elif strategy == "softmax":
        picked = _gumbel_top(scores[:size], k, temperature, rng)
    else:  # top1+
        rest = _gumbel_top(scores[1:size], k - 1, temperature, rng) + 1
        picked = np.concatenate([[0], rest])
    return np.sort(picked.astype(np.int64))
