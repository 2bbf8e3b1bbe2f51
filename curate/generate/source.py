"""Where a generate run's items come from besides brainstormed tasks: an input source.

A source turns a file (or folder) of the user's into items whose given texts the model does not
write: ``pairs`` (``--from-pairs``: a real query and positive each, the model writes graded
negatives) and ``corpus`` (``--from-corpus``: a passage each, the model writes the query) are
shipped, one module each in ``curate/generate/sources/``; a plugin adds one through the
``curate.generate_sources`` entry points and a user names it with ``--from NAME=PATH``. A source
says which family it implies, checks that a spec can take what it gives, reads its input before
any server starts, and plans the items of one family (``curate.generate.examples.Planning``: what
every source plans with).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError
from curate.core.progress import RunStats
from curate.core.records import Task
from curate.core.registry import Registry
from curate.generate.examples import Item, Planning
from curate.llm.taskspec import TaskSpec


@dataclass(frozen=True)
class Source:
    """One input source of ``generate``."""

    name: str  # what ``--from NAME=PATH`` names
    family: str  # the family it implies when no --task is given
    flag: str  # how a user gives it, for messages ("--from-corpus", "--from NAME=PATH")
    # the input, read and checked before any server starts: (the path, the run's options) -> data
    read: Callable[[str, Any], Any]
    # one family's items from the data: (spec, data, tasks, planning, stats, out folder) -> items
    items: Callable[[TaskSpec, Any, Sequence[Task], Planning, RunStats, Path], list[Item]]
    check_spec: Callable[[TaskSpec], None]  # a spec that cannot take what the source gives: one line


SOURCES: Registry[Source] = Registry("generate input source", "curate.generate_sources",
                                     builtin=("curate.generate.sources",))


def register_source(source: Source) -> Source:
    """Make ``source`` the one ``--from NAME=PATH`` names (and the shipped flags use)."""
    SOURCES.register(source.name, source)
    return source


def parse_from(value: str) -> tuple[str, str]:
    """``--from NAME=PATH`` as (name, path); a value without ``=`` is one line saying the form."""
    name, sep, path = value.partition("=")
    if not sep or not name.strip() or not path.strip():
        raise CurateError(f"--from {value!r}: give NAME=PATH (known sources: {', '.join(SOURCES.names())})")
    return name.strip(), path.strip()


__all__ = ["Planning", "SOURCES", "Source", "parse_from", "register_source"]
