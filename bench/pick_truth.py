"""Does ``curate train --loss pick`` choose the loss the real queries favour? (issue 53, item 5)

``--loss pick`` trains each candidate loss on a run's export and keeps the one its held-out
queries (LLM-written, for documents kept out of training) score highest. This script checks the
choice against real relevance labels: for each collection the corpus alone goes through
``curate pipeline`` (the bundled CPU model), and each candidate is trained with ``curate train
--loss LOSS`` (the same seed and budget as pick's own candidates, so the same models) and scored on
the held-out set and on the collection's test qrels. Per seed it reports which loss pick keeps (the
highest held-out NDCG@10, the earlier of equals), which loss the real test favours, and the real
NDCG@10 of pick's choice against the fixed default (``--loss auto``: distill-kl on scored rows).

    python bench/pick_truth.py --collections nq-utd --seeds 0 1 2 -n 150 --steps 20 \
        --out /work/bench/pick-truth --json bench/results/pick-truth.json

Reduced CPU form, as ``bench/holdout_truth.py``: the bundled model writes the queries once a
collection; each seed is another held-out split (``--eval-seed``) and training order (``--seed``).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from holdout_truth import SHARED, curate, parser, run_all  # noqa: E402

from curate.train.main import CANDIDATES  # noqa: E402

METRIC = "ndcg@10"


def one(collection: str, seed: int, args) -> dict:
    data = SHARED / collection
    run = Path(args.out) / collection / "run"
    started = time.perf_counter()
    curate("pipeline", str(data / "corpus.jsonl"), "--out", str(run), "-n", str(args.n), "--seed", "0",
           "--eval-seed", str(seed), "--no-report", "--no-plots")
    scores = {}
    for loss in CANDIDATES:
        out = run / f"train-{loss}-seed{seed}"
        curate("train", str(run), "--loss", loss, "--out", str(out), "--eval", str(data), "--steps", str(args.steps),
               "--seed", str(seed), *(["--light"] if args.light else []))
        held, real = json.loads((out / "report.json").read_text())["evaluations"]
        scores[loss] = {"held_out": held["after"][METRIC], "real": real["after"][METRIC],
                        "before": {"held_out": held["before"][METRIC], "real": real["before"][METRIC]},
                        "queries": {"held_out": held["queries"], "real": real["queries"]}}
    picked = max(CANDIDATES, key=lambda loss: scores[loss]["held_out"])  # pick's rule: the first of equals
    best = max(CANDIDATES, key=lambda loss: scores[loss]["real"])
    return {"seed": seed, "scores": scores, "picked": picked, "real_best": best,
            "picked_real": scores[picked]["real"], "default_real": scores["distill-kl"]["real"],
            "untrained_real": scores[picked]["before"]["real"], "seconds": round(time.perf_counter() - started)}


def summary(runs: list[dict]) -> dict:
    def stats(values: list[float]) -> dict:
        return {"mean": round(statistics.mean(values), 4),
                "std": round(statistics.stdev(values), 4) if len(values) > 1 else None}

    out = {"picked": [r["picked"] for r in runs], "real_best": [r["real_best"] for r in runs],
           "agree": sum(r["picked"] == r["real_best"] for r in runs), "seeds": len(runs),
           "untrained_real": runs[0]["untrained_real"],
           "picked_real": stats([r["picked_real"] for r in runs]),
           "default_real": stats([r["default_real"] for r in runs])}
    for loss in CANDIDATES:
        out[loss] = {side: stats([r["scores"][loss][side] for r in runs]) for side in ("held_out", "real")}
    return out


def main() -> None:
    run_all(parser(__doc__, 150).parse_args(), one, summary, candidates=list(CANDIDATES))


if __name__ == "__main__":
    main()
