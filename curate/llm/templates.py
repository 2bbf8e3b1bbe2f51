"""Render prompt templates: Jinja's sandbox, StrictUndefined, errors naming template and variable.

Templates may come from users, so they never run with more power than the sandbox gives: no
attribute tricks, ``range`` capped at Jinja's ``MAX_RANGE``, ``seq * n`` and ``a ** b`` refused
past ``MAX_SIZE`` before they are built, and output stopped past ``MAX_SIZE`` characters. What
still fails (a MemoryError, a division by zero) is one line naming the template.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from curate.core.errors import CurateError
from curate.core.resources import resource_dir

MAX_SIZE = 10_000_000  # characters (or items) a template may build with one operator, or output


class _Sandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, with ``*`` and ``**`` checked before they run: the two operators
    that build something far larger than the template in one step."""

    intercepted_binops = frozenset({"*", "**"})

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
    writes a little many times builds its output here, not in an operator)."""
    parts, size = [], 0
    for chunk in template.generate(**variables):
        size += len(chunk)
        if size > MAX_SIZE:
            raise jinja2.exceptions.SecurityError(f"an output of more than {MAX_SIZE:,} characters is more "
                                                  "than the sandbox allows")
        parts.append(chunk)
    return "".join(parts)
