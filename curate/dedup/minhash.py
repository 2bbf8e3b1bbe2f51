"""Fast MinHash near-duplicate detection for many texts (the filter stage's ``minhash`` step).

Three parts, each vectorised with numpy so that a million records stay cheap:

* **Shingling.** A text is lower-cased and split into ``\\w+`` words (the same normalisation
  as every MinHash in curate, ``curate.dedup.shingles``); its shingles are the word n-grams (``ngram`` words,
  default 3). A text with fewer words than ``ngram`` falls back to one shingle made of all
  its words, so short tasks and queries still get a signature. A text without words gets
  no signature and is never grouped. Text in a script written without spaces (Chinese,
  Japanese, Thai...: ``curate.dedup.shingles.unspaced``) is cut a character a word, and its
  n-grams span about as much text as ``ngram`` words (``ngram_for``: 6 characters for 3 words
  of Chinese); so a batch may hash texts at different n.
* **Signatures.** Each shingle gets a 32-bit hash (a polynomial hash of every word's bytes,
  computed with prefix sums over the whole batch, mixed by the MurmurHash3 finalizer and
  chained over the n-gram's words). The signature then applies exactly datasketch's
  ``affine32`` scheme (datasketch >= 2.0's default): pre-mix with the 32-bit MurmurHash3
  finalizer, ``a_k * h + b_k mod 2^32`` with the permutations of ``MinHash(num_perm, seed)``,
  minimum per permutation. So a row here equals, bit for bit, the ``hashvalues`` of a
  datasketch ``MinHash(num_perm, seed, hashfunc=shingle_hash32)`` fed the same shingles
  (``tests/dedup/test_minhash.py`` checks this), and the fraction of equal slots estimates the
  Jaccard similarity of the shingle sets just like ``MinHash.jaccard``. The work is laid
  out permutation-major (128 x shingles) so that ``np.minimum.reduceat`` runs along
  contiguous rows; batches of about 128 kB of text keep the per-byte arrays in cache and
  run on a small thread pool (numpy releases the GIL in its large operations). About
  135,000 texts/s on one core for 60-word texts, 30x datasketch's per-text path.
  rensa (a Rust MinHash) was measured as the alternative in ``bench/minhash.py``: its
  sketch alone is faster, but it needs the shingles as Python strings and hands its matrix
  back as Python lists, which makes it ~10x slower end to end; see ``BACKEND_NOTE``.
* **Grouping.** Locality-sensitive hashing over bands of the signature proposes candidate
  pairs; every candidate is verified with the estimated Jaccard (so an LSH false positive
  never merges two groups); a union-find over the verified pairs forms the groups. Up to
  ``DATASKETCH_LSH_MAX`` texts the bands go into datasketch's ``MinHashLSH`` (fed
  ``LeanMinHash`` objects built from the precomputed rows, through an insertion session).
  Above that the same bands are bucketed with numpy (sort the 64-bit band keys, pair
  equal neighbours) -- the spec allows "datasketch's LSH or its bulk API", and
  datasketch's index does not fit: ``bench/minhash.py`` measures about 5.3 kB per record
  (a LeanMinHash plus an entry in each of 14 dict-of-set band tables), i.e. ~5.3 GB and
  ~90 s for 1,000,000 records, against 0.5 GB of uint32 signatures and a few seconds for
  the numpy banding. Both paths use the same (b, r) from datasketch's own
  ``_optimal_param`` and yield the same pairs (tested), except that numpy caps how many
  pairs one huge bucket expands into (``MAX_BUCKET``).

Verification uses the estimate, so a pair whose true Jaccard sits just above the threshold
is found only part of the time (at 0.82 against 0.8, about 2 in 3: the estimate's standard
deviation is ~0.034 with 128 permutations); pairs at 0.9 are found > 99.8% of the time.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import numpy as np

from curate.dedup.shingles import shingle_tokens

BACKEND_NOTE = (
    "numpy: bit-compatible with datasketch's affine32 MinHash and no extra dependency; "
    "rensa's R-MinHash sketch is faster alone but is a different sketch, is not a declared "
    "dependency, and end to end (Python shingles in, Python lists out) was ~10x slower, "
    "so it is only measured in bench/minhash.py"
)

# Above this many texts the LSH banding is done with numpy instead of datasketch's
# MinHashLSH, whose per-record Python objects would not fit 1,000,000 records in 4 GB.
DATASKETCH_LSH_MAX = 100_000

# LSH (b, r) is chosen by datasketch's _optimal_param, which weighs the probability mass of
# false positives (pairs below the threshold that become candidates) against false negatives
# (pairs above it that do not). Every candidate is verified with the estimated Jaccard, so a
# false positive only costs one vectorised comparison while a false negative is a missed
# duplicate: weigh misses 9:1. At threshold 0.8 and 128 permutations that gives b=14 bands of
# r=9 rows (datasketch's 0.5/0.5 default gives 9 x 13), catching a pair of true Jaccard 0.8
# with probability 0.87 (0.40 with 9 x 13), 0.85 with 0.975 and 0.9 with 0.999, while
# unrelated pairs (Jaccard < 0.3) essentially never collide.
LSH_WEIGHTS = (0.1, 0.9)

# Buckets larger than this are not expanded into all pairs: each member is paired with the
# next MAX_BUCKET - 1 members of the bucket (enough to chain a bucket of identical copies).
MAX_BUCKET = 64

_U64 = np.uint64
_MASK64 = (1 << 64) - 1
# Polynomial base for word hashes (odd, so invertible mod 2^64), the multiplier chaining the
# words of an n-gram, and the constant mixing in the word length.
_P = 0x100000001B3
_P_INV = pow(_P, -1, 1 << 64)
_CHAIN = 0x9E3779B97F4A7C15
_LEN_MIX = 0xC2B2AE3D27D4EB4F
# Bytes that belong to a word: ASCII letters, digits, underscore, and every byte of a
# non-ASCII character (non-ASCII texts are first normalised with the \w regex, so only word
# characters remain in them).
_WORDTAB = np.zeros(256, dtype=bool)
for _c in b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_":
    _WORDTAB[_c] = True
_WORDTAB[128:] = True
_WORDBYTES = bytes(_WORDTAB.astype(np.uint8))  # bytes.translate table: 1 for word bytes

_BATCH_BYTES = 1 << 17  # text bytes per batch: keeps the per-byte uint64 arrays in cache
_CHUNK_SHINGLES = 4096  # shingles per kernel block: 128 x 4096 uint32 = 2 MB
_EMPTY = np.uint32(0xFFFFFFFF)


# ---------------------------------------------------------------------------- shingling


def _fmix64_int(h: int) -> int:
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & _MASK64
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & _MASK64
    return h ^ (h >> 33)


def _word_hash_int(word: str) -> int:
    h, p = 0, 1
    for c in word.encode("utf-8"):
        h = (h + c * p) & _MASK64
        p = (p * _P) & _MASK64
    return _fmix64_int(h ^ ((len(word.encode("utf-8")) * _LEN_MIX) & _MASK64))


def shingle_hash32(shingle: Sequence[str] | bytes | str) -> int:
    """Pure-Python reference of the 32-bit shingle hash the vectorised path computes.

    Accepts a tuple of words, or the words joined by single spaces (str or UTF-8 bytes), so
    it can serve as a datasketch ``hashfunc``.
    """
    if isinstance(shingle, bytes):
        shingle = shingle.decode("utf-8")
    if isinstance(shingle, str):
        shingle = shingle.split(" ")
    g = _word_hash_int(shingle[0])
    for w in shingle[1:]:
        g = _fmix64_int((g * _CHAIN + _word_hash_int(w)) & _MASK64)
    return g >> 32


# ---------------------------------------------------------------------------- numpy hashing


def _fmix64(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> _U64(33))
    h *= _U64(0xFF51AFD7ED558CCD)
    h ^= h >> _U64(33)
    h *= _U64(0xC4CEB9FE1A85EC53)
    h ^= h >> _U64(33)
    return h


def _fmix32(h: np.ndarray) -> np.ndarray:
    """datasketch's 32-bit pre-mix (MurmurHash3 finalizer)."""
    h = h ^ (h >> np.uint32(16))
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return h


