"""How often does `make demo` end with no held-out set? (the pipeline's `--copy-retries` default)

The demo is 12 one-passage documents and `-n 12`: every passage is sampled once, and the hold-out
needs queries on 5 documents (``HoldoutOptions.min_documents``). The bundled model copies its
passage often enough that the filter (its copy guard, then the round trip) dropped up to 8 of the
12 queries, and then
`curate train runs/demo` had nothing to score on. This script runs the demo command on several
seeds twice, first answers only (``--copy-retries 0``) and at the pipeline's default (asked again
when the sample is the whole corpus), and counts the documents left with a query.

    python bench/demo_holdout.py --seeds 0 1 2 3 4 5 --out /tmp/demo-holdout \
        --json bench/results/demo-holdout.json

The two arms of a seed share one LLM answer cache, so the default arm's first answers are the
other arm's, and only the questions asked again differ. The bundled model's answers also follow
the batches the embedded server forms, so a seed is one draw, not a fixed outcome.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARMS = {"first-answers": ["--copy-retries", "0"], "default": []}


def one(seed: int, arm: str, out: Path) -> dict:
    run = out / f"seed{seed}" / arm
    proc = subprocess.run([sys.executable, "-m", "curate", "pipeline", str(REPO / "data" / "demo"), "--out", str(run),
                           "-n", "12", "--seed", str(seed), "--no-report",
                           "--cache", str(out / f"seed{seed}" / "llm.sqlite"), *ARMS[arm]],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"demo seed {seed} {arm} failed:\n{proc.stderr[-3000:]}")
    funnel = json.loads((run / "pipeline.json").read_text())
    gen, hold = funnel["generate"], funnel["holdout"]
    return {"seed": seed, "arm": arm, "copies_asked_again": gen["copies_asked_again"],
            "copies_left": gen["copies_left"], "kept": funnel["filter"]["records_kept"],
            "dropped": {step["step"]: step["records_dropped"] for step in funnel["filter"]["steps"]},
            "documents_with_queries": hold["documents_with_queries"], "eval_queries": hold["eval_queries"],
            "held_out": hold["documents_held_out"] > 0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--out", required=True, help="Run folders (a re-run resumes: a finished seed costs seconds).")
    ap.add_argument("--json", help="Write the results here.")
    args = ap.parse_args()
    runs = [one(seed, arm, Path(args.out)) for seed in args.seeds for arm in ARMS]
    for r in runs:
        print(f"seed {r['seed']} {r['arm']:<13} documents with a query {r['documents_with_queries']:>2} of 12, "
              f"held-out queries {r['eval_queries']}, copies asked again {r['copies_asked_again']}")
    summary = {arm: {"documents_with_queries": [r["documents_with_queries"] for r in runs if r["arm"] == arm],
                     "no_held_out_set": sum(not r["held_out"] for r in runs if r["arm"] == arm),
                     "seeds": len(args.seeds)} for arm in ARMS}
    print(json.dumps(summary, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps({"form": "data/demo, -n 12, the bundled SmolLM2-135M, 2 CPU cores",
                                               "summary": summary, "runs": runs}, indent=1) + "\n")


if __name__ == "__main__":
    main()
