"""The settings a mining preset may take (kept free of heavy imports: the CLI reads its defaults
and ranges here).

Ranges are declared once, in the fields' metadata (``curate.core.params``): the CLI builds its
option types from them, and ``Method.make`` checks a knob against them whoever calls it (the
CLI, the API, an ablation grid). Each field's ``help`` is its option's help text.

The names are sentence-transformers' (``mine_hard_negatives``): ``relative_margin``,
``absolute_margin``, ``range_min``, ``range_max``, ``max_score``, ``min_score``. The names curate
used before (``margin``, ``rank_min``, ``rank_max``) still work: their fields carry
``{"deprecated": NEW, "translated": True}`` in their metadata: a CLI keeps them as hidden options
of their own (their values are translated, not just renamed: ``translate_deprecated``, the one
place that does, called by ``Method.make``, which also prints the one line saying what to write
instead, with the translated value, so a CLI need not warn again).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

# the knobs, and last the deprecated spellings (DEPRECATED) a preset may still declare as its own
KNOBS = ("relative_margin", "absolute_margin", "max_score", "shift", "range_min", "range_max",
         "margin", "rank_min", "rank_max")
# an old name -> the new names it may stand for (which one: the one the method takes)
DEPRECATED: dict[str, tuple[str, ...]] = {"margin": ("relative_margin", "absolute_margin"),
                                          "rank_min": ("range_min",), "rank_max": ("range_max",)}


@dataclass(kw_only=True)
class Ceiling:
    """The positive-aware ceilings' numbers and their ranges, declared once: the ``false_negatives``
    filter step's ``percent`` and ``margin`` and ``convert --max-ratio`` take them; ``mine``'s percpos
    takes the share as ``--relative-margin`` (1 - percent) and marginpos the gap as
    ``--absolute-margin``. A share above 1 (or a negative gap) puts the ceiling above the positive,
    which turns the false-negative guard off, so it is refused."""

    # percent: a share of the positive's score; margin: a gap below it
    percent: float = field(default=0.95, metadata={"min": 0.0, "min_open": True, "max": 1.0})
    margin: float = field(default=0.05, metadata={"min": 0.0})


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


@dataclass(kw_only=True)
class Knobs:
    """The settings a preset may take (``None``: the preset's default); ``min_score`` is a floor
    that goes with any preset. ``MineOptions`` and ``Method`` both build on this one list; the
    ranges here hold for every preset."""

    relative_margin: float | None = field(default=None, metadata={
        "min": 0.0, "max": 1.0, "max_open": True,
        "help": "percpos: keep negatives scoring at most the positive's score minus this fraction of its "
                "magnitude, pos - |pos| * r (sentence-transformers' relative_margin; default 0.05)."})
    absolute_margin: float | None = field(default=None, metadata={
        "min": 0.0,
        "help": "marginpos: keep negatives scoring at most the positive's score minus this "
                "(sentence-transformers' absolute_margin; default 0.05)."})
    max_score: float | None = field(default=None, metadata={
        "help": "abs: keep negatives scoring at most this (default 0.7)."})
    shift: int | None = field(default=None, metadata={
        "min": 0,
        "help": "shift: skip this many top candidates, keep the rest (NV-Retriever's Top-K shifted by N; "
                "default 10)."})
    range_min: int | None = field(default=None, metadata={
        "min": 0,
        "help": "window: skip this many top candidates (sentence-transformers' range_min; default 29, "
                "i.e. ranks 30..100; below --range-max)."})
    range_max: int | None = field(default=None, metadata={
        "min": 1,
        "help": "window: the deepest candidate rank considered (sentence-transformers' range_max; default 100)."})
    min_score: float | None = field(default=None, metadata={
        "help": "Floor: candidates scoring below it are never mined."})
    # deprecated spellings (translate_deprecated): percpos took a share of the positive's score
    # (1 - relative_margin), marginpos a gap (absolute_margin); window took 1-based first/last ranks
    margin: float | None = field(default=None, metadata={
        "min": 0.0, "deprecated": "relative_margin", "translated": True,
        "help": "Deprecated: percpos's share of the positive's score is --relative-margin (1 - the share); "
                "marginpos's gap is --absolute-margin."})
    rank_min: int | None = field(default=None, metadata={
        "min": 1, "deprecated": "range_min", "translated": True,
        "help": "Deprecated: window's first rank kept; --range-min is the candidates skipped (rank-min - 1)."})
    rank_max: int | None = field(default=None, metadata={
        "min": 1, "deprecated": "range_max", "translated": True,
        "help": "Deprecated: window's last rank kept; --range-max is the same number."})


def deprecated_clash(given: Mapping[str, Any]) -> str | None:
    """The error when ``given`` (knob -> value, ``None`` when not given) names a setting by both its
    deprecated and its new name, else None (a grid says so before anything runs)."""
    for old, new_names in DEPRECATED.items():
        both = [new for new in new_names if given.get(new) is not None]
        if given.get(old) is not None and both:
            return (f"{_flag(old)} and {_flag(both[0])} are the same setting, under its old and its new name: "
                    f"give only {_flag(both[0])}")
    return None


def translate_deprecated(method: str, takes: Collection[str],
                         given: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``given`` (knob -> value, ``None`` when not given) with each deprecated spelling turned into
    the name ``method`` (a preset taking the knobs ``takes``) knows it by, and one note per old
    name saying what to write instead. A preset that declares an old name itself (a user's preset
    written before the rename) keeps it; an old name the method takes in neither spelling is left
    for the caller's "applies to" error. Giving an old name with its new one is an error.

    The share the old ``--margin`` gave percpos becomes ``round(1 - share, 12)``: the very number
    the ceiling always took from it (``Thresholds.ceiling``), so the ceilings stay the same floats."""
    from curate.core.errors import CurateError
    from curate.core.params import range_problem

    out, notes = dict(given), []
    problem = deprecated_clash({k: v for k, v in given.items() if not (k in DEPRECATED and k in takes)})
    if problem:
        raise CurateError(problem)
    for old, value in given.items():
        if old not in DEPRECATED or value is None or old in takes:
            continue
        new = next((n for n in DEPRECATED[old] if n in takes), None)
        if new is None:
            continue
        if new == "relative_margin":
            problem = range_problem(Ceiling.__dataclass_fields__["percent"].metadata, value)
            if problem:
                raise CurateError(f"{_flag(old)} {value:g}: {method} takes a share of the positive's score "
                                  f"(deprecated: {_flag(new)} is 1 - it), which {problem}")
            converted: Any = round(1.0 - float(value), 12)
            why = f"1 - the share {value:.12g} of the positive's score that {method} keeps"
        elif new == "range_min":
            converted = value - 1
            why = f"the candidates skipped before rank {value}"
        else:
            converted = value
            why = "the same gap" if new == "absolute_margin" else "the same last rank"
        out[old], out[new] = None, converted
        notes.append(f"{_flag(old)} is deprecated: use {_flag(new)} {converted:.12g} ({why})")
    return out, notes
