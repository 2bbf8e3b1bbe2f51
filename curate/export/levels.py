"""The difficulty level (1 hardest .. 4 easiest) of every negative.

* A level the record already has (LLM negatives, MGH-style) is kept.
* A negative without one but with a teacher score gets it from its gap, the record's
  lowest-positive teacher score minus the negative's: the smaller the gap, the closer the
  negative sits to the positive, the harder it is. Gaps are binned by quartile over the whole
  export (by rank, so each level holds a quarter of these negatives, ties kept in input
  order). Quartiles rather than fixed edges because the gap's scale belongs to the teacher
  (MiniLM cosines spread far wider than E5's, which crowd into 0.7-0.9): fixed edges would
  fit one teacher and leave most negatives in one bin for another, whereas the curriculum
  wants each level to feed its quarter of the training. A record's negatives tend to share
  a bin (a hard query has only small gaps); the curriculum deals such records to the phase
  of a level they have (curriculum.py), so hard queries train late. ``gap_bins="record"`` ranks the gaps within
  each record instead (MGH's LLM levels are per query too): every record with four scored
  negatives then has all four levels, at the price of "level 4" meaning only "easiest of
  this record's".
* A negative with neither (no level; no teacher score or no positive score to compare with)
  is placed by its position among such negatives of its record, first = hardest, spread
  over 1..4 -- the order every stage writes negatives in. These are counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from curate.core.errors import CurateError
from curate.export.inputs import Item

LEVELS = (1, 2, 3, 4)


def by_position(i: int, n: int) -> int:
    """Level of the i-th of n ordered negatives (first hardest), spread evenly over 1..4."""
    return 1 + (len(LEVELS) * i) // n


def quartile_levels(gaps: Sequence[float]) -> list[int]:
    """Level per gap: the smallest quarter of gaps is level 1, the largest level 4."""
    order = sorted(range(len(gaps)), key=lambda k: gaps[k])
    out = [0] * len(gaps)
    for rank, k in enumerate(order):
        out[k] = 1 + (len(LEVELS) * rank) // len(gaps)
    return out


GAP_BINS = ("export", "record")


def assign_levels(items: Sequence[Item], gap_bins: str = "export") -> dict[str, Any]:
    """Set every item's ``levels`` (one per negative); returns how they were obtained, for the card.

    ``gap_bins``: quartiles of the gap over the whole export, or ranks within each record.
    """
    levels: list[list[int]] = [[0] * len(it.record.negatives) for it in items]
    gap_slots: list[tuple[int, int]] = []
    gaps: list[float] = []
    given = positional = 0
    for r, it in enumerate(items):
        pos = it.record.teacher.positive if it.record.teacher else None
        unplaced = []
        for n, neg in enumerate(it.record.negatives):
            if neg.level is not None:
                if neg.level not in LEVELS:
                    raise CurateError(f"{it.source}: record {it.record.id}: negative level {neg.level!r} "
                                      f"is not one of 1, 2, 3, 4")
                levels[r][n] = neg.level
                given += 1
            elif neg.teacher_score is not None and pos is not None:
                gap_slots.append((r, n))
                gaps.append(pos - float(neg.teacher_score))
            else:
                unplaced.append(n)
        for i, n in enumerate(unplaced):
            levels[r][n] = by_position(i, len(unplaced))
        positional += len(unplaced)
    groups: dict[int, list[int]] = {}
    for k, (r, _) in enumerate(gap_slots):
        groups.setdefault(r if gap_bins == "record" else 0, []).append(k)
    for ks in groups.values():
        for k, level in zip(ks, quartile_levels([gaps[k] for k in ks])):
            r, n = gap_slots[k]
            levels[r][n] = level
    stats: dict[str, Any] = {"given": given, "from_gap": len(gaps), "by_position": positional, "gap_bins": gap_bins,
                             "gap_edges": _edges(gaps, levels, gap_slots) if gap_bins == "export" else None}
    for it, lv in zip(items, levels):
        it.levels = lv
    return stats


def _edges(gaps: list[float], levels: list[list[int]], slots: list[tuple[int, int]]) -> list[float] | None:
    """The largest gap in levels 1-3: where the quartile bins ended up (for the card)."""
    if not gaps:
        return None
    top: dict[int, float] = {}
    for g, (r, n) in zip(gaps, slots):
        lv = levels[r][n]
        top[lv] = max(top.get(lv, g), g)
    return [round(top[lv], 6) for lv in LEVELS[:-1] if lv in top]
