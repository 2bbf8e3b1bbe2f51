#!/usr/bin/env python
"""Split a BEIR collection's one labelled split into a training half and a test half.

    .venv/bin/python bench/halves.py ../shared/data/nq-utd runs/data/nq-utd-halves [--split test] [--seed 0]

Some collections label one split only (NQ-UTD: 80 test queries, 10 judged documents each). To
train on it and still evaluate on queries the student never saw, the queries are shuffled with
the seed and cut in two: ``qrels/train.tsv`` and ``qrels/test.tsv`` in OUT, every line of a query
(judged non-relevant ones too) kept with it. The corpus and queries are linked, not copied, so the
collection stays where its licence put it. A grid then names OUT as its ``data``.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def split_halves(src: Path, out: Path, split: str = "test", seed: int = 0) -> dict[str, int]:
    from curate.core.jsonl import atomic_write_text
    from curate.datasets.beir import read_qrels

    qrels = read_qrels(src / "qrels" / f"{split}.tsv")
    qids = sorted(qrels)
    random.Random(f"halves:{seed}").shuffle(qids)
    halves = {"train": sorted(qids[: len(qids) // 2]), "test": sorted(qids[len(qids) // 2:])}
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    for name in ("corpus.jsonl", "queries.jsonl"):
        link = out / name
        if not link.exists():
            link.symlink_to((src / name).resolve())
    for name, ids in halves.items():
        lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{r}" for q in ids for d, r in qrels[q].items()]
        atomic_write_text(out / "qrels" / f"{name}.tsv", "\n".join(lines) + "\n")
    return {name: len(ids) for name, ids in halves.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--split", default="test")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    counts = split_halves(args.src, args.out, args.split, args.seed)
    print(f"{args.out}: " + ", ".join(f"{n} {k} queries" for k, n in counts.items()))


if __name__ == "__main__":
    main()
