#!/usr/bin/env python
"""False negatives per mining method on NFCorpus, and the miner at scale.

    .venv/bin/python bench/mine.py [--skip-scale] [--skip-st] [--st-range-500]
                                   [--scale-queries 100000 --scale-docs 1000000]

1. NFCorpus train (2,590 queries, 3,633 documents, about 40 relevant documents per query).
   The miner sees ONE labelled positive per query (the first document id in sorted order
   among those with the query's highest relevance); every other relevant document is
   hidden from it and used only to check: the false-negative rate is the share of mined
   negatives that the full train qrels call relevant (``--check-qrels``).  Bundled
   all-MiniLM-L6-v2, k = 4, methods naive, shift 10, window 30..100, abs 0.7,
   marginpos 0.05, percpos 0.95.  ``curate`` starts from an empty embedding cache under
   /tmp, so the first method's time includes encoding and later ones hit the cache.
   Baseline in the same run: sentence-transformers ``mine_hard_negatives`` (same model
   object, same one-positive pairs, same corpus) naive top-4 and ``relative_margin=0.05`` at
   its defaults (``sampling_strategy="top"``, automatic ``range_max``).  It encodes
   everything itself; its ``cache_folder`` lets the second run reuse the first one's
   embeddings (noted in the results).
   Target (PASS/FAIL): percpos 0.95 cuts naive's FN rate by >= 60 % while giving at least as
   many queries their 4 negatives as ``mine_hard_negatives(relative_margin=0.05)``.

2. Scale: random 384-d unit vectors (float32, seeded), ``--scale-queries`` queries against
   ``--scale-docs`` documents, run in a child process so its peak RSS is its own.  Each
   query is a noisy copy of one random document, which is its labelled positive, so the
   positive scores about 0.7 and percpos 0.95 has a real threshold to apply.  The teacher is
   bypassed: ``curate.mine.miner.mine`` (the function ``run_mine`` calls after encoding)
   gets the vectors and a ``SearchIndex`` directly.  Exact search would be ~4e13 flops on
   2 cores, so the default is ``--scale-index ivf``; ``--scale-nlist`` sets its list count
   (SearchIndex's automatic nlist is 4*sqrt(n) = 4,000 at 1M, whose k-means training over
   1M training points would itself cost about twice an exact search: see the results).
   Wall time per phase and peak RSS (VmHWM) — target < 4 GB.  The index holds 8-bit codes
   and rescores its candidates against the one float32 matrix, so afterwards the worker
   also checks, on ``--recall-queries`` queries, the share of the exact top-``depth`` that
   the index returned and that its scores are the exact inner products.

Prints a table and merges this run's parts into bench/results/mine.json (``scale`` for the
IVF run, ``scale_<index>`` for another index; parts not run are kept from the file).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from mine_scifact import Phase  # noqa: E402  (wall / cpu / other processes' load)

from curate.core.jsonl import atomic_write_json  # noqa: E402

NFCORPUS = REPO.parent / "shared" / "data" / "nfcorpus"
METHODS = [
    ("naive", dict(method="naive")),
    ("shift10", dict(method="shift", shift=10)),
    ("window30-100", dict(method="window", range_min=29, range_max=100)),  # ranks 30..100
    ("abs0.7", dict(method="abs", max_score=0.7)),
    ("marginpos0.05", dict(method="marginpos", absolute_margin=0.05)),
    ("percpos0.95", dict(method="percpos", relative_margin=0.05)),  # the share 0.95 of the positive
]
K = 4


def _vm_hwm_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def one_positive_qrels(full: dict[str, dict[str, int]]) -> dict[str, str]:
    """query id -> the first doc id (sorted) among those with the query's highest relevance."""
    out = {}
    for qid, rels in full.items():
        rels = {d: r for d, r in rels.items() if r >= 1}
        if rels:
            top = max(rels.values())
            out[qid] = sorted(d for d, r in rels.items() if r == top)[0]
    return out


# -- 1. NFCorpus --------------------------------------------------------------------------


