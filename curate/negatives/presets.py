"""Named mining methods: each is a preset of ``Thresholds`` (``curate.negatives.select``).

A preset names the knobs it takes (``--margin``, ``--max-score``, ``--shift``, ``--rank-min``,
``--rank-max``) with their defaults, checks their values (within the ranges ``Knobs`` declares
for every preset, and its own, e.g. ``Ceiling.percent`` for percpos), and turns them into thresholds;
``--min-score`` (a floor) goes with every preset. A new preset is one function:

    @preset("topk-floor", {"max_score": 0.8})
    def topk_floor(knobs):
        return Thresholds(max_score=knobs["max_score"], min_score=0.2)

and ``curate mine --method topk-floor`` uses it once its module is imported (a shipped preset
is imported below; a user's with ``curate mine --preset-module file.py``).

The shipped ones are NV-Retriever's methods with their best settings (Table 3 of the paper).
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError
from curate.core.params import field_range, range_problem
from curate.negatives.knobs import KNOBS, Ceiling, Knobs
from curate.negatives.select import Thresholds


@dataclass(frozen=True)
class Preset:
    name: str
    build: Callable[[dict[str, Any]], Thresholds]
    defaults: dict[str, Any] = field(default_factory=dict)  # the knobs it takes, with their defaults
    check: Callable[[dict[str, Any]], str | None] | None = None  # an error text, or None when fine


PRESETS: dict[str, Preset] = {}


def preset(name: str, defaults: dict[str, Any] | None = None,
           check: Callable[[dict[str, Any]], str | None] | None = None):
    """Register a mining method by name (see the module docstring)."""
    unknown = set(defaults or {}) - set(KNOBS)
    if unknown:
        raise ValueError(f"preset {name}: unknown knob(s) {', '.join(sorted(unknown))} (known: {', '.join(KNOBS)})")

    def deco(build: Callable[[dict[str, Any]], Thresholds]):
        PRESETS[name] = Preset(name, build, dict(defaults or {}), check)
        return build

    return deco


def load_preset_module(path: str | Path) -> None:
    """Import a user's file of ``@preset`` functions (``curate mine --preset-module``)."""
    path = Path(path)
    spec = importlib.util.spec_from_file_location(f"curate_user_preset_{path.stem}", path)
    if spec is None or not path.is_file():
        raise CurateError(f"{path}: no such preset module")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # a user's file: say which and why, in one line
        raise CurateError(f"{path}: cannot import: {type(e).__name__}: {e}") from None


@dataclass(kw_only=True)
class Method(Knobs):
    """A preset with its knobs filled in: what ``mine`` records and reports, and the thresholds."""

    name: str = "percpos"
    thresholds: Thresholds = field(default_factory=Thresholds, compare=False, repr=False)

    @classmethod
    def make(cls, name: str, margin: float | None = None, max_score: float | None = None,
             shift: int | None = None, rank_min: int | None = None, rank_max: int | None = None,
             min_score: float | None = None) -> Method:
        """The preset ``name`` with its defaults filled in and its knobs checked (``CurateError``)."""
        name = name.lower()
        if name not in PRESETS:
            raise CurateError(f"unknown mining method {name!r} (choose from {', '.join(PRESETS)})")
        p = PRESETS[name]
        given = {"margin": margin, "max_score": max_score, "shift": shift, "rank_min": rank_min,
                 "rank_max": rank_max}
        for knob, value in given.items():
            if value is not None and knob not in p.defaults:
                takers = [n for n, q in PRESETS.items() if knob in q.defaults]
                raise CurateError(f"--{knob.replace('_', '-')} applies to {' and '.join(takers) or 'no method'}, "
                                  f"not {name}")
        knobs = {k: (p.defaults[k] if given[k] is None else given[k]) for k in p.defaults}
        for k, v in knobs.items():
            if isinstance(v, (int, float)) and not math.isfinite(v):
                raise CurateError(f"--{k.replace('_', '-')} {v} is not a finite number")
            problem = range_problem(field_range(Knobs, k), v)
            if problem:
                raise CurateError(f"--{k.replace('_', '-')} {v:g} {problem}")
        problem = p.check(knobs) if p.check else None
        if problem:
            raise CurateError(problem)
        floor = None if min_score is None else float(min_score)
        built = p.build(knobs)
        if floor is not None:
            built = Thresholds(**{**asdict(built), "min_score": floor})
        return cls(name=name, **{k: knobs.get(k) for k in KNOBS}, min_score=floor, thresholds=built)

    def ceiling(self, pos: float) -> float:
        return self.thresholds.ceiling(pos)

    def judge(self, scores: np.ndarray, pos: float) -> np.ndarray:
        return self.thresholds.judge(scores, pos)

    def last_useful_rank(self) -> int | None:
        return self.thresholds.last_useful_rank()

    def short_reason(self, scores: np.ndarray, pos: float, k: int, whole_corpus: bool) -> str:
        return self.thresholds.short_reason(scores, pos, k, whole_corpus)

    def params(self) -> dict:
        """The knobs as given and defaulted (what reports and records show)."""
        return {k: getattr(self, k) for k in (*KNOBS, "min_score") if getattr(self, k) is not None}


