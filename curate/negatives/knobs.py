"""The settings a mining preset may take (kept free of heavy imports: the CLI reads its defaults
and ranges here).

Ranges are declared once, in the fields' metadata (``curate.core.params``): the CLI builds its
option types from them, and ``Method.make`` checks a knob against them whoever calls it (the
CLI, the API, an ablation grid).
"""

from __future__ import annotations

from dataclasses import dataclass, field

KNOBS = ("margin", "max_score", "shift", "rank_min", "rank_max")


@dataclass(kw_only=True)
class Ceiling:
    """The positive-aware ceilings' numbers and their ranges, declared once: ``mine``'s percpos and
    marginpos take them as ``--margin``, and the ``false_negatives`` filter step's ``percent`` and
    ``margin`` mean the same things. A share above 1 (or a negative gap) puts the ceiling above
    the positive, which turns the false-negative guard off, so it is refused."""

    # percent: a share of the positive's score; margin: a gap below it
    percent: float = field(default=0.95, metadata={"min": 0.0, "min_open": True, "max": 1.0})
    margin: float = field(default=0.05, metadata={"min": 0.0})


@dataclass(kw_only=True)
class Knobs:
    """The settings a preset may take (``None``: the preset's default); ``min_score`` is a floor
    that goes with any preset. ``MineOptions`` and ``Method`` both build on this one list; the
    ranges here hold for every preset, and a preset narrows them (percpos: ``Ceiling.percent``)."""

    # percpos: share of the positive's score (Ceiling.percent); marginpos: gap below it (Ceiling.margin)
    margin: float | None = field(default=None, metadata={"min": 0.0})
    max_score: float | None = None  # abs: highest negative score
    shift: int | None = field(default=None, metadata={"min": 0})  # shift: candidates skipped
    rank_min: int | None = field(default=None, metadata={"min": 1})  # window: first rank
    rank_max: int | None = field(default=None, metadata={"min": 1})  # window: last rank
    min_score: float | None = None  # floor: candidates scoring below it are never mined
