#!/usr/bin/env python
"""Benchmark of curate.dedup.minhash: signature throughput and million-record near-dup detection.

    .venv/bin/python bench/minhash.py [--n 1000000] [--baseline-n 20000] [--sig-n 200000]

Builds synthetic ~60-word texts (55-65 words drawn Zipf-like from a 40,000-word
pseudo-vocabulary) with planted near-duplicates: 10% of the records are copies of another
record with surface noise (case, punctuation, spacing) and 0, 1, 2 or 3 substituted words
(word 3-gram Jaccard about 1.0, 0.90, 0.81 and 0.73 against the 0.8 threshold).

Measured in one run, on the same texts:

* signatures/s of the **baseline**, datasketch's one-text-at-a-time path (``MinHash`` +
  ``update_batch`` per text, shingling included), of datasketch's ``MinHash.bulk``, of rensa
  (when installed) and of ``curate.dedup.minhash.signatures`` with 1 and 2 worker threads; every
  rate is also given per CPU-second and as a ratio to the baseline;
* correctness: our rows equal datasketch's ``MinHash(hashfunc=shingle_hash32)`` rows, and
  the estimated Jaccard of planted pairs against the exact Jaccard of their shingle sets;
* full dedup of ``--n`` records in a child process (so its peak RSS is its own): signatures,
  LSH banding, verification, union-find and keeping one member per group; wall time, CPU
  time, peak RSS, recall of planted pairs at or above the threshold, precision of the pairs
  found (exact Jaccard of a sample);
* datasketch's ``MinHashLSH`` (the path used up to ``DATASKETCH_LSH_MAX`` records) at
  ``--ds-lsh-n`` records, to show why 1,000,000 records use numpy banding.

The machine is shared: the CPU time other processes used during each phase is reported as
``other_load_cores`` (from /proc/stat), so a slow figure can be told from a busy machine.
Prints a table and writes bench/results/minhash.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from curate.dedup import minhash as M  # noqa: E402
from curate.dedup.shingles import word_shingles  # noqa: E402

THRESHOLD, NUM_PERM, NGRAM, SEED = 0.8, 128, 3, 1
EDIT_MIX = (0.25, 0.30, 0.25, 0.20)  # share of planted copies with 0, 1, 2, 3 substituted words


# ---------------------------------------------------------------------------- corpus


def make_vocab(size: int, rng: np.random.Generator) -> list[str]:
    syll = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"] + ["th", "st", "ch", "qu"]
    words, seen = [], set()
    while len(words) < size:
        k = int(rng.integers(1, 5))
        w = "".join(syll[i] for i in rng.integers(0, len(syll), k))
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


def make_corpus(n: int, seed: int = 0, dup_frac: float = 0.1):
    """n texts; returns (texts, planted) with planted = (base, copy, substitutions) rows."""
    rng = np.random.default_rng(seed)
    vocab = make_vocab(40_000, rng)
    ranks = np.arange(1, len(vocab) + 1)
    p = 1.0 / ranks
    p /= p.sum()
    maxw = 65
    idx = rng.choice(len(vocab), size=(n, maxw), p=p).astype(np.int32)
    lens = rng.integers(55, maxw + 1, n)
    n_dup = int(n * dup_frac)
    copies = np.sort(rng.choice(np.arange(n // 10, n), size=n_dup, replace=False))
    is_copy = np.zeros(n, dtype=bool)
    is_copy[copies] = True
    originals = np.flatnonzero(~is_copy)
    bases = originals[rng.integers(0, len(originals), n_dup)]
    edits = rng.choice(4, size=n_dup, p=EDIT_MIX)
    for c, b, k in zip(copies.tolist(), bases.tolist(), edits.tolist()):
        idx[c] = idx[b]
        lens[c] = lens[b]
        if k:
            pos = rng.choice(int(lens[b]), size=k, replace=False)
            idx[c, pos] = rng.integers(0, len(vocab), k)
    getter = vocab.__getitem__
    texts = []
    for lo in range(0, n, 50_000):  # in chunks: a million rows as Python lists would cost GBs
        texts.extend(" ".join(map(getter, row[:L]))
                     for row, L in zip(idx[lo : lo + 50_000].tolist(), lens[lo : lo + 50_000].tolist()))
    del idx
    for c in copies[rng.random(n_dup) < 0.5].tolist():  # surface noise the shingling ignores
        t = texts[c]
        texts[c] = t[:1].upper() + t[1:].replace(" ", ", ", 1).replace(" ", "  ", 1) + "!"
    planted = np.stack([bases, copies, edits], axis=1)
    return texts, planted


# ---------------------------------------------------------------------------- helpers


def _busy_jiffies() -> int:
    with open("/proc/stat") as f:
        parts = f.readline().split()[1:]
    vals = [int(x) for x in parts]
    return sum(vals) - vals[3] - vals[4]  # minus idle and iowait


class Meter:
    """Wall time, our CPU time and the CPU other processes used meanwhile."""

    def __enter__(self):
        self.w, self.c = time.perf_counter(), time.process_time()
        try:
            self.j = _busy_jiffies()
        except OSError:
            self.j = None
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.w
        self.cpu = time.process_time() - self.c
        self.other = None
        if self.j is not None:
            hz = os.sysconf("SC_CLK_TCK")
            busy = (_busy_jiffies() - self.j) / hz
            self.other = max(0.0, busy - self.cpu) / max(self.wall, 1e-9)


def py_shingles(text: str) -> list[bytes]:
    return [" ".join(s).encode("utf-8") for s in word_shingles(text, NGRAM)]


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    """Peak RSS (VmHWM) of this process since start or the last reset_peak_rss()."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux: write 5 to /proc/self/clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def best_of(fn, repeat: int):
    best = None
    for _ in range(repeat):
        with Meter() as m:
            out = fn()
        if best is None or m.wall < best[0].wall:
            best = (m, out)
    return best


