"""Render prompt templates: Jinja's sandbox, StrictUndefined, errors naming template and variable.

Templates may come from users, so they never run with more power than the sandbox gives.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from curate.core.errors import CurateError
from curate.resources import resource_dir


@lru_cache(maxsize=None)
def _environment(search_path: tuple[str, ...]) -> jinja2.Environment:
    return ImmutableSandboxedEnvironment(
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


def template_from_string(source: str) -> jinja2.Template:
    """A template from text (e.g. an instruction a user passed on the command line), sandboxed."""
    return _environment(search_path()).from_string(source)


def template_hash(template: jinja2.Template) -> str:
    """Hash of the template source, recorded in every record's meta for provenance."""
    return _file_hash(template.filename or "")


@lru_cache(maxsize=256)
def _file_hash(filename: str) -> str:
    """Read once per run: the loader also reads a template once, so hash and text agree."""
    source = Path(filename).read_bytes() if filename else b""
    return hashlib.sha256(source).hexdigest()[:12]


def render(template: jinja2.Template, variables: dict) -> str:
    try:
        return template.render(**variables).strip()
    except jinja2.UndefinedError as e:
        raise CurateError(f"template {template.name!r}: undefined variable: {e.message}") from None
    except jinja2.exceptions.SecurityError as e:
        raise CurateError(f"template {template.name!r}: not allowed in the sandbox: {e}") from None
    except jinja2.TemplateError as e:
        raise CurateError(f"template {template.name!r}: {e}") from None
