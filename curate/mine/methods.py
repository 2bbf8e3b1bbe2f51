"""Mining methods: which retrieved candidates may become negatives.

Every method sees one query's candidates best first (positives and other excluded documents
already removed) and gives each a code: ``VALID`` or the reason it is rejected.

=============  ============================================================================
``naive``      every candidate (Naive Top-K)
``shift``      all but the first ``shift`` candidates (Top-K shifted by N)
``window``     candidates ranked ``rank_min`` .. ``rank_max`` (1-based, inclusive)
``abs``        candidates scoring at most ``max_score`` (TopK-Abs)
``marginpos``  candidates scoring at most ``pos - margin`` (TopK-MarginPos)
``percpos``    candidates scoring at most ``pos - (1 - margin) * |pos|`` (TopK-PercPos);
               for a positive ``pos`` that is ``margin * pos``, and for a negative ``pos`` it
               stays below ``pos`` instead of rising above it
=============  ============================================================================

``pos`` is the query's lowest positive score, so a threshold is safe for every positive, or
with ``anchor="record"`` the score of the positive the record trains on.
A candidate exactly at the ceiling is kept ("drop those scoring above"), which is the
convention of sentence-transformers' ``mine_hard_negatives``.  ``min_score`` is an optional
floor for any method.  Ranks count candidates only, so "skip the first 10" skips ten
non-positive documents however many positives the teacher put among them.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from curate.core.errors import CurateError

METHODS = ("naive", "shift", "window", "abs", "marginpos", "percpos")
POSITIVE_AWARE = frozenset({"marginpos", "percpos"})
RANKED = frozenset({"shift", "window"})

VALID, ABOVE_CEILING, BELOW_FLOOR, OUTSIDE_RANKS = 0, 1, 2, 3
CODE_NAMES = {ABOVE_CEILING: "above_threshold", BELOW_FLOOR: "below_floor",
              OUTSIDE_RANKS: "outside_rank_window"}

DEFAULT_MARGIN = {"percpos": 0.95, "marginpos": 0.05}  # NV-Retriever's best settings (Table 3)
DEFAULT_MAX_SCORE = 0.7
DEFAULT_SHIFT = 10
DEFAULT_WINDOW = (30, 100)  # SFR-Embedding / Linq


@dataclass(frozen=True)
class Method:
    name: str = "percpos"
    margin: float | None = None
    max_score: float | None = None
    shift: int | None = None
    rank_min: int | None = None
    rank_max: int | None = None
    min_score: float | None = None

    @classmethod
    def make(cls, name: str, margin: float | None = None, max_score: float | None = None,
             shift: int | None = None, rank_min: int | None = None, rank_max: int | None = None,
             min_score: float | None = None) -> Method:
        """A method with its defaults filled in and its parameters checked (``CurateError``)."""
        name = name.lower()
        if name not in METHODS:
            raise CurateError(f"unknown mining method {name!r} (choose from {', '.join(METHODS)})")
        if name in POSITIVE_AWARE:
            margin = DEFAULT_MARGIN[name] if margin is None else float(margin)
            if not math.isfinite(margin) or margin < 0 or (name == "percpos" and margin == 0):
                raise CurateError(f"--margin {margin} does not suit {name} "
                                  "(percpos: a share such as 0.95; marginpos: a gap such as 0.05)")
        elif margin is not None:
            raise CurateError(f"--margin applies to percpos and marginpos, not {name}")
        if name == "abs":
            max_score = DEFAULT_MAX_SCORE if max_score is None else float(max_score)
        elif max_score is not None:
            raise CurateError(f"--max-score applies to abs, not {name}")
        if name == "shift":
            shift = DEFAULT_SHIFT if shift is None else int(shift)
            if shift < 0:
                raise CurateError("--shift must be 0 or more")
        elif shift is not None:
            raise CurateError(f"--shift applies to the shift method, not {name}")
        if name == "window":
            rank_min = DEFAULT_WINDOW[0] if rank_min is None else int(rank_min)
            rank_max = DEFAULT_WINDOW[1] if rank_max is None else int(rank_max)
            if rank_min < 1 or rank_max < rank_min:
                raise CurateError(f"--rank-min {rank_min} / --rank-max {rank_max}: need 1 <= min <= max")
        elif rank_min is not None or rank_max is not None:
            raise CurateError(f"--rank-min/--rank-max apply to the window method, not {name}")
        return cls(name, margin, max_score, shift, rank_min, rank_max,
                   None if min_score is None else float(min_score))

    # -- thresholds ---------------------------------------------------------------------

    def ceiling(self, pos: float) -> float:
        """The highest score a negative may have for a query whose lowest positive scores ``pos``."""
        if self.name == "abs":
            return float(self.max_score)
        if self.name == "marginpos":
            return float(pos) - float(self.margin)
        if self.name == "percpos":
            return float(pos) - round(1.0 - float(self.margin), 12) * abs(float(pos))
        return math.inf

    def judge(self, scores: np.ndarray, pos: float) -> np.ndarray:
        """One code per candidate (best first): ``VALID`` or why it is rejected.

        Rank-window rejections take precedence, then the ceiling, then the floor.
        """
        scores = np.asarray(scores, dtype=np.float64)
        codes = np.zeros(len(scores), dtype=np.int8)
        if self.min_score is not None:
            codes[scores < self.min_score] = BELOW_FLOOR
        codes[scores > self.ceiling(pos)] = ABOVE_CEILING
        if self.name == "shift":
            codes[:self.shift] = OUTSIDE_RANKS
        elif self.name == "window":
            ranks = np.arange(1, len(scores) + 1)
            codes[(ranks < self.rank_min) | (ranks > self.rank_max)] = OUTSIDE_RANKS
        return codes

    def last_useful_rank(self) -> int | None:
        """Candidates past this rank can never be valid (``None``: no such rank)."""
        return self.rank_max if self.name == "window" else None

    def params(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None and k != "name"}

    def short_reason(self, scores: np.ndarray, pos: float, k: int, whole_corpus: bool) -> str:
        """Why fewer than ``k`` of these candidates are valid, in words for the report."""
        scores = np.asarray(scores, dtype=np.float64)
        if whole_corpus and len(scores) < k:
            return "corpus has fewer than k documents besides the positives"
        under = scores <= self.ceiling(pos)
        if self.name in POSITIVE_AWARE and under.sum() < k:
            return ("positive scores below every candidate" if not under.any()
                    else "too few candidates below the positive-based threshold")
        if self.name == "abs" and under.sum() < k:
            return "too few candidates below --max-score"
        if self.min_score is not None and (under & (scores >= self.min_score)).sum() < k:
            return "not enough candidates above the floor"
        if self.name in RANKED:
            return "not enough candidates in the rank window"
        return "depth limit reached" if not whole_corpus else "not enough valid candidates"
