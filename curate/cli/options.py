"""Command-line options generated from dataclass fields, so that each option is declared once.

A stage's options dataclass is the one place an option is written down: its name, type,
default, range and help. ``options_from(Schema)`` turns every field into a click option and
``from_options(Schema, kwargs)`` turns the parsed values back into ``Schema``::

    @cli.command()
    @options_from("curate.export.main:ExportOptions")
    def export(**kw):
        run_stage(STAGE, from_options(ExportOptions, kw))

What a field becomes:

* the flag: ``--`` and the field name with dashes (``max_retries``: ``--max-retries``), or the
  metadata's ``"flag"`` (``"--in"``; a bool's pair ``"--light/--full"``) and ``"short"`` (``"-n"``);
  ``"argument": True`` makes it a positional argument instead;
* the type, from the annotation: ``bool`` a flag (``--x/--no-x`` when it defaults to true),
  ``int``/``float`` a number, in ``IntRange``/``FloatRange`` when the metadata declares a range
  (``min``, ``max``, ``min_open``, ``max_open``, as ``curate.core.params`` reads them too),
  ``Literal[...]`` a choice, ``tuple[X, ...]`` a repeatable option, ``dict[str, X]`` a
  repeatable ``NAME=VALUE`` (values read as YAML); ``"path"`` (``"file"``, ``"dir"`` or
  ``"any"``, with ``"exists"``) a path; ``"choices"`` a choice the annotation does not spell;
* the default: the field's (``"cli_default"`` where the command line's differs from the API's);
  a field without one is required;
* the help: ``"help"``; ``{name}`` in it is filled from ``help_vars`` (the enclosing field's
  ``"help_vars"`` for a nested dataclass); a help that ends with its own ``[default: ...]``
  note gets no second one from click;
* ``"cli": False``: no option (an API-only field, such as a callback);
* a field ``out`` with ``"path": "dir"`` is a run folder: parsed first, and a swap a killed run
  left half done there is finished before any other option is checked;
* the rest: ``"envvar"``, ``"hidden"``, ``"metavar"``, ``"flag_value"`` (the value of a bare
  ``--opt``), ``"show_default"``, ``"callback"``/``"expose"`` (an option that acts while it is
  parsed), and ``"deprecated": "new_field"``: a hidden alias that still works and says, in one
  line on stderr, which flag replaces it (with ``"translated": True`` the stage says it, as
  it translates the old value: ``curate.negatives.knobs``).

A field whose type is itself a dataclass (``LLMOptions`` in ``GenerateOptions``, the
``Executor``) contributes its own fields' options, after the others; ``from_options`` builds it
the same way. The schema may be named as ``"module:Class"``: its module is then imported only
when the command's options are needed (its help, or a run), so ``curate --help`` imports no
stage.
"""

from __future__ import annotations

import dataclasses
import math
import importlib
import inspect
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from types import UnionType
from typing import Any, Literal, Union

import click
from click.core import ParameterSource

from curate.core.errors import CurateError


class Command(click.Command):
    """A click command whose dataclass-declared options are built the first time anything asks
    for them (help, parsing, completion), not when the command is defined."""

    @property
    def params(self) -> list[click.Parameter]:
        params = self.__dict__.setdefault("_params", [])
        if any(isinstance(p, _Fields) for p in params):
            params[:] = [q for p in params for q in (p.build() if isinstance(p, _Fields) else (p,))]
            _check_unique(self.name, params)
        return params

    @params.setter
    def params(self, value: list[click.Parameter]) -> None:
        self.__dict__["_params"] = list(value)


def options_from(schema: type | str, *, exclude: Iterable[str] = (), rename: Mapping[str, str] | None = None,
                 required: Iterable[str] = (), types: Mapping[str, click.ParamType] | None = None,
                 help_vars: Mapping[str, str] | None = None) -> Callable:
    """A decorator adding one option per field of ``schema`` (a dataclass, or ``"module:Class"``
    for one imported only when the options are needed) to a ``Command``.

    ``exclude``: fields left out (the API takes them, the command line does not; a nested
    dataclass's fields by their own names); ``rename``: a field's flag for this command only;
    ``required``: fields this command requires though they have a default; ``types``: the
    click type of a field whose annotation says too little (``int | str``); ``help_vars``:
    what ``{name}`` in the help texts stands for."""
    spec = _Fields(schema, frozenset(exclude), dict(rename or {}), frozenset(required), dict(types or {}),
                   dict(help_vars or {}))

    def decorate(fn):
        if isinstance(fn, click.Command):
            raise TypeError("options_from goes below the @command decorator")
        if not hasattr(fn, "__click_params__"):
            fn.__click_params__ = []
        fn.__click_params__.append(spec)
        return fn

    return decorate


