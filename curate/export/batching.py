"""Lay rows out in training batches: the order of the file is the order of training.

* ``homogeneous`` (SFR, Linq): every batch holds one task (``Item.task_key``), so in-batch
  negatives come from the same task and are harder. A task's rows that do not fill a whole
  batch are pooled with the other tasks' leftovers into mixed batches at the end of the phase;
  the phase therefore always ends on a batch boundary.
* ``task_order``: ``random`` shuffles the phase's task batches; ``fixed`` is Linq's
  homogeneous task ordering: one seeded task order for the whole export, and the phase is a
  series of blocks, each holding the next batch of every task in that order (a task whose
  batches ran out drops out of later blocks).
* ``blended`` (NV-Embed): every batch mixes tasks in about their overall proportions.
* ``mixed_tail`` (Linq's mixed-task fine-tuning): the training split ends with at least that
  many mixed batches -- the last phase's leftovers, topped up by breaking up the task batches
  that would have come last.

No batch repeats a query or positive text (after normalisation): another row's copy of your
positive would be an in-batch "negative" that is really a positive. A row that cannot join a
batch without a repeat waits for the next batch; what still cannot be placed when the
phase's batches are full moves on to the next phase (``schedule`` hands it over).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from curate.export.inputs import Item
from curate.dedup.shingles import normalize

LAYOUTS = ("homogeneous", "blended")
TASK_ORDERS = ("random", "fixed")


@dataclass
class BatchOptions:
    batch_size: int = 32
    layout: str = "homogeneous"
    task_order: str = "random"
    mixed_tail: int = 0


@dataclass
class Batch:
    items: list[Item]
    kind: str  # "task" (one task), "mixed" (leftovers, blended layout, tail), "last" (a split's final, partial batch)
    phase: int = 0  # index of the phase it trains in (``schedule``)


def spread(items: Sequence[Item], rng: random.Random, key: Callable[[Item], str] = lambda it: it.task_key
           ) -> list[Item]:
    """Shuffle so that every stretch of the result holds the tasks in about their overall shares.

    Each task's rows are shuffled, then row j of a task with n rows is placed at (j + u) / n,
    u a random offset per task, and all rows are sorted by that position.
    """
    groups: dict[str, list[Item]] = {}
    for it in items:
        groups.setdefault(key(it), []).append(it)
    placed = []
    for name in sorted(groups):
        members = groups[name]
        rng.shuffle(members)
        offset, tiebreak = rng.random(), rng.random()
        placed += [((j + offset) / len(members), tiebreak, j, it) for j, it in enumerate(members)]
    placed.sort(key=lambda t: t[:3])
    return [t[3] for t in placed]


def _texts(it: Item) -> tuple[str, str]:
    return normalize(it.record.query), normalize(it.record.positive)


SWAP_WINDOW = 64  # full batches searched for a swap partner (the most recent ones)


def pack(items: Sequence[Item], size: int) -> tuple[list[list[Item]], list[list[Item]]]:
    """First fit: each row joins the earliest open batch that has none of its texts.

    A row that clashes with every open batch first tries a swap with a recent full batch: it
    takes the place of a member that fits the first open batch, which that member then joins.
    Without this, one repeated text would leave two part-filled batches where one full batch
    and a row to spare were possible. Returns the full batches (in the order they filled) and
    those left open.
    """
    texts = [_texts(it) for it in items]
    full: list[tuple[list[int], set[str]]] = []
    open_: list[tuple[list[int], set[str]]] = []

    def add(batch: tuple[list[int], set[str]], i: int) -> None:
        batch[0].append(i)
        batch[1].update(texts[i])
        if len(batch[0]) == size:
            open_[:] = [b for b in open_ if b is not batch]
            full.append(batch)

    def swap(i: int, dest: tuple[list[int], set[str]]) -> bool:
        for rows, seen in reversed(full[-SWAP_WINDOW:]):
            clash = [k for k, j in enumerate(rows) if not seen.isdisjoint(texts[i]) and
                     not set(texts[j]).isdisjoint(texts[i])]
            if len(clash) > 1:
                continue
            for k in clash or range(len(rows)):
                j = rows[k]
                if dest[1].isdisjoint(texts[j]):
                    seen.difference_update(texts[j])
                    seen.update(texts[i])
                    rows[k] = i
                    add(dest, j)
                    return True
        return False

    for i in range(len(items)):
        target = next((b for b in open_ if b[1].isdisjoint(texts[i])), None)
        if target is None and open_ and swap(i, open_[0]):
            continue
        if target is None:
            target = ([], set())
            open_.append(target)
        add(target, i)
    return [[items[i] for i in rows] for rows, _ in full], [[items[i] for i in rows] for rows, _ in open_]


def task_rank(items: Sequence[Item], seed: int) -> dict[str, int]:
    """One seeded order of all tasks, shared by every block of every phase (``fixed``)."""
    keys = sorted({it.task_key for it in items})
    random.Random(f"{seed}:task-order").shuffle(keys)
    return {k: i for i, k in enumerate(keys)}


def _order_task_batches(per_task: dict[str, list[list[Item]]], opts: BatchOptions, rng: random.Random,
                        rank: dict[str, int]) -> list[list[Item]]:
    if opts.task_order == "fixed":
        tasks = sorted(per_task, key=lambda k: rank[k])
        rounds = max((len(b) for b in per_task.values()), default=0)
        return [per_task[t][r] for r in range(rounds) for t in tasks if r < len(per_task[t])]
    batches = [b for t in sorted(per_task) for b in per_task[t]]
    rng.shuffle(batches)
    return batches


def layout_phase(items: Sequence[Item], opts: BatchOptions, rng: random.Random, rank: dict[str, int],
                 tail_batches: int = 0) -> tuple[list[Batch], list[Item]]:
    """Batches of one phase, plus the rows that could not be placed in a full batch.

    ``tail_batches``: the phase must end with at least that many mixed batches; when the
    leftovers do not make that many, the task batches that would have come last are broken
    up into the mixed pool.
    """
    size = opts.batch_size
    items = spread(items, rng)
    if opts.layout == "blended":
        full, rest = pack(items, size)
        return [Batch(b, "mixed") for b in full], [it for rows in rest for it in rows]
    groups: dict[str, list[Item]] = {}
    for it in items:
        groups.setdefault(it.task_key, []).append(it)
    per_task: dict[str, list[list[Item]]] = {}
    leftovers: list[Item] = []
    for key, members in groups.items():
        full, rest = pack(members, size)
        if full:
            per_task[key] = full
        leftovers += [it for rows in rest for it in rows]
    ordered = _order_task_batches(per_task, opts, rng, rank)
    short = tail_batches * size - len(leftovers)
    if short > 0:
        cut = max(0, len(ordered) - -(-short // size))
        leftovers += [it for b in ordered[cut:] for it in b]
        ordered = ordered[:cut]
    full, rest = pack(spread(leftovers, rng), size)
    batches = [Batch(b, "task") for b in ordered] + [Batch(b, "mixed") for b in full]
    return batches, [it for rows in rest for it in rows]


def finish(carry: Sequence[Item], size: int) -> tuple[list[Batch], list[Item]]:
    """The split's last batches from what is left: full ones, then the largest part-filled one.

    Rows of other part-filled batches would repeat a text in it; they are returned (dropped).
    """
    full, rest = pack(carry, size)
    batches = [Batch(b, "mixed") for b in full]
    if not rest:
        return batches, []
    best = max(rest, key=len)
    return batches + [Batch(best, "last")], [it for rows in rest if rows is not best for it in rows]


def schedule(phases: Sequence[Sequence[Item]], opts: BatchOptions, seed: int, rank: dict[str, int],
             tail: bool = True) -> tuple[list[Batch], list[Item]]:
    """Batch each phase in turn; rows a phase could not place open the next one.

    Returns the batches in training order (each with the phase it trains in) and the rows
    dropped because the split's last batch could not take them without repeating a text.
    """
    rng = random.Random(f"{seed}:batches")
    batches: list[Batch] = []
    carry: list[Item] = []
    for p, items in enumerate(phases):
        last = p == len(phases) - 1
        laid, carry = layout_phase(carry + list(items), opts, rng, rank, opts.mixed_tail if (last and tail) else 0)
        batches += [Batch(b.items, b.kind, p) for b in laid]
    final, dropped = finish(carry, opts.batch_size)
    batches += [Batch(b.items, b.kind, len(phases) - 1) for b in final]
    return batches, dropped
