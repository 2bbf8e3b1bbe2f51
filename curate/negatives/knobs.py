"""The settings a mining preset may take (kept free of heavy imports: the CLI reads its defaults)."""

from __future__ import annotations

from dataclasses import dataclass

KNOBS = ("margin", "max_score", "shift", "rank_min", "rank_max")


@dataclass(kw_only=True)
class Knobs:
    """The settings a preset may take (``None``: the preset's default); ``min_score`` is a floor
    that goes with any preset. ``MineOptions`` and ``Method`` both build on this one list."""

    margin: float | None = None  # percpos: share of the positive's score; marginpos: gap below it
    max_score: float | None = None  # abs: highest negative score
    shift: int | None = None  # shift: candidates skipped
    rank_min: int | None = None  # window: first rank
    rank_max: int | None = None  # window: last rank
    min_score: float | None = None  # floor: candidates scoring below it are never mined