class _Powers:
    """P^i and P^-i mod 2^64 for i < size, grown on demand (shared by the worker threads:
    both arrays live in one tuple so a reader never sees one grown without the other)."""

    def __init__(self) -> None:
        self.arrays = (np.ones(1, dtype=_U64), np.ones(1, dtype=_U64))

    def get(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        arrays = self.arrays
        if len(arrays[0]) < n:
            size = max(n, 2 * len(arrays[0]))
            grown = []
            for base in (_P, _P_INV):
                a = np.full(size, base, dtype=_U64)
                a[0] = 1
                np.multiply.accumulate(a, out=a)
                grown.append(a)
            arrays = self.arrays = (grown[0], grown[1])
        return arrays


_POWERS = _Powers()


def _batch_shingle_hashes(texts: Sequence[str], ngram: int) -> tuple[np.ndarray, np.ndarray]:
    """32-bit shingle hashes (pre-mixed, ready for the permutations) of a batch, concatenated
    text after text, and the number of shingles of each text."""
    ngrams = None  # per text, when some unspaced text (Chinese, Thai...) takes character n-grams
    if all(map(str.isascii, texts)):
        data = (" " + " ".join(texts) + " ").lower().encode("ascii")
        lens = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    else:
        encs, ns = [], []
        for t in texts:
            if t.isascii():
                encs.append(t.lower().encode("ascii"))
                ns.append(ngram)
            else:  # normalize(t) for spaced text; unspaced text: a character a word
                tokens, n = shingle_tokens(t, ngram)
                encs.append(" ".join(tokens).encode("utf-8"))
                ns.append(n)
        data = b" " + b" ".join(encs) + b" "
        lens = np.fromiter(map(len, encs), dtype=np.int64, count=len(encs))
        if any(n != ngram for n in ns):
            ngrams = np.asarray(ns, dtype=np.int64)
    arr = np.frombuffer(data, dtype=np.uint8)
    nbytes = len(arr)
    # word boundaries: where "is a word byte" flips (the batch starts and ends with a space)
    is_word = np.frombuffer(data.translate(_WORDBYTES), dtype=np.bool_)
    flips = np.flatnonzero(is_word[1:] ^ is_word[:-1]) + 1
    ws, we = flips[0::2], flips[1::2]  # word starts, ends (exclusive), as byte offsets
    # words per text: text i spans [end_i - len_i, end_i), texts joined by one space
    text_ends = np.cumsum(lens + 1)
    k = np.diff(np.searchsorted(ws, text_ends), prepend=0)
    # word hashes: sum c_i P^i over the word, from prefix sums over the batch
    pw, ipw = _POWERS.get(nbytes + 1)
    prefix = np.empty(nbytes + 1, dtype=_U64)
    prefix[0] = 0
    v = arr.astype(_U64)
    v *= pw[:nbytes]
    np.cumsum(v, out=prefix[1:])
    del v
    h = prefix[we] - prefix[ws]
    h *= ipw[ws]
    h ^= (we - ws).astype(_U64) * _U64(_LEN_MIX)
    g1 = _fmix64(h)
    nwords = len(g1)

    n_eff = np.minimum(k, ngram if ngrams is None else ngrams)
    counts = np.where(k > 0, k - n_eff + 1, 0)
    first_word = np.cumsum(k) - k
    total = int(counts.sum())
    cstart = np.cumsum(counts) - counts
    # index of the first word of every shingle
    idx = np.repeat(first_word - cstart, counts) + np.arange(total, dtype=np.int64)
    # n-gram hashes g_n[i] = fmix64(g_{n-1}[i] * CHAIN + g1[i+n-1]) for the needed n
    longest = int(n_eff.max(initial=0))
    gs: dict[int, np.ndarray] = {1: g1}
    g = g1
    for n in range(2, longest + 1):
        m = nwords - n + 1
        nxt = np.zeros(nwords, dtype=_U64)
        if m > 0:
            t = g[:m] * _U64(_CHAIN)
            t += g1[n - 1 :]
            nxt[:m] = _fmix64(t)
        g = gs[n] = nxt
    if ngrams is None:
        vals = gs[ngram][idx] if ngram in gs else np.zeros(total, dtype=_U64)
        short = np.flatnonzero((k > 0) & (k < ngram))
        if len(short):
            for n in np.unique(k[short]).tolist():
                sel = short[k[short] == n]
                vals[cstart[sel]] = gs[n][first_word[sel]]
    else:  # each shingle hashed at its text's n (a short text's one shingle at its length)
        per_shingle = np.repeat(n_eff, counts)
        vals = np.zeros(total, dtype=_U64)
        for n in np.unique(per_shingle).tolist():
            sel = per_shingle == n
            vals[sel] = gs[n][idx[sel]]
    x = (vals >> _U64(32)).astype(np.uint32)
    return _fmix32(x), counts


@lru_cache(maxsize=8)
def permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The affine32 permutation parameters (a, b) of ``datasketch.MinHash(num_perm, seed)``."""
    from datasketch import MinHash

    a, b = MinHash(num_perm=num_perm, seed=seed, scheme="affine32").permutations
    return np.ascontiguousarray(a, dtype=np.uint32), np.ascontiguousarray(b, dtype=np.uint32)


def _signature_block(x: np.ndarray, counts: np.ndarray, a: np.ndarray, b: np.ndarray,
                     out: np.ndarray) -> None:
    """min_s (a_k * x_s + b_k) per text, into ``out`` (one row per text of the batch)."""
    nz = np.flatnonzero(counts)
    if len(nz) < len(counts):
        out[counts == 0] = _EMPTY
    if not len(nz):
        return
    ends = np.cumsum(counts)[nz]
    starts = ends - counts[nz]
    a_col, b_col = a[:, None], b[:, None]
    buf = np.empty((len(a), _CHUNK_SHINGLES), dtype=np.uint32)
    pos = 0
    while pos < len(nz):
        stop = max(pos + 1, int(np.searchsorted(ends, starts[pos] + _CHUNK_SHINGLES, "right")))
        s0, e0 = int(starts[pos]), int(ends[stop - 1])
        if e0 - s0 <= _CHUNK_SHINGLES:
            block = buf[:, : e0 - s0]
            np.multiply(a_col, x[None, s0:e0], out=block)
            block += b_col
            out[nz[pos:stop]] = np.minimum.reduceat(block, starts[pos:stop] - s0, axis=1).T
        else:  # one text longer than a block: fold its blocks together
            acc = np.full(len(a), _EMPTY, dtype=np.uint32)
            for c0 in range(s0, e0, _CHUNK_SHINGLES):
                c1 = min(c0 + _CHUNK_SHINGLES, e0)
                block = buf[:, : c1 - c0]
                np.multiply(a_col, x[None, c0:c1], out=block)
                block += b_col
                np.minimum(acc, block.min(axis=1), out=acc)
            out[nz[pos]] = acc
        pos = stop


def _batches(texts: Sequence[str]) -> list[tuple[int, int]]:
    """Split into batches of about _BATCH_BYTES characters (at most 20,000 texts)."""
    lens = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    cum = np.cumsum(lens + 1)
    out, start = [], 0
    while start < len(texts):
        base = cum[start - 1] if start else 0
        stop = int(np.searchsorted(cum, base + _BATCH_BYTES, "right"))
        stop = min(max(stop, start + 1), start + 20_000, len(texts))
        out.append((start, stop))
        start = stop
    return out


def default_workers() -> int:
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        n = os.cpu_count() or 1
    return max(1, min(n, 8))


def signatures(texts: Sequence[str], num_perm: int = 128, ngram: int = 3, seed: int = 1,
               workers: int | None = None) -> np.ndarray:
    """MinHash signatures of ``texts`` as a (len(texts), num_perm) uint32 array.

    Row ``i`` equals ``datasketch.MinHash(num_perm, seed, hashfunc=shingle_hash32)``
    updated with the shingles of ``texts[i]`` (joined by spaces); a text without words gets
    the empty signature (all 0xFFFFFFFF).
    """
    if ngram < 1:
        raise ValueError("ngram must be >= 1")
    a, b = permutations(num_perm, seed)
    out = np.empty((len(texts), num_perm), dtype=np.uint32)

    def run(span: tuple[int, int]) -> None:
        lo, hi = span
        x, counts = _batch_shingle_hashes(texts[lo:hi], ngram)
        _signature_block(x, counts, a, b, out[lo:hi])

    spans = _batches(texts)
    workers = default_workers() if workers is None else max(1, workers)
    if workers == 1 or len(spans) == 1:
        for span in spans:
            run(span)
    else:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(run, spans))
    return out


def is_empty(sig: np.ndarray) -> np.ndarray:
    """Which rows are the empty signature (texts without words)."""
    return (sig == _EMPTY).all(axis=1)


def jaccard(sig: np.ndarray, i, j, chunk: int = 262_144) -> np.ndarray | float:
    """Estimated Jaccard of rows i and j (scalars or equal-length index arrays)."""
    if np.isscalar(i):
        return float(np.count_nonzero(sig[i] == sig[j])) / sig.shape[1]
    i, j = np.asarray(i), np.asarray(j)
    out = np.empty(len(i), dtype=np.float64)
    for s in range(0, len(i), chunk):
        eq = sig[i[s : s + chunk]] == sig[j[s : s + chunk]]
        out[s : s + chunk] = np.count_nonzero(eq, axis=1) / sig.shape[1]
    return out


# ---------------------------------------------------------------------------- LSH + groups


@lru_cache(maxsize=32)
def lsh_params(threshold: float, num_perm: int,
               weights: tuple[float, float] = LSH_WEIGHTS) -> tuple[int, int]:
    """(bands, rows per band), from datasketch's own optimiser."""
    from datasketch.lsh import _optimal_param

    return _optimal_param(threshold, num_perm, weights[0], weights[1])


def _pairs_datasketch(sig: np.ndarray, valid: np.ndarray, threshold: float, seed: int,
                      params: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    from datasketch import LeanMinHash, MinHashLSH

    lsh = MinHashLSH(threshold=threshold, num_perm=sig.shape[1], params=params)
    rows = np.flatnonzero(valid).tolist()
    hashes = {}
    with lsh.insertion_session(buffer_size=50_000) as session:
        for i in rows:
            m = LeanMinHash(seed=seed, hashvalues=sig[i], scheme="affine32")
            hashes[i] = m
            session.insert(i, m, check_duplication=False)
    left, right = [], []
    for i in rows:
        for j in lsh.query(hashes[i]):
            if j > i:
                left.append(i)
                right.append(j)
    return np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)


def band_keys(sig: np.ndarray, lo: int, hi: int) -> np.ndarray:
    key = np.full(len(sig), _U64(hi - lo), dtype=_U64)
    for c in range(lo, hi):
        key *= _U64(_CHAIN)
        key += sig[:, c].astype(_U64)
        key = _fmix64(key)
    return key


def band_pairs(key: np.ndarray, ids: np.ndarray, n: int, max_bucket: int = MAX_BUCKET) -> list[np.ndarray]:
    """Pairs of rows whose keys in one band are equal, as codes ``min * n + max``: sort the
    keys, pair equal neighbours up to ``max_bucket`` apart (``ids``: each key's row)."""
    order = np.argsort(key, kind="stable")
    ks = key[order]
    same = ks[1:] == ks[:-1]
    # only positions inside a bucket of two or more
    inb = np.zeros(len(ks), dtype=bool)
    inb[1:] |= same
    inb[:-1] |= same
    pos = np.flatnonzero(inb)
    ks, members = ks[pos], ids[order[pos]]
    found = []
    for d in range(1, max_bucket):
        if d >= len(ks):
            break
        m = ks[d:] == ks[:-d]
        if not m.any():
            break
        i, j = members[:-d][m], members[d:][m]
        found.append(np.minimum(i, j) * n + np.maximum(i, j))
    return found


def _pairs_numpy(sig: np.ndarray, valid: np.ndarray, params: tuple[int, int],
                 max_bucket: int = MAX_BUCKET) -> tuple[np.ndarray, np.ndarray]:
    bands, rows = params
    n = len(sig)
    ids = np.flatnonzero(valid)
    everything = len(ids) == n
    found = []
    for band in range(bands):
        key = band_keys(sig, band * rows, (band + 1) * rows)
        found += band_pairs(key if everything else key[ids], ids, n, max_bucket)
    if not found:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    code = np.unique(np.concatenate(found))
    return code // n, code % n


def candidate_pairs(sig: np.ndarray, threshold: float, *, lsh: str = "auto", seed: int = 1,
                    weights: tuple[float, float] = LSH_WEIGHTS) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (i < j) that share at least one LSH band; not yet verified."""
    params = lsh_params(float(threshold), sig.shape[1], tuple(weights))
    valid = ~is_empty(sig)
    if lsh == "auto":
        lsh = "datasketch" if len(sig) <= DATASKETCH_LSH_MAX else "numpy"
    if lsh == "datasketch":
        i, j = _pairs_datasketch(sig, valid, threshold, seed, params)
    elif lsh == "numpy":
        i, j = _pairs_numpy(sig, valid, params)
    else:
        raise ValueError(f"lsh must be 'auto', 'datasketch' or 'numpy', not {lsh!r}")
    order = np.lexsort((j, i))
    return i[order], j[order]


def similar_pairs(sig: np.ndarray, threshold: float, *, lsh: str = "auto", seed: int = 1,
                  weights: tuple[float, float] = LSH_WEIGHTS
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LSH candidates whose estimated Jaccard is >= threshold: (i, j, similarity)."""
    i, j = candidate_pairs(sig, threshold, lsh=lsh, seed=seed, weights=weights)
    sim = jaccard(sig, i, j)
    keep = sim >= threshold
    return i[keep], j[keep], sim[keep]


def union_find_groups(i: np.ndarray, j: np.ndarray) -> list[list[int]]:
    """Connected components (size >= 2) of the edges (i, j), as sorted index lists ordered by
    their smallest member. Vectorised union-find: hook each root onto the smallest root it
    is linked to, compress paths by pointer jumping, repeat until every edge is inside one
    set."""
    if not len(i):
        return []
    nodes, inv = np.unique(np.concatenate([i, j]), return_inverse=True)
    a, b = inv[: len(i)], inv[len(i) :]
    parent = np.arange(len(nodes))
    while True:
        ra, rb = parent[a], parent[b]
        diff = ra != rb
        if not diff.any():
            break
        lo, hi = np.minimum(ra[diff], rb[diff]), np.maximum(ra[diff], rb[diff])
        np.minimum.at(parent, hi, lo)
        while True:  # pointer jumping until every node points at its root
            nxt = parent[parent]
            if np.array_equal(nxt, parent):
                break
            parent = nxt
    order = np.lexsort((nodes, parent))
    roots = parent[order]
    cuts = np.flatnonzero(roots[1:] != roots[:-1]) + 1
    groups = [g.tolist() for g in np.split(nodes[order], cuts)]
    groups.sort(key=lambda g: g[0])
    return groups


def find_duplicate_groups(texts: Sequence[str], threshold: float = 0.8, num_perm: int = 128,
                          ngram: int = 3, *, seed: int = 1, lsh: str = "auto",
                          workers: int | None = None, sig: np.ndarray | None = None
                          ) -> list[list[int]]:
    """Groups (lists of indices into ``texts``, size >= 2) of near-duplicate texts: connected
    through pairs whose estimated Jaccard of word ``ngram`` shingles is >= ``threshold``."""
    if sig is None:
        sig = signatures(texts, num_perm=num_perm, ngram=ngram, seed=seed, workers=workers)
    i, j, _ = similar_pairs(sig, threshold, lsh=lsh, seed=seed)
    return union_find_groups(i, j)


def resolve_group(members: Sequence[int], rank: Callable[[int], object],
                  checks: Sequence[tuple[np.ndarray, float]]
                  ) -> list[tuple[int, int, tuple[float, ...]]]:
    """Pick survivors in one group: (dropped, kept, similarities) for every dropped member.

    Members are visited best first (``rank`` ascending = better; ties by position). A member
    is dropped when some already-kept member is a near-duplicate of it under every
    ``(signatures, threshold)`` check; otherwise it is kept too. So the best member always
    survives, and a chain A~B~C where A and C are not near-duplicates keeps A and C.
    ``similarities`` are the estimated Jaccards to the kept member, one per check; among
    several matching kept members the one most similar under the first check is named.
    """
    ordered = sorted(members, key=lambda m: (rank(m), m))
    kept: list[int] = []
    drops: list[tuple[int, int, tuple[float, ...]]] = []
    for m in ordered:
        if kept:
            ks = np.asarray(kept)
            sims = [np.count_nonzero(sig[ks] == sig[m], axis=1) / sig.shape[1]
                    for sig, _ in checks]
            ok = np.logical_and.reduce([s >= thr for s, (_, thr) in zip(sims, checks)])
            if ok.any():
                hit = np.flatnonzero(ok)
                best = int(hit[np.argmax(sims[0][hit])])
                drops.append((m, int(ks[best]), tuple(float(s[best]) for s in sims)))
                continue
        kept.append(m)
    return drops