def from_options(schema: type, kwargs: Mapping[str, Any], **given: Any) -> Any:
    """``schema`` built from a command's parsed options: each field from the option of its name
    (nested dataclasses from theirs), ``given`` values as they are, the rest at their defaults."""
    hints = typing.get_type_hints(schema)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(schema):
        if not f.init:
            continue
        if f.name in given:
            values[f.name] = given[f.name]
            continue
        inner = nested_schema(hints[f.name])
        if inner is not None:
            if any(g.name in kwargs for g in dataclasses.fields(inner)):
                values[f.name] = from_options(inner, kwargs)
            continue
        if f.name not in kwargs:
            continue
        values[f.name] = _to_field(f.name, hints[f.name], kwargs[f.name])
    return schema(**values)


def resolve(schema: type | str) -> type:
    """The dataclass itself, importing ``"module:Class"``."""
    if isinstance(schema, str):
        module, _, name = schema.partition(":")
        schema = getattr(importlib.import_module(module), name)
    if not dataclasses.is_dataclass(schema):
        raise TypeError(f"{schema!r} is not a dataclass")
    return schema


def nested_schema(hint: Any) -> type | None:
    """The dataclass a field holds (``X`` or ``X | None``), else None."""
    base = _optional(hint)
    return base if isinstance(base, type) and dataclasses.is_dataclass(base) else None


def flag_of(schema: type, name: str, rename: Mapping[str, str] | None = None) -> str:
    """The long flag of ``schema``'s field ``name`` (``--max-retries``; a pair's first half)."""
    from curate.core.params import field_flag  # not at import: `curate --help` loads no more than it lists

    renamed = (rename or {}).get(name)
    return renamed.split("/")[0] if renamed else field_flag(schema.__dataclass_fields__[name])


# --- building the options --------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Fields:
    """The options of one dataclass, waiting in a command's parameter list until first needed."""

    schema: type | str
    exclude: frozenset[str]
    rename: dict[str, str]
    required: frozenset[str]
    types: dict[str, click.ParamType]
    help_vars: dict[str, str]

    def build(self) -> list[click.Parameter]:
        return _params(resolve(self.schema), self, self.help_vars)


def _params(schema: type, spec: _Fields, help_vars: Mapping[str, str]) -> list[click.Parameter]:
    hints = typing.get_type_hints(schema)
    fields = {f.name: f for f in dataclasses.fields(schema) if f.init}
    own: list[click.Parameter] = []
    inner: list[click.Parameter] = []
    for name in _declared_order(schema, fields):
        f = fields[name]
        if name in spec.exclude or f.metadata.get("cli") is False:
            continue
        sub = nested_schema(hints[name])
        if sub is not None:
            inner += _params(sub, spec, {**help_vars, **f.metadata.get("help_vars", {})})
        else:
            own.append(_param(schema, f, hints[name], spec, help_vars))
    return own + inner


def _declared_order(schema: type, fields: Mapping[str, dataclasses.Field]) -> list[str]:
    """Field names, the class's own first, then each base's (a subclass's options lead its help)."""
    order: list[str] = []
    for klass in schema.__mro__:
        for name in inspect.get_annotations(klass):  # the class's own, not its bases'
            if name in fields and name not in order:
                order.append(name)
    return order + [n for n in fields if n not in order]


