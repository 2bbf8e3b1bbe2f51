"""Typed parameters: a step declares a dataclass, and whatever a recipe or spec gives it is
checked against that dataclass before any work starts.

The dataclass is the one home of a step's defaults. An unknown name (``positive_topp``), a
wrong type (``percent: high``) or a value out of range (``positive_top: -3``) is one line
naming where it came from, with the closest known name for a typo, instead of being ignored
or dropping every record. Ranges and choices live in the field's metadata:
``field(default=10, metadata={"min": 0})``, ``Literal["keep", "drop"]``; ``"min_open": True``
(or ``"max_open"``) leaves the bound itself out, as click's ranges do, so the CLI can build its
option types from the same declaration (``range_text``, ``range_problem``).
"""

from __future__ import annotations

import copy
import dataclasses
import math
import difflib
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Optional, TypeVar, Union

from curate.core.errors import CurateError

P = TypeVar("P")


def check_params(where: str, schema: type[P], given: Mapping[str, Any] | None, partial: bool = False,
                 noun: str = "parameter") -> P:
    """``given`` checked against ``schema`` and filled with its defaults (``partial``: only
    checked, and returned as the checked mapping, for options that are completed elsewhere;
    ``noun``: what an unknown name is called, e.g. "key" for a file's sections)."""
    given = dict(given or {})
    fields = {f.name: f for f in dataclasses.fields(schema)}
    hints = typing.get_type_hints(schema)
    for name in given:
        if name not in fields:
            near = difflib.get_close_matches(str(name), list(fields), n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise CurateError(f"{where}: unknown {noun} {name!r}{hint}; known: {', '.join(fields)}")
    values = {}
    for name, value in given.items():
        values[name] = _check_value(f"{where}: {name}", hints[name], value)
        problem = range_problem(fields[name].metadata, values[name])
        if problem:
            raise CurateError(f"{where}: {name} {problem}, got {value!r}")
    return values if partial else schema(**values)


def check_schema(where: str, schema: Any) -> None:
    """That ``schema`` can be an options class: a dataclass whose annotations can be read and whose
    defaults are of their fields' types and in their ranges. A plugin's class is checked before it
    becomes a command, so its mistake is one line naming ``where`` and the field, not an internal
    error on the first run (a default of None stands for "not given" and passes)."""
    if not (isinstance(schema, type) and dataclasses.is_dataclass(schema)):
        raise CurateError(f"{where}: its options {schema!r} are not a dataclass (decorate the class with @dataclass)")
    try:
        hints = typing.get_type_hints(schema)
    except Exception as e:  # a name the annotations use is not defined where the class is
        raise CurateError(f"{where}: the annotations of {schema.__name__} cannot be read: "
                          f"{type(e).__name__}: {e}") from None
    for f in dataclasses.fields(schema):
        default = default_of(f)
        if default is dataclasses.MISSING or default is None:
            continue
        here = f"{where}: the default of field {f.name!r}"
        _check_value(here, hints[f.name], default)
        problem = range_problem(f.metadata, default)
        if problem:
            raise CurateError(f"{here} {problem}, got {default!r}")


def default_of(f: dataclasses.Field) -> Any:
    """A field's default, made by its factory where it has one (``MISSING``: none)."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


RANGE_KEYS = ("min", "max", "min_open", "max_open")


def field_range(schema: type, name: str) -> dict[str, Any]:
    """The range declared on ``schema``'s field ``name``: only the range keys of its metadata (not
    its help or flag), so a field elsewhere can take the same numbers
    (``metadata={**field_range(Ceiling, "percent"), "help": ...}``)."""
    meta = schema.__dataclass_fields__[name].metadata
    return {k: meta[k] for k in RANGE_KEYS if k in meta}


def range_text(meta: Mapping[str, Any]) -> str | None:
    """The declared range in words ("between 0.0 and 1.0", "above 0.0"), or None without one."""
    lo, hi = meta.get("min"), meta.get("max")
    lo_open, hi_open = bool(meta.get("min_open")), bool(meta.get("max_open"))
    if lo is not None and hi is not None:
        if not lo_open and not hi_open:
            return f"between {lo} and {hi}"
        return f"{'above' if lo_open else 'at least'} {lo} and {'below' if hi_open else 'at most'} {hi}"
    if lo is not None:
        return f"{'above' if lo_open else 'at least'} {lo}"
    if hi is not None:
        return f"{'below' if hi_open else 'at most'} {hi}"
    return None


def range_problem(meta: Mapping[str, Any], value: Any) -> str | None:
    """Why the number ``value`` lies outside the declared range ("must be ..."), else None; a
    float that is not finite (``nan``, ``inf``) is in no range, declared or not."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    text = range_text(meta)
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number" + (f" {text}" if text else "")
    if text is None:
        return None
    lo, hi = meta.get("min"), meta.get("max")
    low = lo is not None and (value <= lo if meta.get("min_open") else value < lo)
    high = hi is not None and (value >= hi if meta.get("max_open") else value > hi)
    return f"must be {text}" if low or high else None


