#!/usr/bin/env python
"""The stages that reach past one machine, measured on the local Ray instance.

    .venv/bin/python bench/scale.py [--parts mine,dedup,generate] [--workers 2]
        [--mine-docs 10000000 --mine-queries 1000] [--dedup-texts 10000000] [--requests 1024 --servers 8]

1. ``mine``: sharded search (``curate.negatives.sharded.ShardedIndex``, what ``curate mine
   --executor ray`` searches with) over ``--mine-docs`` random 384-d unit vectors, each Ray worker
   making and indexing its own contiguous shard (flat: exact), against one process holding
   one flat ``SearchIndex`` over all of them (a child process, run after the workers are gone).
   ``--mine-queries`` random queries, top 100 (the miner's first window). Per arm: the time to
   make the vectors, the search's time and queries a second, and the peak memory (VmHWM) of
   every process that held vectors.
2. ``dedup``: near-duplicate groups of ``--dedup-texts`` generated short texts (8-16 words from
   a 20,000-word vocabulary, every 20th a copy of an earlier one with a word added),
   staged on Ray (``curate.dedup.staged.staged_groups``: signatures as a map, band buckets by
   key, components in the driver) against one process (``curate.dedup.minhash``: signatures, numpy
   banding, union-find). Word 3-grams, threshold 0.8, 128 permutations: the filter's defaults.
   Per arm: wall time, texts a second, the groups found (the arms must agree) and peak memory
   of the driver and of every Ray worker process: VmHWM, and the private memory sampled every
   0.2 s (VmHWM counts the pages of Ray's shared object store a worker wrote or read, so it
   overstates what the worker itself holds).

3. ``generate``: one ``curate generate`` client feeding ``--servers`` scripted servers
   (tests/fake_llm_server.py) against one server. Each answer takes 0.5 s and the client keeps 8
   requests in flight per server (``--concurrency`` is per server), as a server whose batch is
   full would: one server can give 16 requests a second, 8 servers 128. ``--requests`` items,
   one request each; wall time of the whole command.

Each part runs its arms in turn, never together, so one arm's memory is not the other's.
Writes bench/results/scale.json (parts not run are kept from the file).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results" / "scale.json"
DIM, TOP = 384, 100
BLOCK = 250_000  # vectors made at a time (float32, no float64 temporaries)


def vm_hwm_gb(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 2**20, 3)
    return 0.0


def ray_workers() -> list[str]:
    """The pids of every Ray worker process on this machine."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes()
            except OSError:
                continue
            if b"default_worker.py" in cmd or cmd.startswith(b"ray::"):
                pids.append(d.name)
    return pids


def ray_worker_peaks() -> list[float]:
    """Peak memory (VmHWM) of every Ray worker process on this machine."""
    peaks = []
    for pid in ray_workers():
        try:
            peaks.append(vm_hwm_gb(pid))
        except OSError:
            pass
    return sorted(peaks, reverse=True)


def _private_gb(pid: str) -> float:
    """Memory a process holds alone (private pages): not the object store's shared pages it maps."""
    total = 0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith(("Private_Clean:", "Private_Dirty:")):
            total += int(line.split()[1])
    return total / 2**20


class PrivatePeaks:
    """Samples (every 0.2 s) the private memory of this process and every Ray worker; the peak
    per process. VmHWM alone counts the shared object-store pages a worker wrote or read."""

    def __init__(self):
        import threading

        self.peaks: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        me = str(os.getpid())
        while not self._stop.wait(0.2):
            for pid in [me, *ray_workers()]:
                try:
                    self.peaks[pid] = max(self.peaks.get(pid, 0.0), _private_gb(pid))
                except OSError:
                    continue

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict:
        me = str(os.getpid())
        workers = sorted((v for k, v in self.peaks.items() if k != me), reverse=True)
        return {"driver_private_peak_gb": round(self.peaks.get(me, 0.0), 3),
                "worker_private_peak_gb": [round(v, 3) for v in workers[:8]]}