def _param(schema: type, f: dataclasses.Field, hint: Any, spec: _Fields,
           help_vars: Mapping[str, str]) -> click.Parameter:
    """The one option (or argument) of field ``f``."""
    meta = f.metadata
    base = _optional(hint)
    origin = typing.get_origin(base)
    multiple = origin in (tuple, list) or base in (tuple, list)
    pairs = origin is dict or base is dict
    element = _element(base) if multiple else base
    from curate.core.params import default_of  # not at import, as field_flag above

    default = meta.get("cli_default", default_of(f))
    required = f.name in spec.required or default is dataclasses.MISSING
    kw: dict[str, Any] = {"required": required}
    help_text = meta.get("help")
    if help_text is not None:
        help_text = re.sub(r"\{(\w+)\}", lambda m: str(help_vars.get(m[1], m[0])), help_text)

    if meta.get("argument"):
        if multiple:
            kw.update(nargs=-1, required=False)
        kw["type"] = click.UNPROCESSED if meta.get("unprocessed") else spec.types.get(f.name) or _type(meta, element)
        if default not in (dataclasses.MISSING, None, ()) and not multiple:
            kw["default"] = default
        return click.Argument([f.name], **kw)

    flag = spec.rename.get(f.name) or meta.get("flag") or "--" + f.name.replace("_", "-")
    if element is bool and not multiple and default is True and "/" not in flag:
        flag = f"{flag}/--no-{flag[2:]}"  # a flag that is on already needs its off switch
    decls = [*([meta["short"]] if meta.get("short") else []), flag, f.name]
    kw["help"] = help_text
    if element is bool and not multiple:
        kw["is_flag"] = True
        if "/" in flag:  # --x/--no-x: the default is one of the two, so say which
            kw["default"] = default
            kw["show_default"] = default is not None
    else:
        if pairs:
            kw.update(multiple=True, type=str, metavar=meta.get("metavar", "NAME=VALUE"))
        else:
            kw["type"] = spec.types.get(f.name) or _type(meta, element)
            kw["multiple"] = multiple
        if default not in (dataclasses.MISSING, None, (), [], {}):
            kw["default"] = tuple(default) if multiple else default
            kw["show_default"] = True
        elif default is None:
            kw["default"] = None
    if "flag_value" in meta:
        kw.update(is_flag=False, flag_value=meta["flag_value"])
    if "metavar" in meta:
        kw["metavar"] = meta["metavar"]
    if "envvar" in meta:
        kw.update(envvar=meta["envvar"], show_envvar=True)
    if _states_default(help_text):
        kw["show_default"] = False  # click's own note would say it a second time
    if "show_default" in meta:
        kw["show_default"] = meta["show_default"]
    if meta.get("hidden"):
        kw["hidden"] = True
    if "callback" in meta:
        kw["callback"] = meta["callback"]
    if meta.get("expose") is False:
        kw["expose_value"] = False
    if f.name == "out" and meta.get("path") == "dir":  # a run folder: settled before any other option is checked
        kw.update(is_eager=True, callback=_settle_run_folder)
    if "deprecated" in meta:  # "translated": the value means something else now, and the stage says what
        kw["hidden"] = True
        if not meta.get("translated"):
            kw["callback"] = _deprecated(flag.split("/")[0], flag_of(schema, meta["deprecated"], spec.rename))
    if required:
        kw.pop("default", None)
        kw.pop("show_default", None)
    if "help_names" in meta:
        option = _NamesHelpOption(decls, **kw)
        option.names_from = dict(meta["help_names"])
        return option
    return click.Option(decls, **kw)


def _states_default(help_text: str | None) -> bool:
    """Whether a help text already ends with its own ``[default: ...]`` note (one written by
    hand, as for a default that is no single value): click's would repeat it."""
    return bool(help_text) and re.search(r"\[default: [^\]]*\]\.?\s*$", help_text) is not None


