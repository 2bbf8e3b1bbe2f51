"""The queries a grid trains and evaluates on, as two small stages, so they are placed and
skipped like every other run (``curate.core.stage.placed``).

* ``queries``: a qrels file of the training queries (all of the split, a seeded subset, the
  labels each shows) or, with ``held_out``, of the queries a ``holdout`` grid evaluates on;
* ``view``: a BEIR folder of ``data``'s corpus and queries (linked, not copied) with those
  qrels as one split's, for an evaluation on held-out queries or ``generate --from-pairs``.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curate.core.stage import Stage

QRELS = "qrels.tsv"
HOLDOUT_SEED = "halves:0"  # the shuffle bench/results' NQ-UTD halves were cut with


@dataclass
class QueriesOptions:
    source: str  # the split's qrels file
    out: str
    queries: int | None = None  # a seeded subset of this many (None: all)
    holdout: float | None = None  # this share of the queries is held out for evaluation
    held_out: bool = False  # the held-out queries (every judged line), not the trained ones
    shown_positives: int | None = None  # each trained query shows only its N most relevant positives


def holdout_split(qids: list[str], share: float) -> tuple[list[str], list[str]]:
    """(trained, evaluated): the sorted query ids shuffled once, the last ``share`` of them held out."""
    order = sorted(qids)
    random.Random(HOLDOUT_SEED).shuffle(order)
    cut = len(order) - round(share * len(order))
    return sorted(order[:cut]), sorted(order[cut:])


def chosen(opts: QueriesOptions) -> dict[str, dict[str, int]]:
    """The qrels these options keep."""
    from curate.datasets.beir import read_qrels

    qrels = read_qrels(Path(opts.source))
    qids = sorted(qrels)
    if opts.holdout:
        trained, held = holdout_split(qids, opts.holdout)
        if opts.held_out:
            return {q: qrels[q] for q in held}
        qids = trained
    if opts.queries and opts.queries < len(qids):
        qids = sorted(random.Random(f"ablate:{opts.queries}").sample(qids, opts.queries))
    return {q: _shown(qrels[q], opts.shown_positives) for q in qids}


def _shown(labels: dict[str, int], n: int | None) -> dict[str, int]:
    """A query's labels as the grid shows them: the ``n`` most relevant positives (ties in file
    order), the rest held back, so mining meets them as unlabelled documents (a user's sparse labels)."""
    if n is None:
        return labels
    ranked = sorted((d for d, r in labels.items() if r > 0), key=lambda d: -labels[d])
    return {d: labels[d] for d in ranked[:n]}


def qrels_text(qrels: dict[str, dict[str, int]]) -> str:
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{r}" for q, labels in qrels.items()
                                              for d, r in labels.items()]
    return "\n".join(lines) + "\n"


def run_queries(opts: QueriesOptions, run) -> dict[str, Any]:
    qrels = chosen(opts)
    run.path(QRELS).write_text(qrels_text(qrels), encoding="utf-8")
    run.counts["queries"] = len(qrels)
    return {"queries": len(qrels)}


@functools.cache
def queries_stage() -> Stage:
    return Stage("queries", QueriesOptions, run_queries, reads=("source",), writes={"qrels": QRELS})


@dataclass
class ViewOptions:
    data: str  # the BEIR folder whose corpus and queries are linked
    qrels: str  # the split's qrels
    out: str
    split: str = "test"


def run_view(opts: ViewOptions, run) -> dict[str, Any]:
    (run.dir / "qrels").mkdir()
    for name in ("corpus.jsonl", "queries.jsonl"):
        run.path(name).symlink_to((Path(opts.data) / name).resolve())
    run.path(f"qrels/{opts.split}.tsv").write_bytes(Path(opts.qrels).read_bytes())
    return {"split": opts.split}


@functools.cache
def view_stage() -> Stage:
    return Stage("view", ViewOptions, run_view, reads=("data", "qrels"))
