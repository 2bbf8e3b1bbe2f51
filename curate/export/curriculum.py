"""Which negatives each training row carries, and in which phase it is trained.

Arms (MGH's ablation, Section 4.1 of "Negative Matters"):

* ``mgh``: four equal, consecutive phases whose rows carry level 4, 3, 2, 1 negatives
  (easy to hard); ``reverse``: 1, 2, 3, 4.
* ``random``: one phase; every row draws its level at random (seeded).
* ``fixed:N``: one phase, level N throughout.
* ``none``: one phase; each row carries its record's hardest ``negatives_per_row`` negatives
  (all of them when that is None), hardest first.
* ``ordered``: rows as in ``none``, and the records are
  trained easy to hard: sorted by the mean level of their negatives (easiest first) and cut
  into four equal phases, so MGH's order costs no negatives.

How records enter the phases: every record is trained once (one epoch, as in MGH where each
level feeds 25% of the steps), and each phase holds a whole number of batches (as equal as
batches allow; only the last one ends on a partial batch). Records are shuffled with each task
spread evenly (seeded), then dealt by the levels they have: a record whose negatives sit at
few levels (typical of mined data, where a hard query's negatives all land in the hardest
bins) goes first, to a phase that wants one of its levels, the emptiest such phase; records
that have every level (MGH's LLM negatives) fill what is left in shuffled order.  So a
phase's rows really carry its level instead of a stand-in, and easy records train early.  A
row takes its phase's level: ``negatives_per_row`` negatives of that level, or, where the
record has none left to give, of the nearest levels (ties go to the easier level).  Each such
substitution is counted for the card.

Dev rows (``split="dev"``) have no phase and carry the hardest negatives, the end point of
every curriculum, with the same count per row as training rows.

``order`` is the export's one entry here: it deals the phases, has ``batching`` lay them out,
and then gives each row its phase, batch and negatives, so the whole ordering policy is read
in this module and ``batching`` only lays out what it is handed.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from curate.core.errors import CurateError
from curate.export.batching import BatchOptions, schedule, spread, task_rank
from curate.export.inputs import Item

ARMS = ("none", "ordered", "mgh", "reverse", "random", "fixed:N")


@dataclass(frozen=True)
class Curriculum:
    name: str  # none, ordered, mgh, reverse, random, fixed
    level: int | None = None  # fixed:N

    @property
    def phase_levels(self) -> list[int | None]:
        """The level each phase targets, in training order (None: per row or all negatives)."""
        if self.name == "mgh":
            return [4, 3, 2, 1]
        if self.name == "reverse":
            return [1, 2, 3, 4]
        if self.name == "ordered":
            return [None] * 4
        return [self.level] if self.name == "fixed" else [None]

    @property
    def phased(self) -> bool:
        return self.name in ("mgh", "reverse", "ordered")

    @property
    def all_negatives(self) -> bool:
        """Rows carry every negative of their record (no level is chosen per row)."""
        return self.name in ("none", "ordered")

    def __str__(self) -> str:
        return f"fixed:{self.level}" if self.name == "fixed" else self.name


def parse_curriculum(text: str) -> Curriculum:
    value = text.strip().lower()
    if value in ("none", "ordered", "mgh", "reverse", "random"):
        return Curriculum(value)
    if value.startswith("fixed:") and value[6:] in ("1", "2", "3", "4"):
        return Curriculum("fixed", int(value[6:]))
    raise CurateError(f"--curriculum {text!r}: choose none, ordered, mgh, reverse, random or fixed:N "
                      "with N in 1..4")


def phase_sizes(n: int, phases: int, batch_size: int) -> list[int]:
    """Rows per phase: whole batches spread as evenly as possible, the partial batch last."""
    batches = -(-n // batch_size)
    counts = [(p + 1) * batches // phases - p * batches // phases for p in range(phases)]
    sizes = [c * batch_size for c in counts]
    last = max((p for p in range(phases) if counts[p]), default=phases - 1)
    sizes[last] -= batches * batch_size - n
    return sizes


def deal(items: Sequence[Item], curriculum: Curriculum, batch_size: int, seed: int,
         by_level: bool = True) -> list[list[Item]]:
    """Records shuffled (tasks spread evenly) and cut into the curriculum's phases; with
    ``by_level`` a phased curriculum deals them by the levels of their negatives (``Item.levels``)."""
    ordered = spread(items, random.Random(f"{seed}:deal"))
    sizes = phase_sizes(len(ordered), len(curriculum.phase_levels), batch_size)
    if curriculum.name == "ordered" and by_level:
        ordered = sorted(ordered, key=lambda it: -_mean_level(it.levels))  # stable: shuffled among equals
    if not by_level or curriculum.all_negatives or not curriculum.phased:
        out, start = [], 0
        for size in sizes:
            out.append(ordered[start : start + size])
            start += size
        return out
    return _deal_by_level(ordered, curriculum.phase_levels, sizes)


def _mean_level(levels: Sequence[int]) -> float:
    """A record's ease: the mean level of its negatives (4 easiest); one without any sits mid-way."""
    return sum(levels) / len(levels) if levels else 2.5


