#!/usr/bin/env python
"""Does training on the teacher's scores make a better student? (issue 41)

    .venv/bin/python bench/teacher_scores.py                       # SciFact, the reduced CPU form
    .venv/bin/python bench/teacher_scores.py --seed 0 --arm default --arm distill-kl
    .venv/bin/python bench/teacher_scores.py --grid scifact-zero-label-distill    # no labels
    .venv/bin/python bench/teacher_scores.py --grid nfcorpus-distill              # NFCorpus
    .venv/bin/python bench/teacher_scores.py --grid nq-utd-distill                # NQ-UTD, half held out
    .venv/bin/python bench/teacher_scores.py --grid nq-utd-zero-label-distill     # (and nfcorpus-...)

Runs ``curate ablate bench/grids/scifact-distill.yaml`` as a user would (resumable: a second call
continues where the first stopped): one mined set exported once per seed and trained with each
loss (``train:``), the teacher's scores from the mining teacher (the bundled MiniLM, which is the
student) or from BM25 mixed into it (``mine --scores hybrid``), against the untrained student and
sentence-transformers' own recipe. ``--grid scifact-zero-label-distill``: the same losses on queries
the bundled LLM writes for 150 SciFact passages (no label read before the evaluation). Writes
``bench/results/teacher-scores-train-GRID.json`` and
prints the table: NDCG@10 mean ± std per arm, with the difference to the untrained model.

The CPU form: 40 steps of 16 rows, texts cut to 64 tokens while training, a seeded subset of 640
training queries (the same for every arm), evaluation on Linq's light test set, seeds 0-2.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
CPU_FORM = ["--steps", "40", "--queries", "640", "--max-seq-length", "64", "--light"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grid", default="scifact-distill", help="A grid of bench/grids (name without .yaml).")
    ap.add_argument("--arm", action="append", default=[], help="Only these arms (repeatable).")
    ap.add_argument("--seed", action="append", type=int, default=[], help="Only these seeds (repeatable).")
    ap.add_argument("--runs", default=str(REPO / "runs"), help="Where the grid keeps its runs.")
    ap.add_argument("--report-only", action="store_true", help="Gather what has finished; train nothing.")
    args = ap.parse_args()

    grid = REPO / "bench" / "grids" / f"{args.grid}.yaml"
    budget = yaml.safe_load(grid.read_text())["budget"]
    form = CPU_FORM if budget["steps"] > 40 else []  # a grid whose own budget is the CPU form runs as written
    out = Path(args.runs) / (f"ablate-{args.grid}-cpu" if form else f"ablate-{args.grid}")
    cmd = [sys.executable, "-m", "curate", "ablate", str(grid), "--out", str(out), *form]
    picked = [x for a in args.arm for x in ("--arm", a)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if not args.report_only:
        for seed in args.seed or [0, 1, 2]:  # seed by seed: every arm has a result before any has three
            if subprocess.run([*cmd, *picked, "--seed", str(seed)], cwd=REPO, env=env).returncode != 0:
                sys.exit(f"curate ablate {args.grid} failed")
    if subprocess.run([*cmd, "--report", *picked], cwd=REPO, env=env).returncode != 0:
        sys.exit(f"curate ablate {args.grid} --report failed")
    report = json.loads((out / "ablate_report.json").read_text())
    path = REPO / "bench" / "results" / f"teacher-scores-train-{args.grid}.json"
    machine = {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()}
    keep = ("title", "budget", "queries", "seeds", "best_baseline", "summary")
    path.write_text(json.dumps({"form": "cpu", "machine": machine, **{k: report.get(k) for k in keep}},
                               indent=1) + "\n")
    print(table(report["summary"]))
    print(f"\nwrote {path}")


def table(summary: list[dict]) -> str:
    lines = ["| arm | NDCG@10 | vs untrained | seeds |", "| --- | --- | --- | --- |"]
    for row in summary:
        if row.get("mean") is None:  # an arm with no finished run yet
            lines.append(f"| {row['arm']} | not run | | 0 |")
            continue
        spread = f" ± {row['std']:.4f}" if len(row["values"]) > 1 else ""
        lines.append(f"| {row['arm']} | {row['mean']:.4f}{spread} | {row['vs_base']:+.4f} | {len(row['values'])} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