class MakeVectors:
    """Random unit vectors, rows [start, start + count) of one seeded corpus."""

    def __init__(self, start: int, count: int, seed: int = 0):
        self.start, self.count, self.seed = start, count, seed

    def __call__(self) -> np.ndarray:
        """Block g of the corpus (rows g*BLOCK ...) comes from seed (seed, g), whoever makes it."""
        out = np.empty((self.count, DIM), np.float32)
        end = self.start + self.count
        for g in range(self.start // BLOCK, -(-end // BLOCK)):
            lo, hi = max(self.start, g * BLOCK), min(end, (g + 1) * BLOCK)
            block = np.random.default_rng([self.seed, g]).standard_normal((BLOCK, DIM), dtype=np.float32)
            block = block[lo - g * BLOCK:hi - g * BLOCK]
            out[lo - self.start:hi - self.start] = block / np.linalg.norm(block, axis=1, keepdims=True)
        return out


def _queries(n: int) -> np.ndarray:
    q = np.random.default_rng(99).standard_normal((n, DIM), dtype=np.float32)
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def _one_flat(docs: int, queries: int, out) -> None:
    from curate.negatives.search import SearchIndex

    t = time.perf_counter()
    vectors = MakeVectors(0, docs)()  # the same corpus the shards make
    made = time.perf_counter() - t
    index = SearchIndex(vectors, "flat", use_gpu=False)
    t = time.perf_counter()
    scores, ids = index.search(_queries(queries), TOP)
    out.put({"make_s": round(made, 1), "search_s": round(time.perf_counter() - t, 1),
             "peak_gb": vm_hwm_gb(), "ids": ids[:, :10].tolist()})


def bench_mine(docs: int, queries: int, workers: int) -> dict:
    from curate.core.executor import Executor, split
    from curate.negatives.sharded import ShardedIndex

    import ray

    rows = split(range(docs), workers)
    t = time.perf_counter()
    index = ShardedIndex(None, "flat", Executor("ray", workers),
                         shard_makers=[(MakeVectors(r[0], len(r)), len(r)) for r in rows])
    q = _queries(queries)
    with PrivatePeaks() as peaks:
        index.search(q[:1], 1)  # every worker has made and indexed its shard
        made = time.perf_counter() - t
        t = time.perf_counter()
        scores, ids = index.search(q, TOP)
        searched = time.perf_counter() - t
    sharded = {"workers": workers, "shards": index.shards, "make_s": round(made, 1), "search_s": round(searched, 1),
               "queries_per_s": round(queries / searched, 1), "worker_peak_gb": ray_worker_peaks()[:workers],
               "driver_peak_gb": vm_hwm_gb(), **peaks.summary()}
    index.close()
    ray.shutdown()
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_one_flat, args=(docs, queries, out))
    proc.start()
    one = out.get()
    proc.join()
    same = one.pop("ids") == ids[:, :10].tolist()
    one["queries_per_s"] = round(queries / one["search_s"], 1)
    return {"docs": docs, "dim": DIM, "queries": queries, "top": TOP, "sharded": sharded, "one_process": one,
            "same_top10": same, "search_speedup": round(one["search_s"] / sharded["search_s"], 2)}


def make_texts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(20_000)]
    texts = []
    for i in range(n):
        if i % 20 == 19 and i > 100:
            texts.append(texts[rng.randrange(i - 100, i)] + " " + rng.choice(vocab))
        else:
            texts.append(" ".join(rng.choices(vocab, k=rng.randint(8, 16))))
    return texts


def _local_dedup(n: int, out) -> None:
    from curate.dedup.minhash import signatures, similar_pairs, union_find_groups

    texts = make_texts(n)
    t = time.perf_counter()
    with PrivatePeaks() as peaks:
        sig = signatures(texts, ngram=3)
        i, j, _ = similar_pairs(sig, 0.8, lsh="numpy")
        groups = union_find_groups(i, j)
    out.put({"wall_s": round(time.perf_counter() - t, 1), "groups": len(groups),
             "members": sum(len(g) for g in groups), "peak_gb": vm_hwm_gb(),
             "private_peak_gb": peaks.summary()["driver_private_peak_gb"]})


def _staged_dedup(n: int, workers: int, out) -> None:
    from curate.core.executor import Executor
    from curate.dedup.staged import staged_groups

    texts = make_texts(n)
    made = vm_hwm_gb()
    t = time.perf_counter()
    with PrivatePeaks() as peaks:
        res = staged_groups([(texts, 3, 0.8)], Executor("ray", workers))
    wall = time.perf_counter() - t
    out.put({"wall_s": round(wall, 1), "groups": len(res.groups), "members": sum(len(g) for g in res.groups),
             "candidates": res.candidates, "driver_peak_gb": vm_hwm_gb(), "driver_peak_after_texts_gb": made,
             "worker_peak_gb": ray_worker_peaks()[:8], **peaks.summary()})