def _deal_by_level(ordered: Sequence[Item], targets: Sequence[int | None], sizes: Sequence[int]) -> list[list[Item]]:
    """Greedy matching of records to phases: fewest level choices first, each to the emptiest
    phase that wants a level it has; the rest fill the remaining room, nearest level first."""
    room = list(sizes)
    slot: dict[int, int] = {}  # position in ``ordered`` -> phase
    have = [set(it.levels) for it in ordered]
    by_choice = sorted(range(len(ordered)), key=lambda i: (len(have[i]) or 5, i))
    left = []
    for i in by_choice:
        fits = [p for p, lv in enumerate(targets) if lv in have[i] and room[p] > 0]
        if fits and len(have[i]) < len(targets):
            p = max(fits, key=lambda q: (room[q] / max(sizes[q], 1), -q))
            slot[i], room[p] = p, room[p] - 1
        else:
            left.append(i)
    for i in sorted(left):  # every level (or none): keep the shuffled order, nearest level first
        near = sorted((p for p in range(len(targets)) if room[p] > 0),
                      key=lambda p: (min((abs(lv - targets[p]) for lv in have[i]), default=0), p))
        slot[i], room[near[0]] = near[0], room[near[0]] - 1
    phases: list[list[Item]] = [[] for _ in targets]
    for i, it in enumerate(ordered):
        phases[slot[i]].append(it)
    return phases


KEEPS = ("level", "rank")  # which of a record's negatives count as its hardest (``pick``)


def pick(levels: Sequence[int], target: int | None, n: int | None, ranks: Sequence[int] | None = None) -> list[int]:
    """Indices of the negatives a row carries: the n nearest ``target`` (all, hardest first, without one).
    ``ranks``: the mining teacher's rank of each negative; given, the hardest are the teacher's first
    choices, whatever scores the levels were drawn from (with ``mine --scores hybrid`` the levels are
    the hybrid's, which is not the teacher that chose the negatives)."""
    if target is None:
        order = sorted(range(len(levels)), key=(lambda k: (ranks[k], k)) if ranks else (lambda k: (levels[k], k)))
        return order if n is None else order[:n]
    order = sorted(range(len(levels)), key=lambda k: (abs(levels[k] - target), -levels[k], k))
    chosen = order[: n or 1]
    return sorted(chosen, key=lambda k: (levels[k], k))


class RowNegatives:
    """The negatives each row carries: ``per_row`` of its phase's level (a seeded draw per row
    for ``random``; the nearest levels where the record lacks it), or the hardest ``per_row`` (every
    one when None) under ``ordered`` and ``none``.  Dev rows (``phase=None``) carry the hardest, as many as training rows."""

    def __init__(self, curriculum: Curriculum, per_row: int | None, seed: int, keep: str):
        self.curriculum = curriculum
        self.per_row = per_row if (per_row or curriculum.all_negatives) else 1
        self.keep = keep
        self._rng = random.Random(f"{seed}:random-levels")

    def target(self, phase: int | None) -> int | None:
        if phase is None or self.curriculum.all_negatives:
            return None
        if self.curriculum.name == "random":
            return self._rng.randint(1, 4)
        return self.curriculum.phase_levels[phase]

    def __call__(self, it: Item, phase: int | None) -> tuple[list[int], int | None]:
        """Indices of the row's negatives, and the level it aimed at."""
        target = self.target(phase)
        ranks = [n.mine_rank for n in it.record.negatives] if self.keep == "rank" else None
        return pick(it.levels, target, self.per_row, ranks if ranks and None not in ranks else None), target


AGREEMENT_TOP = 10  # Linq's positive gate: the teacher ranks a trustworthy positive in its top 10
AGREEMENT_SHARE = 0.5
AGREEMENT_Z = 1.96  # a two-sided 95% interval around the measured share


def wilson_interval(hits: int, n: int, z: float = AGREEMENT_Z) -> tuple[float, float]:
    """The Wilson score interval of a share ``hits / n``: where the true share lies, given how many
    records measured it (sound at small ``n`` and near 0 or 1, where the normal one is not)."""
    p = hits / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - spread) / (1 + z * z / n), (centre + spread) / (1 + z * z / n)


def vetted(it: Item) -> bool:
    """Every negative the record keeps was judged not relevant by ``relabel``: each one's own
    verdict (``judges["relabel"]``), so a negative nobody judged never passes for a judged one."""
    def verdict(n) -> Any:
        v = (n.judges or {}).get("relabel")
        return v.get("verdict") if isinstance(v, dict) else None

    return bool(it.record.negatives) and all(verdict(n) == "not_relevant" for n in it.record.negatives)


