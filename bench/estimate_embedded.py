#!/usr/bin/env python
"""Is the time `curate generate` estimates once the first answers are in right on the embedded model?

    .venv/bin/python bench/estimate_embedded.py                 # 3 runs of 40 SciFact passages
    .venv/bin/python bench/estimate_embedded.py --n 80 --seeds 0 1

Each run is `curate generate --from-corpus DOCS` on the bundled SmolLM2-135M (llama.cpp, the
embedded CPU default, its 4 slots) over the first 300 SciFact abstracts, a different seed each
(so no answer comes from the cache). The figure: the estimate of the whole queue's time that the
stage prints once the first wave of answers is in (``report.json``: ``estimate.seconds``), against
the time the queue really took (``wall_seconds``); the target is a ratio within 1/1.5 and 1.5.
Writes ``bench/results/estimate_embedded.json``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCIFACT = REPO.parent / "shared" / "data" / "scifact" / "corpus.jsonl"
MEASURED = re.compile(r"^generate: estimate ~\S+ in all .*$", re.M)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--work", default=str(REPO / "runs" / "estimate-embedded"))
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "estimate_embedded.json"))
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    docs = work / "abstracts.jsonl"
    with open(SCIFACT, encoding="utf-8") as fh:
        docs.write_text("".join(line for _, line in zip(range(300), fh)), encoding="utf-8")
    runs = []
    for seed in args.seeds:
        out = work / f"seed{seed}"
        subprocess.run(["rm", "-rf", str(out)], check=True)
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "curate", "generate", "--from-corpus", str(docs),
                               "-n", str(args.n), "--seed", str(seed), "--out", str(out)],
                              cwd=REPO, capture_output=True, text=True, env={"NO_COLOR": "1", **_env()})
        whole = time.perf_counter() - t
        if proc.returncode:
            sys.exit(proc.stderr[-3000:])
        family = json.loads((out / "report.json").read_text())["families"]["from-corpus"]
        line = MEASURED.search(proc.stderr)
        est, actual = family["estimate"]["seconds"], family["wall_seconds"]
        runs.append({"seed": seed, "requests": family["estimate"]["requests"], "estimate_s": est, "actual_s": actual,
                     "ratio": round(est / actual, 3) if est and actual else None, "process_s": round(whole, 1),
                     "line": line[0] if line else None})
        print(json.dumps(runs[-1]), flush=True)
    ratios = [r["ratio"] for r in runs if r["ratio"] is not None]
    result = {"model": "bundled SmolLM2-135M-Instruct (embedded llama.cpp, 4 slots)", "n": args.n, "runs": runs,
              "ratio_min": min(ratios) if ratios else None, "ratio_max": max(ratios) if ratios else None,
              "within_1_5": bool(ratios) and all(1 / 1.5 <= r <= 1.5 for r in ratios)}
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.pop("OPENAI_BASE_URL", None)
    return env


if __name__ == "__main__":
    main()
