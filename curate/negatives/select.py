"""Which retrieved candidates may become negatives: one set of thresholds that all apply together.

``Thresholds`` is the one rule ``mine``, ``convert`` and the ``false_negatives`` filter use.
Its parts combine (a candidate must pass every one that is set), as in sentence-transformers'
``mine_hard_negatives``:

=================  ======================================================================
``rank_min/max``   candidate ranks kept, 1-based and inclusive (ranks count candidates
                   only: positives and excluded documents are removed first)
``max_score``      a fixed ceiling on the candidate's score (TopK-Abs)
``margin``         ceiling ``pos - margin`` (TopK-MarginPos)
``percent``        ceiling ``pos - (1 - percent) * |pos|`` (TopK-PercPos): ``percent * pos``
                   for a positive ``pos``, and still below ``pos`` when ``pos`` is negative
``min_score``      a floor
=================  ======================================================================

``pos`` is the positive score the caller anchors on (mine: the query's lowest positive, or
the record's own). A candidate exactly at the ceiling is kept ("drop those scoring above").
NV-Retriever's methods are named presets of these thresholds (``curate.negatives.presets``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

VALID, ABOVE_CEILING, BELOW_FLOOR, OUTSIDE_RANKS = 0, 1, 2, 3
CODE_NAMES = {ABOVE_CEILING: "above_threshold", BELOW_FLOOR: "below_floor",
              OUTSIDE_RANKS: "outside_rank_window"}


@dataclass(frozen=True)
class Thresholds:
    rank_min: int | None = None  # 1-based, inclusive
    rank_max: int | None = None
    max_score: float | None = None  # a fixed ceiling
    margin: float | None = None  # ceiling: the anchor positive's score minus this
    percent: float | None = None  # ceiling: this share of the anchor positive's score
    min_score: float | None = None  # a floor

    @property
    def positive_aware(self) -> bool:
        return self.margin is not None or self.percent is not None

    @property
    def ranked(self) -> bool:
        return self.rank_min is not None or self.rank_max is not None

    def ceiling(self, pos: float) -> float:
        """The highest score a candidate may have, given the anchor positive's score ``pos``."""
        top = math.inf
        if self.max_score is not None:
            top = min(top, float(self.max_score))
        if self.margin is not None:
            top = min(top, float(pos) - float(self.margin))
        if self.percent is not None:
            top = min(top, float(pos) - round(1.0 - float(self.percent), 12) * abs(float(pos)))
        return top

    def judge(self, scores: np.ndarray, pos: float) -> np.ndarray:
        """One code per candidate (best first): ``VALID`` or why it is rejected; a rank-window
        rejection wins over the ceiling, the ceiling over the floor."""
        scores = np.asarray(scores, dtype=np.float64)
        codes = np.zeros(len(scores), dtype=np.int8)
        if self.min_score is not None:
            codes[scores < self.min_score] = BELOW_FLOOR
        codes[scores > self.ceiling(pos)] = ABOVE_CEILING
        if self.ranked:
            ranks = np.arange(1, len(scores) + 1)
            outside = ranks < (self.rank_min or 1)
            if self.rank_max is not None:
                outside |= ranks > self.rank_max
            codes[outside] = OUTSIDE_RANKS
        return codes

    def last_useful_rank(self) -> int | None:
        """Candidates past this rank can never be kept (``None``: no such rank)."""
        return self.rank_max

    def short_reason(self, scores: np.ndarray, pos: float, k: int, whole_corpus: bool) -> str:
        """Why fewer than ``k`` of these candidates were kept, in words for the report."""
        scores = np.asarray(scores, dtype=np.float64)
        if whole_corpus and len(scores) < k:
            return "corpus has fewer than k documents besides the positives"
        under = scores <= self.ceiling(pos)
        if self.positive_aware and under.sum() < k:
            return ("positive scores below every candidate" if not under.any()
                    else "too few candidates below the positive-based threshold")
        if self.max_score is not None and under.sum() < k:
            return "too few candidates below --max-score"
        if self.min_score is not None and (under & (scores >= self.min_score)).sum() < k:
            return "not enough candidates above the floor"
        if self.ranked:
            return "not enough candidates in the rank window"
        return "depth limit reached" if not whole_corpus else "not enough valid candidates"
