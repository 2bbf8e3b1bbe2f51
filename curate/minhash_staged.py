"""MinHash near-duplicate groups in stages on Ray, for more texts than one process should hold.

The same signatures, bands, verification and groups as ``curate.minhash`` (its numpy banding),
cut so that no process holds every signature:

1. **signatures, a map**: the texts in contiguous shards, one task each; each shard's
   signatures stay in Ray's object store (shared memory, read without copies).
2. **band buckets, grouped by key**: one task per group of bands reads that band's columns of
   every shard, sorts the keys and pairs equal neighbours (``minhash.band_pairs``).
3. **verification**: the candidate pairs in chunks; a task estimates each pair's Jaccard under
   every check and keeps the pairs that clear all of them.
4. **connected components** over the verified pairs in the driver (``union_find_groups``),
   and the signature rows of the groups' members fetched for resolving them.

``checks``: (texts, ngram, threshold) per signature set; candidates come from the first set's
bands, and a pair is similar when it clears every check (the ``task`` pass: similar queries
whose tasks are similar too).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from curate.core.executor import Executor, _ray, _remote, split
from curate.minhash import (MAX_BUCKET, band_keys, band_pairs, is_empty, lsh_params, signatures,
                            union_find_groups)


@dataclass
class StagedGroups:
    groups: list[list[int]]  # near-duplicate groups (global row numbers), as union_find_groups gives
    rows: np.ndarray  # the rows of every group member, sorted
    sigs: list[np.ndarray]  # per check, the signatures of ``rows`` (row k of each is rows[k])
    candidates: int  # pairs the bands proposed


def _signatures(texts_per_check, num_perm: int, ngrams: Sequence[int], seed: int, bands: int,
                rows: int) -> tuple[list[np.ndarray], np.ndarray]:
    """A shard's signatures (one array per check) and its band keys for the first check, one
    contiguous row per band (-1 where a text has no words), so a band's task reads only its row."""
    sigs = [signatures(t, num_perm=num_perm, ngram=g, seed=seed, workers=1) for t, g in zip(texts_per_check, ngrams)]
    keys = np.empty((bands, len(sigs[0])), np.uint64)
    empty = is_empty(sigs[0])
    for band in range(bands):
        keys[band] = band_keys(sigs[0], band * rows, (band + 1) * rows)
    return sigs, np.where(empty, np.uint64(0), keys), empty


def _bands(refs, offsets: list[int], n: int, bands: Sequence[int], max_bucket: int) -> np.ndarray:
    """Candidate pair codes from these bands of the first check."""
    shards = _shards(refs)
    found = []
    for band in bands:
        keys, ids = [], []
        for (_, key, empty), off in zip(shards, offsets):
            valid = np.flatnonzero(~empty)
            keys.append(key[band][valid])
            ids.append(valid + off)
        found += band_pairs(np.concatenate(keys), np.concatenate(ids), n, max_bucket)
    return np.unique(np.concatenate(found)) if found else np.empty(0, np.int64)


def _rows_of(shards: list[list[np.ndarray]], offsets: np.ndarray, check: int, rows: np.ndarray) -> np.ndarray:
    which = np.searchsorted(offsets, rows, side="right") - 1
    out = np.empty((len(rows), shards[0][0][check].shape[1]), np.uint32)
    for s in np.unique(which):
        here = which == s
        out[here] = shards[s][0][check][rows[here] - offsets[s]]
    return out


def _verify(refs, offsets: np.ndarray, codes: np.ndarray, n: int,
            thresholds: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """The pairs (codes) that clear every check, with their first check's similarity."""
    shards = _shards(refs)
    i, j = codes // n, codes % n
    keep = np.ones(len(codes), bool)
    first = None
    for c, thr in enumerate(thresholds):
        sim = np.count_nonzero(_rows_of(shards, offsets, c, i) == _rows_of(shards, offsets, c, j), axis=1)
        sim = sim / shards[0][0][c].shape[1]
        first = sim if first is None else first
        keep &= sim >= thr
    return codes[keep], first[keep]


SHARD_TEXTS = 500_000  # texts a map task signs at most: its memory (texts, signatures, keys) stays near 0.5 GB


def staged_groups(checks: Sequence[tuple[Sequence[str], int, float]], executor: Executor, num_perm: int = 128,
                  seed: int = 1, max_bucket: int = MAX_BUCKET, pair_chunk: int = 1_000_000) -> StagedGroups:
    ray = _ray(executor)
    n = len(checks[0][0])
    parts = split(range(n), max(executor.shards, -(-n // SHARD_TEXTS)))
    offsets = np.asarray([p[0] for p in parts], np.int64)
    ngrams = [g for _, g, _ in checks]
    bands, rows = lsh_params(float(checks[0][2]), num_perm)
    sign = _remote(ray, _signatures, executor)
    shard_refs = [sign.remote([list(t[p[0]:p[-1] + 1]) for t, _, _ in checks], num_perm, ngrams, seed, bands, rows)
                  for p in parts]
    group = _remote(ray, _bands, executor)
    band_sets = [b for b in split(range(bands), executor.shards) if b]
    candidate_refs = [group.remote(shard_refs, offsets.tolist(), n, list(b), max_bucket) for b in band_sets]
    codes = [ray.get(r) for r in candidate_refs]
    codes = np.unique(np.concatenate(codes)) if codes else np.empty(0, np.int64)
    verify = _remote(ray, _verify, executor)
    thresholds = [float(t) for _, _, t in checks]
    done = ray.get([verify.remote(shard_refs, offsets, codes[a:a + pair_chunk], n, thresholds)
                    for a in range(0, len(codes), pair_chunk)])
    kept = np.concatenate([c for c, _ in done]) if done else np.empty(0, np.int64)
    groups = union_find_groups(kept // n, kept % n)
    members = np.asarray(sorted({m for g in groups for m in g}), np.int64)
    fetch = _remote(ray, _fetch_rows, executor)
    sigs = ray.get([fetch.remote(shard_refs, offsets, c, members) for c in range(len(checks))])
    return StagedGroups(groups, members, sigs, len(codes))


def _fetch_rows(refs, offsets, check, rows):
    return _rows_of(_shards(refs), offsets, check, rows)


def _shards(refs) -> list[list[np.ndarray]]:
    """The shards' signatures in a task: refs nested in a list reach it unresolved, and are read
    here, zero-copy, from shared memory."""
    import ray

    return ray.get(list(refs))
