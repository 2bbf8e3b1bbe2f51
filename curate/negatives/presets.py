"""Named mining methods: each is a preset of ``Thresholds`` (``curate.negatives.select``).

A preset names the knobs it takes (``--relative-margin``, ``--absolute-margin``, ``--max-score``,
``--shift``, ``--range-min``, ``--range-max``: ``curate.negatives.knobs``) with their defaults, checks
their values (within the ranges ``Knobs`` declares for every preset, and its own, e.g. window's
``range_min < range_max``), and turns them into thresholds;
``--min-score`` (a floor) goes with every preset. A new preset is one function:

    @preset("topk-floor", {"max_score": 0.8})
    def topk_floor(knobs):
        return Thresholds(max_score=knobs["max_score"], min_score=0.2)

and ``curate mine --method topk-floor`` uses it once its module is imported: presets live in the
``PRESETS`` registry, which holds the shipped ones (below), a plugin's (a module named in the
``curate.presets`` entry-point group) and a user's file's (``curate mine --preset-module file.py``).

The shipped ones are NV-Retriever's methods with their best settings (Table 3 of the paper),
one module each in ``curate/negatives/methods/``, found by that folder.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError
from curate.core.params import field_range, range_problem
from curate.core.registry import Registry
from curate.negatives.knobs import DEPRECATED, KNOBS, Knobs, translate_deprecated
from curate.negatives.select import Thresholds


@dataclass(frozen=True)
class Preset:
    name: str
    build: Callable[[dict[str, Any]], Thresholds]
    defaults: dict[str, Any] = field(default_factory=dict)  # the knobs it takes, with their defaults
    check: Callable[[dict[str, Any]], str | None] | None = None  # an error text, or None when fine


PRESETS: Registry[Preset] = Registry("mining method", "curate.presets", builtin=("curate.negatives.methods",),
                                     normalize=str.lower)


def preset(name: str, defaults: dict[str, Any] | None = None,
           check: Callable[[dict[str, Any]], str | None] | None = None):
    """Register a mining method by name (see the module docstring)."""
    unknown = set(defaults or {}) - set(KNOBS)
    if unknown:
        raise ValueError(f"preset {name}: unknown knob(s) {', '.join(sorted(unknown))} (known: {', '.join(KNOBS)})")

    def deco(build: Callable[[dict[str, Any]], Thresholds]):
        PRESETS.register(name, Preset(name, build, dict(defaults or {}), check))
        return build

    return deco


# preset modules imported in this process: the bytes they had and the names they registered
_LOADED: dict[Path, tuple[bytes, set[str]]] = {}


def load_preset_module(path: str | Path) -> None:
    """Import a user's file of ``@preset`` functions (``curate mine --preset-module``), once a
    process for the same bytes (a stage's check and its run both ask for it)."""
    path = Path(path)
    spec = importlib.util.spec_from_file_location(f"curate_user_preset_{path.stem}", path)
    if spec is None or not path.is_file():
        raise CurateError(f"{path}: no such preset module")
    data = path.read_bytes()
    before = _LOADED.get(path.resolve())
    if before is not None and before[0] == data:
        return
    for name in before[1] if before else ():  # the file was edited: its new version replaces its old
        PRESETS.unregister(name)
    names = set(PRESETS.names())
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except CurateError:
        raise
    except Exception as e:  # a user's file: say which and why, in one line
        raise CurateError(f"{path}: cannot import: {type(e).__name__}: {e}") from None
    _LOADED[path.resolve()] = (data, set(PRESETS.names()) - names)


@dataclass(kw_only=True)
class Method(Knobs):
    """A preset with its knobs filled in: what ``mine`` records and reports, and the thresholds."""

    name: str = "percpos"
    thresholds: Thresholds = field(default_factory=Thresholds, compare=False, repr=False)

    @classmethod
    def make(cls, name: str, margin: float | None = None, max_score: float | None = None,
             shift: int | None = None, rank_min: int | None = None, rank_max: int | None = None,
             min_score: float | None = None, *, relative_margin: float | None = None,
             absolute_margin: float | None = None, range_min: int | None = None,
             range_max: int | None = None) -> Method:
        """The preset ``name`` with its defaults filled in and its knobs checked (``CurateError``).
        The deprecated ``margin``, ``rank_min`` and ``rank_max`` (kept in their old places, so a
        call by position still means what it did) are translated (``knobs.translate_deprecated``),
        with one line on stderr saying what to write instead."""
        name = name.lower()
        p = PRESETS.get(name, where="--method")
        given, notes = translate_deprecated(name, p.defaults, {
            "relative_margin": relative_margin, "absolute_margin": absolute_margin, "max_score": max_score,
            "shift": shift, "range_min": range_min, "range_max": range_max, "margin": margin,
            "rank_min": rank_min, "rank_max": rank_max})
        try:
            method = cls._filled(name, p, given, min_score)
        except CurateError as e:  # name the spelling the user gave, in the same one line
            raise CurateError(f"{e} ({'; '.join(notes)})" if notes else str(e)) from None
        if notes:
            print("curate: " + "; ".join(notes), file=sys.stderr)
        return method

    @classmethod
    def _filled(cls, name: str, p: Preset, given: dict[str, Any], min_score: float | None) -> Method:
        for knob, value in given.items():
            if value is not None and knob not in p.defaults:
                names = {knob, *DEPRECATED.get(knob, ())}
                takers = [n for n, q in PRESETS.items() if names & set(q.defaults)]
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
        """The knobs as given and defaulted (what reports show)."""
        return {k: getattr(self, k) for k in (*KNOBS, "min_score") if getattr(self, k) is not None}

    def record_params(self) -> dict:
        """The knobs under the names records have carried since schema 3 (``margin``: percpos's
        share or marginpos's gap; ``rank_min``/``rank_max``: the first and last rank kept), so a
        record is byte for byte what it was before the thresholds took sentence-transformers'
        names; reports use the new names."""
        old = {"relative_margin": ("margin", lambda r: round(1 - r, 12)), "absolute_margin": ("margin", None),
               "range_min": ("rank_min", lambda n: n + 1), "range_max": ("rank_max", None)}
        shown = {}
        for k, v in self.params().items():
            name, convert = old.get(k, (k, None))
            shown[name] = convert(v) if convert else v
        return shown