def nfcorpus(args, tmp: Path) -> dict:
    os.environ["CURATE_CACHE_DIR"] = str(tmp / "curate-cache")
    from curate.datasets.beir import load_beir, read_qrels
    from curate.embed.cache import EmbeddingCache
    from curate.embed.teacher import Teacher
    from curate.mine.main import MineOptions, run_mine

    full_path = Path(args.data) / "qrels" / "train.tsv"
    full = read_qrels(full_path)
    one = one_positive_qrels(full)
    one_path = tmp / "train_one_positive.tsv"
    one_path.write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in one.items()))

    out: dict = {"data": {"path": str(args.data), "qrels_shown": "one positive per query (see docstring)",
                          "check_qrels": str(full_path), "k": K}, "curate": {}, "sentence_transformers": {}}
    teacher = Teacher(cache=EmbeddingCache(tmp / "curate-cache" / "embeddings"), batch_size=args.batch_size)
    t = time.perf_counter()
    teacher.model  # loaded outside the timings, as on the other side
    out["model_load_s"] = round(time.perf_counter() - t, 2)

    for name, kw in METHODS:
        enc0, hit0 = teacher.encoded, teacher.cache_hits
        with Phase() as ph:
            rep = run_mine(MineOptions(out=str(tmp / name), data=str(args.data), split="train", qrels=str(one_path),
                                       k=K, plots=False, check_qrels=str(full_path), **kw), teachers=[teacher])
        fn = rep["false_negatives"]
        hist = rep["negatives_per_query"]["histogram"]
        row = {"fn_rate": fn["rate"], "false_negatives": fn["false_negatives"],
               "negatives": fn["negatives_checked"], "queries_checked": fn["queries_checked"],
               "queries_in": rep["queries_in"], "queries_with_k": int(hist.get(str(K), 0)),
               "mean_negatives": rep["negatives_per_query"]["mean"],
               "queries_searched_deeper": rep["teachers"][0]["queries_searched_deeper"],
               "max_depth_searched": rep["teachers"][0]["max_depth_searched"],
               "texts_encoded": teacher.encoded - enc0, "cache_hits": teacher.cache_hits - hit0,
               **ph.result, "timings": rep["timings"]}
        out["curate"][name] = row
        print(f"curate {name}: {row}", flush=True)

    if not args.skip_st:
        out["sentence_transformers"] = st_baseline(args, tmp, teacher.model, full, one)
    return out


def st_baseline(args, tmp: Path, model, full, one) -> dict:
    from datasets import Dataset
    from sentence_transformers.util import mine_hard_negatives

    from curate.datasets.beir import load_beir

    data = load_beir(args.data, "train")
    qids = [q for q in one if q in data.queries and one[q] in data.corpus]
    ds = Dataset.from_dict({"query": [data.queries[q] for q in qids], "positive": [data.corpus[one[q]] for q in qids]})
    corpus = list(data.corpus.values())
    ids_by_text: dict[str, list[str]] = {}
    for d, text in data.corpus.items():
        ids_by_text.setdefault(text, []).append(d)
    qids_by_text: dict[str, list[str]] = {}
    for q in qids:
        qids_by_text.setdefault(data.queries[q], []).append(q)
    cache = tmp / "st-cache"
    results = {}
    runs = [("naive", {}), ("relative_margin0.05", {"relative_margin": 0.05})]
    if args.st_range_500:
        runs.append(("relative_margin0.05_range500", {"relative_margin": 0.05, "range_max": 500}))
    for i, (name, kw) in enumerate(runs):
        with Phase() as ph:
            res = mine_hard_negatives(ds, model, corpus=corpus, num_negatives=K, output_format="labeled-list",
                                      output_scores=True, verbose=False, batch_size=args.batch_size,
                                      cache_folder=str(cache), **kw)
        negs = fns = with_k = 0
        rows = 0
        for row in res:
            rows += 1
            relevant = set()
            for q in qids_by_text.get(row["query"], []):
                relevant |= {d for d, r in full.get(q, {}).items() if r >= 1}
            got = row["positive"][1:]
            negs += len(got)
            with_k += len(got) >= K
            fns += sum(any(d in relevant for d in ids_by_text.get(t, [])) for t in got)
        r = {"fn_rate": round(fns / negs, 4) if negs else None, "false_negatives": fns, "negatives": negs,
             "queries_out": rows, "queries_with_k": with_k, "mean_negatives": round(negs / max(rows, 1), 3),
             "range_max": kw.get("range_max", "auto"), "sampling_strategy": "top (default)",
             "embeddings": "encoded by this run" if i == 0 else "read from the first run's cache_folder",
             **ph.result}
        results[name] = r
        print(f"st {name}: {r}", flush=True)
    return results


# -- 2. scale -----------------------------------------------------------------------------


