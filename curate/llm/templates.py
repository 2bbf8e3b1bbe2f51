"""Render prompt templates: Jinja's sandbox, StrictUndefined, errors naming template and variable.

Templates may come from users, so they never run with more power than the sandbox gives: no
attribute tricks, ``range`` capped at Jinja's ``MAX_RANGE``, ``seq * n`` and ``a ** b`` refused
past ``MAX_SIZE`` before they are built, ``lipsum`` held to ``MAX_LIPSUM_WORDS``, and output
stopped past ``MAX_SIZE`` characters. Time is bounded too: a render has ``MAX_SECONDS``, checked
as output is produced, at every call and at every step of every ``{% for %}`` loop (nested
loops over ``range(99999)`` write nothing for hours, so output alone cannot tell). What still
fails (a MemoryError, a division by zero) is one line naming the template.
"""

from __future__ import annotations

import contextvars
import hashlib
import time
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import generate_lorem_ipsum

from curate.core.errors import CurateError
from curate.core.resources import resource_dir

MAX_SIZE = 10_000_000  # characters (or items) a template may build with one operator, or output
MAX_SECONDS = 5.0  # one render; prompt templates take milliseconds
MAX_LIPSUM_WORDS = 100_000  # paragraphs x most words a paragraph: about 0.05 s
_BOUNDED = "_curate_bounded"  # the filter every for loop's iterable passes through (see _Sandbox._parse)
_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("curate_template_deadline", default=None)


class RenderTimeout(jinja2.exceptions.SecurityError):
    """A render ran past ``MAX_SECONDS``."""


def _check_deadline() -> None:
    deadline = _deadline.get()
    if deadline is not None and time.monotonic() > deadline:
        raise RenderTimeout(f"rendering took more than {MAX_SECONDS:g} s (a loop too long for a prompt?)")


def _bounded(iterable: Iterable[Any]) -> Iterator[Any]:
    """The loop's items, the deadline checked before each one."""
    for item in iterable:
        _check_deadline()
        yield item


def _lipsum(n: int = 5, html: bool = True, min: int = 20, max: int = 100) -> str:  # Jinja's names
    """Jinja's ``lipsum``, refused past ``MAX_LIPSUM_WORDS`` words (``lipsum(3000, max=…)`` ran
    for minutes, inside one call no deadline can stop)."""
    if not all(isinstance(v, int) for v in (n, min, max)) or n * max > MAX_LIPSUM_WORDS:
        raise jinja2.exceptions.SecurityError(f"lipsum({n!r}, max={max!r}) writes more than the sandbox allows "
                                              f"({MAX_LIPSUM_WORDS:,} words)")
    return generate_lorem_ipsum(n, html, min, max)


