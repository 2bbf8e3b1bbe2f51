"""Typed parameters: a step declares a dataclass, and whatever a recipe or spec gives it is
checked against that dataclass before any work starts.

The dataclass is the one home of a step's defaults. An unknown name (``positive_topp``), a
wrong type (``percent: high``) or a value out of range (``positive_top: -3``) is one line
naming where it came from, with the closest known name for a typo, instead of being ignored
or dropping every record. Ranges and choices live in the field's metadata:
``field(default=10, metadata={"min": 0})``, ``Literal["keep", "drop"]``.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, TypeVar, Union

from curate.core.errors import CurateError

P = TypeVar("P")


def check_params(where: str, schema: type[P], given: Mapping[str, Any] | None, partial: bool = False) -> P:
    """``given`` checked against ``schema`` and filled with its defaults (``partial``: only
    checked, and returned as the checked mapping, for options that are completed elsewhere)."""
    given = dict(given or {})
    fields = {f.name: f for f in dataclasses.fields(schema)}
    hints = typing.get_type_hints(schema)
    for name in given:
        if name not in fields:
            near = difflib.get_close_matches(str(name), list(fields), n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            raise CurateError(f"{where}: unknown parameter {name!r}{hint}; known: {', '.join(fields)}")
    values = {}
    for name, value in given.items():
        values[name] = _check_value(f"{where}: {name}", hints[name], value)
        meta = fields[name].metadata
        if isinstance(values[name], (int, float)) and not isinstance(values[name], bool):
            lo, hi = meta.get("min"), meta.get("max")
            if (lo is not None and values[name] < lo) or (hi is not None and values[name] > hi):
                span = (f"between {lo} and {hi}" if lo is not None and hi is not None
                        else f"at least {lo}" if lo is not None else f"at most {hi}")
                raise CurateError(f"{where}: {name} must be {span}, got {value!r}")
    return values if partial else schema(**values)


def as_dict(params: Any) -> dict[str, Any]:
    return dataclasses.asdict(params)


def schema_from_defaults(name: str, defaults: Mapping[str, Any]) -> type:
    """A parameters dataclass for a step whose defaults are a mapping of nested values (its own
    check looks inside them): the names are checked here, the values by the step."""
    return dataclasses.make_dataclass(name, [
        (key, Any, dataclasses.field(default_factory=lambda v=value: copy.deepcopy(v)))
        for key, value in defaults.items()])


def _check_value(where: str, hint: Any, value: Any) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for arm in (a for a in args if a is not type(None)):
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
