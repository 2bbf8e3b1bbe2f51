"""The layouts ``curate export`` writes: each is a ``Format`` in the ``FORMATS`` registry.

A format is one module: its writer, ``writer(rows, out_dir, card) -> files written``, and its
``usage``, the paragraph of the card above several formats that says how to train on it,
registered together with ``@register_format("name", usage=...)``. The shipped ones are the
modules of this package (``FORMATS`` imports them all when it is first asked); a plugin adds one
through the ``curate.export_formats`` entry-point group (docs/extend.md). ``curate export
--format name`` then writes it, and ``--format all`` writes every one, in ``order``.

Every writer keeps the rows' order, writes UTF-8, and puts each file in place by renaming a
finished temporary file, so the same rows give the same bytes and no file is ever half there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from curate.core.registry import Registry

if TYPE_CHECKING:
    from curate.export.formats.usage import Settings
    from curate.export.rows import ExportRow

Writer = Callable[["list[ExportRow]", Path, dict], "list[Path]"]
# usage(settings, where) -> markdown: how to train on the files in ``where`` (EXPORT/name or EXPORT)
Usage = Callable[["Settings", str], str]


@dataclass(frozen=True)
class Format:
    write: Writer
    usage: Usage | None = None  # None: the training section says nothing about this format
    order: int = 100  # its place in ``--format all`` and in the training section (then by name)
    own_folder: bool = False  # its trainer reads every file of a folder: a sub-folder of its own even alone


FORMATS: Registry[Format] = Registry("export format", "curate.export_formats", builtin=("curate.export.formats",))


def register_format(name: str, usage: Usage | None = None, *, order: int = 100, own_folder: bool = False):
    """Make the decorated writer the layout ``--format name`` writes (see ``Format``)."""
    def deco(writer: Writer) -> Writer:
        FORMATS.register(name, Format(writer, usage, order, own_folder))
        return writer

    return deco


def in_order(names: Iterable[str] | None = None) -> list[str]:
    """``names`` (default: every format) in the formats' own order."""
    chosen = FORMATS.names() if names is None else list(names)
    return sorted(chosen, key=lambda n: (FORMATS.get(n).order, n))


def writers(names: Iterable[str] | None = None) -> dict[str, Writer]:
    """Name -> writer of ``names`` as given (default: every format, in their order)."""
    return {n: FORMATS.get(n).write for n in (in_order() if names is None else names)}