def bench_dedup(n: int, workers: int) -> dict:
    ctx = mp.get_context("spawn")
    result = {"texts": n, "threshold": 0.8, "ngram": 3, "num_perm": 128}
    for name, target, args in (("staged", _staged_dedup, (n, workers)), ("one_process", _local_dedup, (n,))):
        out = ctx.Queue()
        proc = ctx.Process(target=target, args=(*args, out))
        proc.start()
        result[name] = out.get()
        proc.join()
        result[name]["texts_per_s"] = round(n / result[name]["wall_s"])
    result["same_groups"] = (result["staged"]["groups"], result["staged"]["members"]) == (
        result["one_process"]["groups"], result["one_process"]["members"])
    return result


def bench_generate(requests: int, servers: int) -> dict:
    import contextlib
    import subprocess
    import tempfile

    from tests.fake_llm_server import fake_llm_server

    latency, per_server = 0.5, 8
    env = {**os.environ, "OPENAI_API_KEY": "bench", "NO_COLOR": "1"}
    env.pop("OPENAI_BASE_URL", None)
    out = {"requests": requests, "latency_s": latency, "in_flight_per_server": per_server}
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        fakes = [stack.enter_context(fake_llm_server()) for _ in range(servers)]
        tasks = Path(tmp) / "tasks.jsonl"
        tasks.write_text("".join(json.dumps({"task": f"FAULTS[slow{latency}] Given question {i}, find passages."})
                                 + "\n" for i in range(requests)))
        for name, urls in (("one_server", fakes[:1]), (f"{servers}_servers", fakes)):
            folder = Path(tmp) / name
            t = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "curate", "generate", "--task", "short-long", "-n",
                                   str(requests), "--per-task", "1", "--tasks-file", str(tasks), "--out", str(folder),
                                   *(a for f in urls for a in ("--base-url", f.base_url)), "--model", "fake",
                                   "--concurrency", str(per_server), "--max-reasks", "0"],
                                  cwd=ROOT, env=env, capture_output=True, text=True)
            wall = time.perf_counter() - t
            if proc.returncode != 0:
                sys.exit(f"curate generate failed:\n{proc.stderr[-2000:]}")
            made = sum(1 for _ in open(folder / "generated.jsonl"))
            out[name] = {"servers": len(urls), "wall_s": round(wall, 1), "records": made,
                         "requests_per_s": round(requests / wall, 1),
                         "ideal_per_s": len(urls) * per_server / latency,
                         "requests_per_server": [sum(r.method == "POST" for r in f.requests) for f in urls]}
            for f in urls:
                f.reset()
    out["speedup"] = round(out[f"{servers}_servers"]["requests_per_s"] / out["one_server"]["requests_per_s"], 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--parts", default="mine,dedup,generate")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--mine-docs", type=int, default=10_000_000)
    ap.add_argument("--mine-queries", type=int, default=1000)
    ap.add_argument("--dedup-texts", type=int, default=10_000_000)
    ap.add_argument("--requests", type=int, default=1024)
    ap.add_argument("--servers", type=int, default=8)
    args = ap.parse_args()
    os.environ.setdefault("RAY_worker_niceness", "0")
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    parts = args.parts.split(",")
    if "mine" in parts:
        results["mine"] = bench_mine(args.mine_docs, args.mine_queries, args.workers)
        print(json.dumps(results["mine"], indent=1))
    if "dedup" in parts:
        results["dedup"] = bench_dedup(args.dedup_texts, args.workers)
        print(json.dumps(results["dedup"], indent=1))
    if "generate" in parts:
        results["generate"] = bench_generate(args.requests, args.servers)
        print(json.dumps(results["generate"], indent=1))
    results["machine"] = {"cpus": os.cpu_count(), "ram_gb": round(os.sysconf("SC_PAGE_SIZE") *
                                                                 os.sysconf("SC_PHYS_PAGES") / 2**30, 1)}
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