def field_flag(f: dataclasses.Field) -> str:
    """The long flag of an options field (``--max-retries``; a ``--x/--no-x`` pair's first half)."""
    return (f.metadata.get("flag") or "--" + f.name.replace("_", "-")).split("/")[0]


def check_values(opts: Any) -> None:
    """Every number of an options dataclass (nested ones too) inside the range its field
    declares, and finite: the command line checks this as it parses, and this says the same for
    options made in Python, before a run starts (a ``nan`` price would be written as bare NaN)."""
    for f in dataclasses.fields(opts):
        value = getattr(opts, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            check_values(value)
            continue
        problem = range_problem(f.metadata, value)
        if problem:
            raise CurateError(f"{field_flag(f)} {value}: {problem}")


def as_dict(params: Any) -> dict[str, Any]:
    return dataclasses.asdict(params)


def schema_from_defaults(name: str, defaults: Mapping[str, Any]) -> type:
    """A parameters dataclass for a step whose defaults are a mapping of nested values (its own
    check looks inside them): the names are checked here, and so is the shape of a nested
    mapping (``min_chars: 5`` where ``{query: 3}`` is due), the values by the step."""
    return dataclasses.make_dataclass(name, [
        (key, _shape(value), dataclasses.field(default_factory=lambda v=value: copy.deepcopy(v)))
        for key, value in defaults.items()])


def _shape(default: Any) -> Any:
    """The type a default's shape asks for: a mapping of like values, a list of strings (or one
    string, which steps take as a list of one), or the default's own scalar type (a whole
    number where a number is due is fine); null is always allowed. No default (null, an
    empty or mixed list): anything, left to the step."""
    if isinstance(default, dict):
        return Optional[dict[str, _alike(list(default.values()))]]
    if isinstance(default, list) and default and all(isinstance(v, str) for v in default):
        return Optional[Union[list[str], str]]
    if isinstance(default, (bool, int, float, str)):
        return Optional[type(default)]
    return Any


def _alike(values: list[Any]) -> Any:
    """The one type all of a mapping's default values share (Any when they differ)."""
    for kind, hint in ((dict, None), (bool, bool), (int, int), (float, float), (str, str)):
        if values and all(isinstance(v, kind) for v in values):
            if kind is dict:
                return _shape(values[0])
            if kind is int and any(isinstance(v, bool) for v in values):
                return Any
            return Optional[hint]
    return Any


def _check_value(where: str, hint: Any, value: Any) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        arms = [a for a in args if a is not type(None)]
        for arm in arms:  # a mapping or list given where one is due: the fault is inside it, say where
            container = typing.get_origin(arm) or arm
            if ((container is dict and isinstance(value, dict))
                    or (container in (list, tuple) and isinstance(value, (list, tuple)))):
                return _check_value(where, arm, value)
        for arm in arms:
            try:
                return _check_value(where, arm, value)
            except CurateError:
                pass
        raise CurateError(f"{where}: expected {_describe(hint)}, got {value!r}")
    if origin is Literal:
        if value in args:
            return value
        raise CurateError(f"{where}: choose {' or '.join(repr(a) for a in args)}, got {value!r}")
    if hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif hint is str:
        if isinstance(value, str):
            return value
    elif origin in (list, tuple) or hint in (list, tuple):
        if isinstance(value, (list, tuple)):
            inner = args[0] if args else Any
            return [_check_value(where, inner, v) for v in value]
    elif origin is dict or hint is dict:
        if isinstance(value, dict):
            inner = args[1] if len(args) == 2 else Any
            return {k: _check_value(f"{where}.{k}", inner, v) for k, v in value.items()}
    else:
        return value
    raise CurateError(f"{where}: expected {_describe(hint)}, got {value!r}")


def _describe(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(a) for a in args)
    if origin is Literal:
        return " or ".join(repr(a) for a in args)
    names = {bool: "true or false", int: "a whole number", float: "a number", str: "a string",
             type(None): "null", list: "a list", dict: "a mapping"}
    return names.get(origin or hint, getattr(hint, "__name__", str(hint)))