def _settle_run_folder(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """``--out`` is parsed first (eager): a swap a killed run left half done there is finished
    before another option or input can fail the command (``curate.core.runner.settle``)."""
    if value and not ctx.resilient_parsing:
        from curate.core.runner import settle

        settle(value)
    return value


class _NamesHelpOption(click.Option):
    """An option whose help lists what a registry holds (``"help_names": {"formats":
    "curate.export.formats:in_order"}`` fills ``{formats}``), read only when the help is shown."""

    names_from: dict[str, str]

    def get_help_record(self, ctx: click.Context):
        text = self.help
        try:
            self.help = re.sub(r"\{(\w+)\}", lambda m: _names(self.names_from[m[1]]) if m[1] in self.names_from
                               else m[0], text or "")
            return super().get_help_record(ctx)
        finally:
            self.help = text


def _names(where: str) -> str:
    """``"module:attr"``'s names, comma-separated: a registry's, a mapping's keys, or what a
    function returns."""
    module, _, attr = where.partition(":")
    try:
        found = getattr(importlib.import_module(module), attr)
        names = found.names() if hasattr(found, "names") else list(found) if isinstance(found, Mapping) else found()
    except Exception as e:  # a broken plugin must not break --help: say where the names are
        return f"the names in {module} (unreadable now: {type(e).__name__})"
    return ", ".join(names)


def _deprecated(old: str, new: str) -> Callable:
    def warn(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        source = ctx.get_parameter_source(param.name)
        if source in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT):
            click.echo(f"curate: {old} is deprecated: use {new}", err=True)
        return value

    return warn


class FiniteFloat(click.FloatRange):
    """A number option: a finite one (``nan`` and ``inf`` parse as floats, pass every range
    check and end up as bare ``NaN`` in JSON that strict readers refuse), in its range if any."""

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return super().convert(number, param, ctx)

    def _describe_range(self) -> str:
        return super()._describe_range() if self.min is not None or self.max is not None else ""

    def get_metavar(self, *args: Any, **kwargs: Any) -> str | None:
        return "FLOAT" if self.min is None and self.max is None else super().get_metavar(*args, **kwargs)


def _type(meta: Mapping[str, Any], hint: Any) -> click.ParamType | type | None:
    """The click type of one value of a field."""
    if "choices" in meta:
        return click.Choice(list(meta["choices"]))
    if typing.get_origin(hint) is Literal:
        return click.Choice([str(a) for a in typing.get_args(hint)])
    if "path" in meta:
        kind = meta["path"]
        return click.Path(exists=bool(meta.get("exists")), file_okay=kind != "dir", dir_okay=kind != "file")
    if hint in (int, float):
        lo, hi = meta.get("min"), meta.get("max")
        if lo is None and hi is None and hint is int:
            return hint
        kind = click.IntRange if hint is int else FiniteFloat
        return kind(lo, hi, min_open=bool(meta.get("min_open")), max_open=bool(meta.get("max_open")))
    if hint in (str, Any):
        return str
    raise TypeError(f"no command-line type for {hint!r}: give the field a 'choices' or 'path', "
                    "or options_from(types={...})")


def _optional(hint: Any) -> Any:
    """``X`` of ``X | None`` (any other hint as it is)."""
    if typing.get_origin(hint) in (Union, UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return hint


def _element(hint: Any) -> Any:
    args = typing.get_args(hint)
    return args[0] if args else str


def _check_unique(command: str | None, params: list[click.Parameter]) -> None:
    seen: set[str] = set()
    for p in params:
        if p.expose_value and p.name in seen:
            raise TypeError(f"curate {command}: two options store into {p.name!r}")
        seen.add(p.name)


# --- parsed values back into fields -----------------------------------------------------------


def _to_field(name: str, hint: Any, value: Any) -> Any:
    base = _optional(hint)
    origin = typing.get_origin(base)
    if value is None:
        return None
    if origin is dict or base is dict:
        return _pairs(name, value)
    if origin is tuple or base is tuple:
        return tuple(value)
    if origin is list or base is list:
        return list(value)
    return value


def _pairs(name: str, given: Iterable[str]) -> dict[str, Any]:
    """``NAME=VALUE`` strings as a mapping, each value read as YAML (``50`` a number)."""
    import yaml

    out: dict[str, Any] = {}
    for pair in given:
        if "=" not in pair:
            raise CurateError(f"{_current_flag(name)} expects NAME=VALUE, got {pair!r}")
        key, value = pair.split("=", 1)
        out[key.strip()] = yaml.safe_load(value) if value.strip() else ""
    return out


def _current_flag(name: str) -> str:
    """The flag the running command gives the option stored as ``name``."""
    ctx = click.get_current_context(silent=True)
    for param in ctx.command.params if ctx else ():
        if param.name == name and param.opts:
            return max(param.opts, key=len)
    return "--" + name.replace("_", "-")