# ---------------------------------------------------------------------------- phases


def phase_signatures(args) -> dict:
    texts, planted = make_corpus(max(args.sig_n, args.baseline_n), seed=1)
    res: dict = {"texts": len(texts), "mean_words": float(np.mean([len(t.split()) for t in texts[:5000]]))}
    rates = {}

    sample = texts[: args.baseline_n]
    from datasketch import MinHash

    def baseline():
        out = []
        for t in sample:
            m = MinHash(num_perm=NUM_PERM, seed=SEED)
            m.update_batch(py_shingles(t))
            out.append(m)
        return out

    m, _ = best_of(baseline, 1)
    rates["datasketch per-text (baseline)"] = (len(sample), m)

    def bulk():
        return MinHash.bulk((py_shingles(t) for t in sample), num_perm=NUM_PERM, seed=SEED)

    m, _ = best_of(bulk, 1)
    rates["datasketch MinHash.bulk"] = (len(sample), m)

    try:
        import rensa
    except ImportError:
        rensa = None
    if rensa is not None:
        rtexts = texts[: args.sig_n]

        def rensa_e2e():
            toks = [[" ".join(s) for s in word_shingles(t, NGRAM)] for t in rtexts]
            mat = rensa.RMinHash.digest_matrix_from_token_sets(toks, NUM_PERM, SEED)
            return np.asarray(mat.to_rows(), dtype=np.uint32)

        m, _ = best_of(rensa_e2e, 1)
        rates["rensa R-MinHash (python shingles, to numpy)"] = (len(rtexts), m)
        toks = [[" ".join(s) for s in word_shingles(t, NGRAM)] for t in rtexts]
        m, _ = best_of(lambda: rensa.RMinHash.digest_matrix_from_token_sets(toks, NUM_PERM, SEED), 2)
        rates["rensa R-MinHash sketch only (shingles given)"] = (len(rtexts), m)
        del toks

    ours = texts[: args.sig_n]
    M.signatures(ours[:2000])  # warm up (permutations, powers)
    for w in (1, 2):
        m, sig = best_of(lambda w=w: M.signatures(ours, NUM_PERM, NGRAM, SEED, workers=w), 3)
        rates[f"curate.dedup.minhash numpy, {w} thread{'s' if w > 1 else ''}"] = (len(ours), m)

    base_rate = len(sample) / rates["datasketch per-text (baseline)"][1].wall
    table = []
    for name, (n, m) in rates.items():
        table.append({"method": name, "texts": n, "texts_per_s": n / m.wall,
                      "texts_per_cpu_s": n / m.cpu if m.cpu > 0 else None,
                      "ratio_vs_baseline": (n / m.wall) / base_rate,
                      "other_load_cores": m.other})
    res["throughput"] = table

    # correctness: bit-equality with datasketch given our shingle hash, and Jaccard accuracy
    check = texts[:300]
    sig = M.signatures(check, NUM_PERM, NGRAM, SEED)
    equal = 0
    for t, row in zip(check, sig):
        dm = MinHash(num_perm=NUM_PERM, seed=SEED, hashfunc=M.shingle_hash32)
        dm.update_batch(py_shingles(t))
        equal += bool(np.array_equal(dm.hashvalues, row))
    res["rows_equal_to_datasketch_with_same_shingle_hash"] = f"{equal}/{len(check)}"
    pl = planted[planted[:, 1] < len(ours)][:3000]
    sig = M.signatures(ours, NUM_PERM, NGRAM, SEED)
    est = M.jaccard(sig, pl[:, 0], pl[:, 1])
    exact = np.array([_exact(ours[a], ours[b]) for a, b in pl[:, :2].tolist()])
    ds_pairs = pl[:1000, :2].tolist()
    ds_est = np.array([_ds_minhash(ours[a]).jaccard(_ds_minhash(ours[b])) for a, b in ds_pairs])
    ds_exact = exact[: len(ds_pairs)]
    res["jaccard_estimate"] = {
        "pairs": len(pl),
        "ours_mean_abs_error": float(np.mean(np.abs(est - exact))),
        "ours_mean_error": float(np.mean(est - exact)),
        "expected_mean_abs_error_128_perm": float(np.mean(np.sqrt(exact * (1 - exact) / NUM_PERM)) * 0.798),
        "datasketch_pairs": len(ds_est),
        "datasketch_mean_abs_error": float(np.mean(np.abs(ds_est - ds_exact))) if len(ds_est) else None,
    }
    return res


