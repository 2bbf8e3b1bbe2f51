"""Hold out a dev split by task, so that dev measures tasks the model never trained on.

Whole tasks (``Item.task_key``) go to dev, in a seeded order, while they fit under
``fraction`` of the records (if none fits, the smallest task, unless it alone is more than
twice the target). Training rows whose query (normalised) also occurs in dev are then
dropped and counted, so no query is on both sides. With fewer than two tasks -- mined BEIR
data has one -- or no task small enough, the split falls back to holding out queries, and
the card says so.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

from curate.export.inputs import Item
from curate.dedup.shingles import normalize


def _query(it: Item) -> str:
    return normalize(it.record.query)


def _pick_tasks(items: Sequence[Item], target: int, rng: random.Random) -> set[str] | None:
    sizes = Counter(it.task_key for it in items)
    if len(sizes) < 2:
        return None
    order = sorted(sizes)
    rng.shuffle(order)
    chosen: set[str] = set()
    total = 0
    for key in order:
        if total + sizes[key] <= target:
            chosen.add(key)
            total += sizes[key]
    if not chosen:
        smallest = min(order, key=lambda k: sizes[k])
        if sizes[smallest] > 2 * target:
            return None
        chosen = {smallest}
    return chosen if len(chosen) < len(sizes) else None


def _pick_queries(items: Sequence[Item], target: int, rng: random.Random) -> set[str]:
    sizes = Counter(_query(it) for it in items)
    order = sorted(sizes)
    rng.shuffle(order)
    chosen: set[str] = set()
    total = 0
    for q in order[:-1]:  # leave at least one query for training
        if total >= target:
            break
        chosen.add(q)
        total += sizes[q]
    return chosen


def split_dev(items: Sequence[Item], fraction: float,
              seed: int) -> tuple[list[Item], list[Item], list[Item], dict[str, Any]]:
    """(train, dev, the training records dropped for sharing a query with dev, info for the card)."""
    if fraction <= 0 or len(items) < 2:
        return list(items), [], [], {"mode": "none", "fraction": fraction}
    rng = random.Random(f"{seed}:dev-split")
    target = max(1, math.floor(fraction * len(items)))
    tasks = _pick_tasks(items, target, rng)
    if tasks is not None:
        dev = [it for it in items if it.task_key in tasks]
        info: dict[str, Any] = {"mode": "by-task", "dev_tasks": len(tasks),
                                "train_tasks": len({it.task_key for it in items}) - len(tasks)}
    else:
        queries = _pick_queries(items, target, rng)
        dev = [it for it in items if _query(it) in queries]
        info = {"mode": "by-query", "dev_queries": len(queries),
                "note": "fewer than two tasks, or none small enough to hold out: queries were held out instead"}
    for it in dev:
        it.split = "dev"
    dev_queries = {_query(it) for it in dev}
    train, crossing = [], []
    for it in items:
        if it.split == "dev":
            continue
        (crossing if _query(it) in dev_queries else train).append(it)
    info.update(fraction=fraction, dev_records=len(dev), train_records=len(train),
                dropped_query_in_dev=len(crossing))
    return train, dev, crossing, info