class _Sandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, with ``*`` and ``**`` checked before they run: the two operators
    that build something far larger than the template in one step."""

    intercepted_binops = frozenset({"*", "**"})

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.globals["lipsum"] = _lipsum
        self.filters[_BOUNDED] = _bounded

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        """The parsed template, each ``{% for %}``'s iterable wrapped in ``_bounded``, so that
        every step of every loop checks the render's deadline."""
        tree = super()._parse(source, name, filename)
        for loop in tree.find_all(nodes.For):
            loop.iter = nodes.Filter(loop.iter, _BOUNDED, [], [], None, None, lineno=loop.lineno)
        return tree

    def call(self, context: Any, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        _check_deadline()  # a macro that calls itself, or calls many times over
        return super().call(context, obj, *args, **kwargs)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        whole = [isinstance(v, int) and not isinstance(v, bool) for v in (left, right)]
        if operator == "*":
            for seq, n, is_int in ((left, right, whole[1]), (right, left, whole[0])):
                if isinstance(seq, (str, list, tuple)) and is_int and len(seq) * n > MAX_SIZE:
                    raise jinja2.exceptions.SecurityError(
                        f"{type(seq).__name__} * {n:,} builds {len(seq) * n:,} items, more than the sandbox "
                        f"allows ({MAX_SIZE:,})")
        elif operator == "**" and all(whole) and abs(left) > 1 and right > 0 and left.bit_length() * right > 8 * MAX_SIZE:
            raise jinja2.exceptions.SecurityError(f"{left} ** {right:,} is larger than the sandbox allows")
        return super().call_binop(context, operator, left, right)


@lru_cache(maxsize=None)
def _environment(search_path: tuple[str, ...]) -> jinja2.Environment:
    return _Sandbox(
        loader=jinja2.FileSystemLoader(list(search_path)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def search_path(extra_dirs: Sequence[str | Path] = ()) -> tuple[str, ...]:
    """User folders first (so a user can override a shipped template), then the shipped prompts/."""
    dirs = [str(Path(d)) for d in extra_dirs if d] + [str(resource_dir("prompts"))]
    return tuple(dict.fromkeys(dirs))


def load_template(name: str, extra_dirs: Sequence[str | Path] = ()) -> jinja2.Template:
    env = _environment(search_path(extra_dirs))
    try:
        return env.get_template(name)
    except jinja2.TemplateNotFound:
        raise CurateError(f"template {name!r} not found in {', '.join(search_path(extra_dirs))}") from None
    except jinja2.TemplateSyntaxError as e:
        raise CurateError(f"{e.filename or name}:{e.lineno}: template syntax error: {e.message}") from None
    except UnicodeDecodeError as e:
        raise CurateError(f"template {name!r}: not UTF-8 text (byte 0x{e.object[e.start]:02x}); "
                          f"save it as UTF-8") from None


def template_files(names: Sequence[str], extra_dirs: Sequence[str | Path] = ()) -> list[Path]:
    """The files behind the named templates and every template they include, extend or import,
    as the search path resolves them: what a run that renders them read (its identity hashes them,
    so an edited prompt is a new run). A name not found is left to the run to report."""
    import jinja2.meta

    env = _environment(search_path(extra_dirs))
    found: dict[str, Path] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in found:
            continue
        try:
            source, filename, _ = env.loader.get_source(env, name)
        except (jinja2.TemplateNotFound, UnicodeDecodeError, OSError):
            continue
        found[name] = Path(filename)
        try:
            todo += [n for n in jinja2.meta.find_referenced_templates(env.parse(source)) if n]
        except jinja2.TemplateSyntaxError:
            continue
    return sorted(set(found.values()))


def template_from_string(source: str, name: str | None = None) -> jinja2.Template:
    """A template from text (e.g. an instruction a user passed on the command line), sandboxed.
    ``name`` is what errors call it (default: the text's first characters), never None."""
    template = _environment(search_path()).from_string(source)
    template.name = name or _snippet(source)
    return template


def _snippet(source: str, width: int = 40) -> str:
    text = " ".join(source.split())
    return text if len(text) <= width else text[:width - 1] + "…"


def template_hash(template: jinja2.Template) -> str:
    """Hash of the template source, recorded in every record's meta for provenance."""
    return _file_hash(template.filename or "")


@lru_cache(maxsize=256)
def _file_hash(filename: str) -> str:
    """Read once per run: the loader also reads a template once, so hash and text agree."""
    source = Path(filename).read_bytes() if filename else b""
    return hashlib.sha256(source).hexdigest()[:12]


def render(template: jinja2.Template, variables: dict) -> str:
    label = f"template {template.name or 'from text'!r}"
    try:
        return _capped_render(template, variables).strip()
    except jinja2.UndefinedError as e:
        raise CurateError(f"{label}: undefined variable: {e.message}") from None
    except RenderTimeout as e:
        raise CurateError(f"{label}: {e}") from None
    except (jinja2.exceptions.SecurityError, OverflowError) as e:  # Jinja's range over MAX_RANGE: OverflowError
        raise CurateError(f"{label}: not allowed in the sandbox: {e}") from None
    except jinja2.TemplateError as e:
        raise CurateError(f"{label}: {e}") from None
    except MemoryError:
        raise CurateError(f"{label}: builds more than memory holds") from None
    except RecursionError:
        raise CurateError(f"{label}: recurses too deeply (a macro calling itself?)") from None
    except (ArithmeticError, TypeError, ValueError) as e:  # 1 / 0, 'a' + 1
        raise CurateError(f"{label}: {type(e).__name__}: {e}") from None


def _capped_render(template: jinja2.Template, variables: dict) -> str:
    """``template.render``, stopped once the output passes ``MAX_SIZE`` characters (a loop that
    writes a little many times builds its output here, not in an operator) or the render passes
    ``MAX_SECONDS`` (checked here per piece of output, and by loops and calls as they run)."""
    parts, size = [], 0
    token = _deadline.set(time.monotonic() + MAX_SECONDS)
    try:
        for chunk in template.generate(**variables):
            size += len(chunk)
            if size > MAX_SIZE:
                raise jinja2.exceptions.SecurityError(f"an output of more than {MAX_SIZE:,} characters is more "
                                                      "than the sandbox allows")
            _check_deadline()
            parts.append(chunk)
    finally:
        _deadline.reset(token)
    return "".join(parts)
