"""Does the held-out number move with the truth? (issue 44, "the number is honest")

`curate pipeline` holds out a fifth of the documents and `curate train` scores the model on their
LLM-written queries. Those queries are not real ones, so this script checks that the number they
give moves the way real relevance labels do: for each collection, the corpus alone goes through
`curate pipeline` (bundled CPU model) and `curate train`, several seeds, and the model is scored
before and after both on the held-out set and on the collection's own test qrels.

    python bench/holdout_truth.py --collections nq-utd scifact nfcorpus --seeds 0 1 2 -n 200 \
        --steps 30 --out /work/bench/holdout-truth --json bench/results/holdout-truth.json

Reduced CPU form: the bundled model writes the queries once a collection (-n passages, one query
each, ~15 a minute on 2 cores: the cost of the run); each seed is another held-out split of them
(``--eval-seed``) and another training order (``curate train --seed``), --steps of 16 rows. The
verdict per collection is whether the mean before -> after change has the same sign on both sets,
and each set's seed spread. (``--fresh-queries`` writes new queries a seed: the full form.)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def curate(*args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "curate", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"curate {' '.join(args)} failed:\n{proc.stderr[-3000:]}")


def one(collection: str, seed: int, args) -> dict:
    data = SHARED / collection
    # one run folder a collection: generate and filter are "done earlier" for the next seed, and the
    # held-out split, mine, export and train run again (their options changed)
    run = Path(args.out) / collection / (f"seed{seed}" if args.fresh_queries else "run")
    started = time.perf_counter()
    curate("pipeline", str(data / "corpus.jsonl"), "--out", str(run), "-n", str(args.n),
           "--seed", str(seed if args.fresh_queries else 0), "--eval-seed", str(seed), "--no-report", "--no-plots")
    train = ["train", str(run), "--eval", str(data), "--steps", str(args.steps), "--seed", str(seed)]
    curate(*train, *(["--light"] if args.light else []))
    report = json.loads((run / "train" / "report.json").read_text())
    shutil.copy(run / "train" / "report.json", run / f"train-report-seed{seed}.json")
    held, real = report["evaluations"]
    return {"seed": seed, "held_out": {"queries": held["queries"], "before": held["before"], "after": held["after"]},
            "real": {"queries": real["queries"], "before": real["before"], "after": real["after"]},
            "rows": report["training"]["rows"], "loss": report["loss"], "seconds": round(time.perf_counter() - started)}


def summary(runs: list[dict], metric: str = "ndcg@10") -> dict:
    def deltas(side):
        return [r[side]["after"][metric] - r[side]["before"][metric] for r in runs]

    out = {}
    for side in ("held_out", "real"):
        d = deltas(side)
        out[side] = {"mean_delta": round(statistics.mean(d), 4),
                     "spread": round(statistics.stdev(d), 4) if len(d) > 1 else None, "deltas": [round(x, 4) for x in d]}
    out["same_direction"] = (out["held_out"]["mean_delta"] > 0) == (out["real"]["mean_delta"] > 0)
    return out


def parser(doc: str, n: int) -> argparse.ArgumentParser:
    """The options a pipeline-then-train benchmark takes (this one's and ``pick_truth.py``'s)."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--collections", nargs="+", default=["nq-utd", "scifact", "nfcorpus"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("-n", type=int, default=n)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--light", action="store_true")
    ap.add_argument("--out", required=True)
    ap.add_argument("--json", default=None)
    return ap


def main() -> None:
    ap = parser(__doc__, 60)
    ap.add_argument("--fresh-queries", action="store_true", help="new queries a seed (-n LLM calls each)")
    args = ap.parse_args()
    run_all(args, one, summary, fresh_queries=args.fresh_queries)


def run_all(args, one, summary, **budget) -> None:
    """Every collection and seed through ``one``; its ``summary`` printed and the JSON written after
    each collection, so a long run's finished parts are kept. ``budget``: more of what the run used."""
    results = {}
    for c in args.collections:
        runs = [one(c, s, args) for s in args.seeds]
        results[c] = {"runs": runs, "summary": summary(runs)}
        print(c, json.dumps(results[c]["summary"]), flush=True)
        doc = {"budget": {"n": args.n, "steps": args.steps, "batch_size": 16, "light": args.light,
                          "seeds": args.seeds, **budget, "machine": f"{os.cpu_count()} CPU cores, no GPU"},
               "results": results}
        if args.json:
            Path(args.json).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