def _ds_minhash(text: str):
    from datasketch import MinHash

    m = MinHash(num_perm=NUM_PERM, seed=SEED)
    m.update_batch(py_shingles(text))
    return m


def _exact(a: str, b: str) -> float:
    sa, sb = word_shingles(a, NGRAM), word_shingles(b, NGRAM)
    return len(sa & sb) / len(sa | sb) if sa or sb else 1.0


def phase_dedup(n: int) -> dict:
    """Run in a child process: full dedup of n records, with its own peak RSS."""
    with Meter() as gen:
        texts, planted = make_corpus(n, seed=2)
    rss_texts = rss_mb()
    peak_generate = peak_rss_mb()
    reset = reset_peak_rss()
    steps = {}
    with Meter() as total:
        with Meter() as m:
            sig = M.signatures(texts, NUM_PERM, NGRAM, SEED)
        steps["signatures"] = m
        with Meter() as m:
            i, j, sim = M.similar_pairs(sig, THRESHOLD, lsh="auto", seed=SEED)
        steps["lsh+verify"] = m
        with Meter() as m:
            groups = M.union_find_groups(i, j)
        steps["union-find"] = m
        with Meter() as m:
            drops = []
            for g in groups:
                drops.extend(M.resolve_group(g, int, [(sig, THRESHOLD)]))
        steps["keep one per group"] = m
    peak = peak_rss_mb()

    # quality (not timed): planted pairs whose exact Jaccard >= threshold should share a group
    label = np.full(n, -1, dtype=np.int64)
    for gi, g in enumerate(groups):
        label[g] = gi
    pb, pc, pk = planted[:, 0], planted[:, 1], planted[:, 2]
    exact = np.array([_exact(texts[a], texts[b]) for a, b in zip(pb.tolist(), pc.tolist())])
    same = (label[pb] == label[pc]) & (label[pb] >= 0)
    above = exact >= THRESHOLD
    by_edits = {}
    for k in range(4):
        sel = pk == k
        by_edits[str(k)] = {"pairs": int(sel.sum()), "mean_exact_jaccard": float(exact[sel].mean()),
                            "grouped": float(same[sel].mean())}
    rng = np.random.default_rng(0)
    samp = rng.choice(len(i), size=min(5000, len(i)), replace=False) if len(i) else []
    pair_exact = np.array([_exact(texts[i[s]], texts[j[s]]) for s in samp])
    return {
        "records": n,
        "generate_s": gen.wall,
        "rss_after_texts_mb": rss_texts,
        "peak_rss_generating_corpus_mb": peak_generate,
        "peak_rss_measured_from": "dedup start (VmHWM reset)" if reset else "process start",
        "dedup_wall_s": total.wall,
        "dedup_cpu_s": total.cpu,
        "other_load_cores": total.other,
        "steps": {k: {"wall_s": v.wall, "cpu_s": v.cpu} for k, v in steps.items()},
        "peak_rss_mb": peak,
        "lsh": "numpy" if n > M.DATASKETCH_LSH_MAX else "datasketch",
        "lsh_bands_rows": list(M.lsh_params(THRESHOLD, NUM_PERM)),
        "verified_pairs": int(len(i)),
        "groups": len(groups),
        "records_dropped": len(drops),
        "planted_pairs": int(len(planted)),
        "recall_planted_exact_ge_threshold": float(same[above].mean()) if above.any() else None,
        "recall_planted_exact_ge_0.85": float(same[exact >= 0.85].mean()),
        "grouped_planted_exact_lt_threshold": float(same[~above].mean()) if (~above).any() else None,
        "planted_by_substitutions": by_edits,
        "found_pairs_sampled": int(len(samp)),
        "found_pairs_precision_exact_ge_threshold": float((pair_exact >= THRESHOLD).mean()) if len(samp) else None,
        "found_pairs_exact_ge_0.7": float((pair_exact >= 0.7).mean()) if len(samp) else None,
    }