def auto_per_row(items: Sequence[Item]) -> tuple[int | None, dict]:
    """``--negatives-per-row auto``: every negative when the teacher agrees with the labels, one
    when it does not, or when the records cannot tell.

    Where the teacher ranks most labelled positives in its top 10, the labels and the teacher
    agree, and the documents just below the positive-aware threshold are real negatives: more of
    them is more signal (SciFact). Where it mostly does not, the labels are sparse or noisy and the
    hardest "negatives" include relevant documents nobody labelled; each extra one repeats that
    risk (NFCorpus). "Most" must hold beyond the sampling error of the share: every negative only
    when the lower end of its 95% interval clears one half. A share that sits near the line (51% of
    a few hundred queries) is noise, and one negative costs little where every one would have been
    right, while every one costs more where one would have been. Records without a teacher rank
    (LLM-written) keep one, as Linq trained.

    Relabelled records come first: where a judge has looked at every negative a record keeps
    (``relabel`` with the candidates covering them), none is an unlabelled positive any more,
    and every one is signal (NQ-UTD with held-back labels: relabelled, every negative beat the
    unrelabelled data by 0.014, beyond the seed spread, and was level with one negative).
    """
    with_negatives = [it for it in items if it.record.negatives]
    if with_negatives and all(vetted(it) for it in with_negatives):
        return None, {"asked": "auto", "chose": "all", "records_ranked": 0, "records_relabelled": len(with_negatives),
                      f"positive_in_teacher_top_{AGREEMENT_TOP}": None, "share_low_95": None,
                      "threshold": AGREEMENT_SHARE}
    ranks = [it.record.teacher.positive_rank for it in items
             if it.record.teacher is not None and it.record.teacher.positive_rank is not None]
    hits = sum(r <= AGREEMENT_TOP for r in ranks)
    share, low = (hits / len(ranks), wilson_interval(hits, len(ranks))[0]) if ranks else (None, None)
    chose = None if low is not None and low > AGREEMENT_SHARE else 1
    return chose, {"asked": "auto", "chose": "all" if chose is None else chose, "records_ranked": len(ranks),
                   f"positive_in_teacher_top_{AGREEMENT_TOP}": None if share is None else round(share, 4),
                   "share_low_95": None if low is None else round(low, 4), "threshold": AGREEMENT_SHARE}


@dataclass
class Ordering:
    """The records as the trainer will read them: each item's phase, batch and negatives set."""

    rows: list[Item]  # training rows in training order, then dev rows
    left_over: list[Item]  # rows no batch at a split's end could take without repeating a text
    batch_kinds: dict[str, dict[str, int]]  # per split: batches by kind
    per_row: int | None  # negatives a row (None: every one)
    auto: dict[str, Any] | None  # how ``auto`` chose, for the card
    card: dict[str, Any] = field(default_factory=dict)  # the arm, its phase levels, rows it could not serve as asked


def order(train: Sequence[Item], dev: Sequence[Item], curriculum: Curriculum, negatives_per_row: int | str | None,
          batches: BatchOptions, seed: int, tasks: Sequence[Item], keep: str) -> Ordering:
    """Phases, batches and each row's negatives; ``tasks``: every record read (one task order for all);
    ``keep``: which negatives count as a record's hardest (``pick``)."""
    rank = task_rank(tasks, seed)
    laid, left = schedule(deal(train, curriculum, batches.batch_size, seed), batches, seed, rank)
    dev_laid, dev_left = schedule([deal(dev, Curriculum("none"), batches.batch_size, seed)[0]], batches, seed, rank,
                                  tail=False) if dev else ([], [])
    per_row, auto = (None if negatives_per_row == "all" else negatives_per_row), None
    if per_row == "auto":
        per_row, auto = auto_per_row(train)
    negatives = RowNegatives(curriculum, per_row, seed, keep)
    stats: Counter = Counter()
    rows: list[Item] = []
    kinds: dict[str, dict[str, int]] = {}
    for split, laid_out in (("train", laid), ("dev", dev_laid)):
        kinds[split] = {}
        for number, batch in enumerate(laid_out):
            kinds[split][batch.kind] = kinds[split].get(batch.kind, 0) + 1
            for it in batch.items:
                phase = batch.phase if split == "train" else None
                it.chosen, it.target = negatives(it, phase)
                it.batch, it.batch_kind = number, batch.kind
                it.phase = phase + 1 if phase is not None and curriculum.phased else None
                _count(it, stats)
                rows.append(it)
    card = {"arm": str(curriculum), "phase_levels": curriculum.phase_levels if curriculum.phased else None,
            **dict(stats)}
    return Ordering(rows, [*left, *dev_left], kinds, negatives.per_row, auto, card)


def _count(it: Item, stats: Counter) -> None:
    """Rows the curriculum could not serve as asked, for the card."""
    if not it.chosen:
        stats["rows_without_negatives"] += 1
    elif it.target is not None and any(it.levels[k] != it.target for k in it.chosen):
        stats["rows_with_substituted_level"] += 1
        stats["negatives_substituted"] += sum(it.levels[k] != it.target for k in it.chosen)