# --------------------------------------------------------------------------- NV-Retriever's methods


@preset("naive")
def naive(knobs: dict[str, Any]) -> Thresholds:
    """Every candidate, best first (Naive Top-K)."""
    return Thresholds()


def _within(knob: str, method: str, meaning: str, meta: Mapping[str, Any]) -> Callable[[dict[str, Any]], str | None]:
    """A preset's check that ``knob`` lies in the range declared for what it means there."""

    def check(knobs: dict[str, Any]) -> str | None:
        problem = range_problem(meta, knobs[knob])
        if problem is None:
            return None
        return f"--{knob.replace('_', '-')} {knobs[knob]:g}: {method} takes {meaning}, which {problem}"

    return check


@preset("shift", {"shift": 10})
def shift(knobs: dict[str, Any]) -> Thresholds:
    """All but the first ``shift`` candidates (Top-K shifted by N)."""
    return Thresholds(rank_min=int(knobs["shift"]) + 1) if knobs["shift"] else Thresholds()


def _check_window(knobs: dict[str, Any]) -> str | None:
    lo, hi = knobs["rank_min"], knobs["rank_max"]
    return None if 1 <= lo <= hi else f"--rank-min {lo} / --rank-max {hi}: need 1 <= min <= max"


@preset("window", {"rank_min": 30, "rank_max": 100}, _check_window)  # SFR-Embedding / Linq's window
def window(knobs: dict[str, Any]) -> Thresholds:
    """Candidates ranked ``rank_min`` .. ``rank_max``."""
    return Thresholds(rank_min=int(knobs["rank_min"]), rank_max=int(knobs["rank_max"]))


@preset("abs", {"max_score": 0.7})
def absolute(knobs: dict[str, Any]) -> Thresholds:
    """Candidates scoring at most ``max_score`` (TopK-Abs)."""
    return Thresholds(max_score=float(knobs["max_score"]))


@preset("marginpos", {"margin": Ceiling.margin},
        _within("margin", "marginpos", "a gap below the positive's score", field_range(Ceiling, "margin")))
def marginpos(knobs: dict[str, Any]) -> Thresholds:
    """Candidates scoring at most ``pos - margin`` (TopK-MarginPos)."""
    return Thresholds(margin=float(knobs["margin"]))


@preset("percpos", {"margin": Ceiling.percent},
        _within("margin", "percpos", "a share of the positive's score", field_range(Ceiling, "percent")))
def percpos(knobs: dict[str, Any]) -> Thresholds:
    """Candidates scoring at most ``percent`` of the positive's score (TopK-PercPos)."""
    return Thresholds(percent=float(knobs["margin"]))