def scale_worker(args) -> dict:
    """Runs in a child process: random vectors -> SearchIndex -> miner.mine."""
    import numpy as np

    from curate.negatives.search import SearchIndex
    from curate.mine.inputs import MineItem
    from curate.negatives.presets import Method
    from curate.mine.miner import MineConfig, mine

    res: dict = {"queries": args.scale_queries, "documents": args.scale_docs, "dim": 384, "k": K,
                 "index": args.scale_index, "method": "percpos 0.95", "depth": 100}
    rng = np.random.default_rng(args.seed)
    t, c = time.perf_counter(), time.process_time()
    dvecs = np.empty((args.scale_docs, 384), dtype=np.float32)
    for s in range(0, args.scale_docs, 100_000):
        block = rng.standard_normal((min(100_000, args.scale_docs - s), 384), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        dvecs[s:s + len(block)] = block
    pos = rng.integers(0, args.scale_docs, size=args.scale_queries)
    qvecs = rng.standard_normal((args.scale_queries, 384), dtype=np.float32)
    qvecs /= np.linalg.norm(qvecs, axis=1, keepdims=True)
    qvecs = 0.7 * dvecs[pos] + np.float32(np.sqrt(1 - 0.49)) * qvecs  # cos(query, positive) ~ 0.7
    qvecs /= np.linalg.norm(qvecs, axis=1, keepdims=True)
    items = [MineItem(key=str(i), query=f"q{i}", positives=[int(p)], record_id=str(i),
                      exclude=np.array([p], dtype=np.int64)) for i, p in enumerate(pos)]
    res["generate_s"] = round(time.perf_counter() - t, 2)
    res["generate_cpu_s"] = round(time.process_time() - c, 2)
    res["rss_after_data_mb"] = round(_vm_hwm_mb())

    t, c = time.perf_counter(), time.process_time()
    kw = {"nlist": args.scale_nlist} if args.scale_index == "ivf" and args.scale_nlist else {}
    index = SearchIndex(dvecs, args.scale_index, **kw)
    res["index_build_s"] = round(time.perf_counter() - t, 2)
    res["index_build_cpu_s"] = round(time.process_time() - c, 2)
    res["index_info"] = index.describe()
    res["rss_after_index_mb"] = round(_vm_hwm_mb())

    cfg = MineConfig(method=Method.make("percpos", relative_margin=0.05), k=K)
    t, c = time.perf_counter(), time.process_time()
    mined = mine(qvecs, dvecs, index, items, cfg)
    res["mine_s"] = round(time.perf_counter() - t, 2)
    res["mine_cpu_s"] = round(time.process_time() - c, 2)  # comparable when other work shares the cores
    n = np.array([len(m.docs) for m in mined])
    res["queries_with_k"] = int((n >= K).sum())
    res["mean_negatives"] = round(float(n.mean()), 3)
    res["queries_searched_deeper"] = int(sum(m.rounds > 1 for m in mined))
    res["max_depth_searched"] = int(max(m.depth for m in mined))
    res["mean_positive_score"] = round(float(np.mean([m.lowest_positive for m in mined])), 4)
    res["wall_s"] = round(res["generate_s"] + res["index_build_s"] + res["mine_s"], 2)
    import resource

    res["peak_rss_mb"] = round(_vm_hwm_mb())
    res["ru_maxrss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    res["target_rss_under_4gb"] = "PASS" if res["peak_rss_mb"] < 4096 else "FAIL"
    res.update(search_quality(index, qvecs[:args.recall_queries], dvecs, cfg.depth + 1))
    return res


def search_quality(index, q, dvecs, depth: int) -> dict:
    """Recall of the index's top ``depth`` against exact search, and its scores' error."""
    import faiss
    import numpy as np

    if len(q) == 0:
        return {}
    _, exact = faiss.knn(q, dvecs, depth, faiss.METRIC_INNER_PRODUCT)
    scores, ids = index.search(q, depth)
    recall = np.mean([len(set(a.tolist()) & set(b.tolist())) / depth for a, b in zip(ids, exact)])
    true = np.einsum("qkd,qd->qk", dvecs[np.maximum(ids, 0)], q)
    err = float(np.abs(np.where(ids >= 0, scores - true, 0)).max())
    return {"recall_check": {"queries": len(q), "depth": depth, "recall_vs_exact": round(float(recall), 4),
                             "max_score_error": err}}


def scale(args) -> dict:
    cmd = [sys.executable, __file__, "--scale-worker", "--scale-queries", str(args.scale_queries),
           "--scale-docs", str(args.scale_docs), "--scale-index", args.scale_index,
           "--scale-nlist", str(args.scale_nlist), "--seed", str(args.seed),
           "--recall-queries", str(args.recall_queries)]
    with Phase() as ph:
        p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": p.stderr[-3000:], "returncode": p.returncode}
    res = json.loads(p.stdout.strip().splitlines()[-1])
    res["process_wall_s"] = ph.result["wall_s"]
    res["other_load_cores"] = ph.result["other_load_cores"]
    return res


# -- table --------------------------------------------------------------------------------


def verdict(nf: dict) -> dict:
    cur = nf["curate"]
    naive, pp = cur["naive"]["fn_rate"], cur["percpos0.95"]["fn_rate"]
    cut = 1 - pp / naive if naive else None
    st = nf.get("sentence_transformers", {}).get("relative_margin0.05")
    st_k = st["queries_with_k"] if st else None
    ok = cut is not None and cut >= 0.6 and (st_k is None or cur["percpos0.95"]["queries_with_k"] >= st_k)
    return {"fn_cut_vs_naive": round(cut, 4) if cut is not None else None,
            "percpos_queries_with_k": cur["percpos0.95"]["queries_with_k"],
            "st_relative_margin_queries_with_k": st_k,
            "result": ("PASS" if ok else "FAIL") + ("" if st else " (no sentence-transformers baseline run)")}


def table(results: dict) -> None:
    nf = results.get("nfcorpus")
    if nf:
        print(f"\nNFCorpus train, one positive shown, k={K} (FN = share of mined negatives labelled relevant)")
        print(f"{'method':36} {'FN rate':>8} {'with 4':>12} {'neg/query':>9} {'wall s':>8}")
        rows = [(f"curate {n}", r) for n, r in nf["curate"].items()]
        rows += [(f"st {n}", r) for n, r in nf.get("sentence_transformers", {}).items()]
        for name, r in rows:
            q = r.get("queries_in", r.get("queries_out"))
            print(f"{name:36} {r['fn_rate']:>8.1%} {r['queries_with_k']:>6}/{q:<5} {r['mean_negatives']:>9.2f}"
                  f" {r['wall_s']:>8.1f}")
        v = results["target"]
        print(f"target: percpos cuts naive FN by {v['fn_cut_vs_naive']:.1%} (>= 60%), {v['percpos_queries_with_k']} "
              f"queries with 4 vs st relative_margin {v['st_relative_margin_queries_with_k']}: {v['result']}")
    for key in sorted(k for k in results if k.startswith("scale")):
        sc = results[key]
        if "error" in sc:
            print(f"\n{key}: ERROR\n" + sc["error"])
        else:
            rc = sc.get("recall_check", {})
            print(f"\n{key}: {sc['queries']:,} queries x {sc['documents']:,} docs, {sc['index_info']}, k={K}: "
                  f"generate {sc['generate_s']}s, index {sc['index_build_s']}s, mine {sc['mine_s']}s "
                  f"(wall {sc['wall_s']}s); peak RSS {sc['peak_rss_mb']} MB ({sc['target_rss_under_4gb']} < 4 GB); "
                  f"{sc['queries_with_k']} queries with 4, {sc['queries_searched_deeper']} searched deeper; "
                  f"recall@{rc.get('depth')} vs exact {rc.get('recall_vs_exact')} on {rc.get('queries')} queries")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(NFCORPUS))
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--skip-scale", action="store_true")
    ap.add_argument("--skip-nfcorpus", action="store_true")
    ap.add_argument("--skip-st", action="store_true", help="no sentence-transformers baseline")
    ap.add_argument("--st-range-500", action="store_true", help="also relative_margin=0.05 with range_max=500")
    ap.add_argument("--scale-queries", type=int, default=100_000)
    ap.add_argument("--scale-docs", type=int, default=1_000_000)
    ap.add_argument("--scale-index", default="ivf", choices=["flat", "ivf", "hnsw"])
    ap.add_argument("--scale-nlist", type=int, default=1024, help="IVF lists (0: SearchIndex's automatic 4*sqrt(n))")
    ap.add_argument("--recall-queries", type=int, default=200, help="scale: queries checked against exact search")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scale-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "mine.json"))
    args = ap.parse_args()
    if args.scale_worker:
        print(json.dumps(scale_worker(args)))
        return

    out = Path(args.out)
    results: dict = json.loads(out.read_text()) if out.exists() else {}  # parts not run this time are kept
    results["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version()}
    tmp = Path(tempfile.mkdtemp(prefix="mine-bench-"))
    if not args.skip_scale:  # first, before the model is loaded (its own process anyway)
        key = "scale" if args.scale_index == "ivf" else f"scale_{args.scale_index}"
        results[key] = scale(args)
        print(f"{key}:", results[key], flush=True)
    if not args.skip_nfcorpus:
        results["nfcorpus"] = nfcorpus(args, tmp)
        results["target"] = verdict(results["nfcorpus"])
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out, results)
    table(results)


if __name__ == "__main__":
    main()