def phase_ds_lsh(n: int) -> dict:
    """Run in a child process: datasketch MinHashLSH vs numpy banding at n records."""
    from datasketch import LeanMinHash, MinHashLSH

    texts, _ = make_corpus(n, seed=3)
    sig = M.signatures(texts, NUM_PERM, NGRAM, SEED)
    del texts
    valid = ~M.is_empty(sig)
    params = M.lsh_params(THRESHOLD, NUM_PERM)
    with Meter() as mn:
        a = M._pairs_numpy(sig, valid, params)
    with Meter() as md:
        b = M._pairs_datasketch(sig, valid, THRESHOLD, SEED, params)
    same = set(zip(a[0].tolist(), a[1].tolist())) == set(zip(b[0].tolist(), b[1].tolist()))
    # memory of the index itself, traced while one is alive (LeanMinHash per record + tables);
    # RSS growth would hide it in memory freed earlier in this process
    import tracemalloc

    tracemalloc.start()
    lsh = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM, params=params)
    keep = []
    with lsh.insertion_session() as session:
        for r in range(len(sig)):
            m = LeanMinHash(seed=SEED, hashvalues=sig[r], scheme="affine32")
            keep.append(m)
            session.insert(r, m, check_duplication=False)
    grown = tracemalloc.get_traced_memory()[0] / 2**20
    tracemalloc.stop()
    return {
        "records": n,
        "numpy_banding_s": mn.wall, "datasketch_lsh_s": md.wall,
        "datasketch_index_mb": grown,
        "datasketch_index_mb_extrapolated_to_1M": grown * 1_000_000 / n,
        "datasketch_s_extrapolated_to_1M": md.wall * 1_000_000 / n,
        "numpy_signatures_mb_at_1M": 1_000_000 * NUM_PERM * 4 / 2**20,
        "same_candidate_pairs": same,
    }


