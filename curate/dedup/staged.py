"""MinHash near-duplicate groups in stages on Ray, for more texts than one process should hold.

The same signatures, bands, verification and groups as ``curate.dedup.minhash`` (its numpy banding),
cut so that no process holds every signature:

1. **signatures, a map**: the texts in contiguous shards, one task each; each shard's
   signatures stay in Ray's object store (shared memory, read without copies).
2. **band buckets, grouped by key**: one task per group of bands reads that band's columns of
   every shard, sorts the keys and pairs equal neighbours (``minhash.band_pairs``).
3. **verification**: the candidate pairs by the pair of shards they fall in; a task reads those
   two shards' signatures only, estimates each pair's Jaccard under every check and keeps the
   pairs that clear all of them.
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

from curate.core.executor import Executor, ray_for, remote, split
from curate.dedup.minhash import (MAX_BUCKET, band_keys, band_pairs, is_empty, lsh_params, signatures,
                            union_find_groups)


@dataclass
class StagedGroups:
    groups: list[list[int]]  # near-duplicate groups (global row numbers), as union_find_groups gives
    rows: np.ndarray  # the rows of every group member, sorted
    sigs: list[np.ndarray]  # per check, the signatures of ``rows`` (row k of each is rows[k])
    candidates: int  # pairs the bands proposed


def _signatures(texts_per_check, num_perm: int, ngrams: Sequence[int], seed: int, bands: int,
                rows: int) -> tuple[list[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """A shard's signatures (one array per check), and apart from them its band keys for the
    first check, one contiguous row a band, with which texts have no words: a band's task then
    reads only keys, and a verifying task only the signatures of the shards it compares."""
    sigs = [signatures(t, num_perm=num_perm, ngram=g, seed=seed, workers=1) for t, g in zip(texts_per_check, ngrams)]
    keys = np.empty((bands, len(sigs[0])), np.uint64)
    for band in range(bands):
        keys[band] = band_keys(sigs[0], band * rows, (band + 1) * rows)
    return sigs, (keys, is_empty(sigs[0]))


def _bands(refs, offsets: list[int], n: int, bands: Sequence[int], max_bucket: int) -> np.ndarray:
    """Candidate pair codes from these bands of the first check."""
    shards = _shards(refs)
    found = []
    for band in bands:
        keys, ids = [], []
        for (key, empty), off in zip(shards, offsets):
            valid = np.flatnonzero(~empty)
            keys.append(key[band][valid])
            ids.append(valid + off)
        found += band_pairs(np.concatenate(keys), np.concatenate(ids), n, max_bucket)
    return np.unique(np.concatenate(found)) if found else np.empty(0, np.int64)


def _rows_of(shards: list[list[np.ndarray]], offsets: Sequence[int], check: int, rows: np.ndarray) -> np.ndarray:
    """Signature rows (global numbers) of the given shards (their starts in ``offsets``, ascending)."""
    which = np.searchsorted(np.asarray(offsets), rows, side="right") - 1
    out = np.empty((len(rows), shards[0][check].shape[1]), np.uint32)
    for s in np.unique(which):
        here = which == s
        out[here] = shards[s][check][rows[here] - offsets[s]]
    return out


def _verify(refs, offsets: Sequence[int], codes: np.ndarray, n: int,
            thresholds: Sequence[float]) -> np.ndarray:
    """The pairs (codes) that clear every check; ``refs``: the one or two shards they fall in."""
    shards = _shards(refs)
    i, j = codes // n, codes % n
    keep = np.ones(len(codes), bool)
    for c, thr in enumerate(thresholds):
        same = np.count_nonzero(_rows_of(shards, offsets, c, i) == _rows_of(shards, offsets, c, j), axis=1)
        keep &= same / shards[0][c].shape[1] >= thr
    return codes[keep]


SHARD_TEXTS = 500_000  # texts a map task signs at most: its memory (texts, signatures, keys) stays near 0.5 GB


def staged_groups(checks: Sequence[tuple[Sequence[str], int, float]], executor: Executor, num_perm: int = 128,
                  seed: int = 1, max_bucket: int = MAX_BUCKET, pair_chunk: int = 1_000_000) -> StagedGroups:
    ray = ray_for(executor)
    n = len(checks[0][0])
    parts = split(range(n), max(executor.shards, -(-n // SHARD_TEXTS)))
    offsets = np.asarray([p[0] for p in parts], np.int64)
    bands, rows = lsh_params(float(checks[0][2]), num_perm)
    sign = remote(ray, _signatures, executor).options(num_returns=2)
    made = [sign.remote([list(t[p[0]:p[-1] + 1]) for t, _, _ in checks], num_perm, [g for _, g, _ in checks], seed,
                        bands, rows) for p in parts]
    sig_refs, key_refs = [m[0] for m in made], [m[1] for m in made]
    group = remote(ray, _bands, executor)
    band_sets = [b for b in split(range(bands), executor.shards) if b]
    codes = ray.get([group.remote(key_refs, offsets.tolist(), n, list(b), max_bucket) for b in band_sets])
    codes = np.unique(np.concatenate(codes)) if codes else np.empty(0, np.int64)
    # verification by pair of shards, so a task maps the signatures of two shards at most
    where = np.searchsorted(offsets, codes // n, side="right") - 1, np.searchsorted(offsets, codes % n, side="right") - 1
    verify = remote(ray, _verify, executor)
    thresholds = [float(t) for _, _, t in checks]
    jobs = []
    for a, b in sorted(set(zip(where[0].tolist(), where[1].tolist()))):
        mine = codes[(where[0] == a) & (where[1] == b)]
        pick = [a] if a == b else [a, b]
        for c in range(0, len(mine), pair_chunk):
            jobs.append(verify.remote([sig_refs[s] for s in pick], [int(offsets[s]) for s in pick],
                                      mine[c:c + pair_chunk], n, thresholds))
    kept = np.concatenate(ray.get(jobs)) if jobs else np.empty(0, np.int64)
    groups = union_find_groups(kept // n, kept % n)
    members = np.asarray(sorted({m for g in groups for m in g}), np.int64)
    fetch = remote(ray, _fetch_rows, executor)
    home = np.searchsorted(offsets, members, side="right") - 1
    parts_of = [s for s in range(len(parts)) if (home == s).any()]
    sigs = []
    for c in range(len(checks)):
        got = ray.get([fetch.remote([sig_refs[s]], [int(offsets[s])], c, members[home == s]) for s in parts_of])
        sigs.append(np.concatenate(got) if got else np.empty((0, num_perm), np.uint32))
    return StagedGroups(groups, members, sigs, len(codes))


def _fetch_rows(refs, offsets, check, rows):
    return _rows_of(_shards(refs), offsets, check, rows)


def _shards(refs) -> list[list[np.ndarray]]:
    """The shards' signatures in a task: refs nested in a list reach it unresolved, and are read
    here, zero-copy, from shared memory."""
    import ray

    return ray.get(list(refs))