def child(phase: str, n: int) -> dict:
    cmd = [sys.executable, __file__, "--child", phase, "--n", str(n)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"child {phase} failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="records for the dedup run")
    ap.add_argument("--baseline-n", type=int, default=20_000, help="texts for the datasketch baseline")
    ap.add_argument("--sig-n", type=int, default=200_000, help="texts for our signature throughput")
    ap.add_argument("--ds-lsh-n", type=int, default=100_000, help="records for the MinHashLSH check")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "minhash.json"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.child:
        res = phase_dedup(args.n) if args.child == "dedup" else phase_ds_lsh(args.n)
        print(json.dumps(res))
        return

    t0 = time.perf_counter()
    results = {
        "machine": {"cpus": len(os.sched_getaffinity(0)), "python": platform.python_version(),
                    "numpy": np.__version__, "platform": platform.platform()},
        "params": {"threshold": THRESHOLD, "num_perm": NUM_PERM, "ngram": NGRAM,
                   "lsh_bands_rows": list(M.lsh_params(THRESHOLD, NUM_PERM)),
                   "backend": M.BACKEND_NOTE},
    }
    import datasketch

    results["machine"]["datasketch"] = datasketch.__version__
    results["signatures"] = phase_signatures(args)
    results["dedup"] = child("dedup", args.n)
    results["datasketch_lsh"] = child("ds_lsh", args.ds_lsh_n)
    results["bench_wall_s"] = time.perf_counter() - t0

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print_report(results, out)


def print_report(r: dict, out: Path) -> None:
    s = r["signatures"]
    print(f"\nMinHash signatures ({NUM_PERM} perms, word {NGRAM}-grams, ~{s['mean_words']:.0f}-word texts, "
          f"{r['machine']['cpus']} CPUs)")
    print(f"{'method':48s} {'texts':>8s} {'texts/s':>10s} {'per CPU-s':>10s} {'x baseline':>10s} {'other load':>10s}")
    for row in s["throughput"]:
        other = "" if row["other_load_cores"] is None else f"{row['other_load_cores']:.2f} cores"
        cpu = "" if row["texts_per_cpu_s"] is None else f"{row['texts_per_cpu_s']:,.0f}"
        print(f"{row['method']:48s} {row['texts']:>8,d} {row['texts_per_s']:>10,.0f} {cpu:>10s} "
              f"{row['ratio_vs_baseline']:>9.1f}x {other:>10s}")
    j = s["jaccard_estimate"]
    print(f"rows equal to datasketch MinHash(hashfunc=shingle_hash32): {s['rows_equal_to_datasketch_with_same_shingle_hash']}")
    print(f"Jaccard estimate on {j['pairs']} planted pairs: mean |est - exact| = {j['ours_mean_abs_error']:.4f} "
          f"(bias {j['ours_mean_error']:+.4f}; binomial expectation {j['expected_mean_abs_error_128_perm']:.4f}; "
          f"datasketch {j['datasketch_mean_abs_error'] if j['datasketch_mean_abs_error'] is None else round(j['datasketch_mean_abs_error'], 4)} on {j['datasketch_pairs']})")
    d = r["dedup"]
    print(f"\nDedup of {d['records']:,} records (threshold {THRESHOLD}, LSH {d['lsh']} "
          f"{d['lsh_bands_rows'][0]}x{d['lsh_bands_rows'][1]}):")
    for k, v in d["steps"].items():
        print(f"  {k:20s} {v['wall_s']:7.2f} s wall {v['cpu_s']:7.2f} s CPU")
    print(f"  {'total':20s} {d['dedup_wall_s']:7.2f} s wall {d['dedup_cpu_s']:7.2f} s CPU "
          f"(other load {d['other_load_cores']:.2f} cores)")
    print(f"  peak RSS {d['peak_rss_mb']:,.0f} MB during dedup, texts included "
          f"(texts alone {d['rss_after_texts_mb']:,.0f} MB; generating them peaked at "
          f"{d['peak_rss_generating_corpus_mb']:,.0f} MB)")
    print(f"  {d['verified_pairs']:,} verified pairs, {d['groups']:,} groups, {d['records_dropped']:,} records dropped")
    print(f"  recall of planted pairs with exact Jaccard >= {THRESHOLD}: {d['recall_planted_exact_ge_threshold']:.4f}; "
          f"with exact Jaccard >= 0.85: {d['recall_planted_exact_ge_0.85']:.4f}; "
          f"planted pairs below {THRESHOLD} grouped: {d['grouped_planted_exact_lt_threshold']:.4f}")
    for k, v in d["planted_by_substitutions"].items():
        print(f"    {k} substituted words: {v['pairs']:>7,d} pairs, exact Jaccard {v['mean_exact_jaccard']:.3f}, "
              f"grouped {v['grouped']:.4f}")
    print(f"  found pairs with exact Jaccard >= {THRESHOLD}: {d['found_pairs_precision_exact_ge_threshold']:.4f} "
          f"(>= 0.7: {d['found_pairs_exact_ge_0.7']:.4f}; sample {d['found_pairs_sampled']:,})")
    x = r["datasketch_lsh"]
    print(f"\nLSH index at {x['records']:,} records: numpy banding {x['numpy_banding_s']:.2f} s; datasketch "
          f"MinHashLSH {x['datasketch_lsh_s']:.2f} s, index {x['datasketch_index_mb']:,.0f} MB "
          f"(~{x['datasketch_index_mb_extrapolated_to_1M']:,.0f} MB and ~{x['datasketch_s_extrapolated_to_1M']:.0f} s at 1M; "
          f"the numpy path holds {x['numpy_signatures_mb_at_1M']:,.0f} MB of signatures); "
          f"same candidate pairs: {x['same_candidate_pairs']}")
    print(f"\nwrote {out} ({r['bench_wall_s']:.0f} s)")


if __name__ == "__main__":
    main()
