"""The layouts ``curate export`` writes: name -> writer(rows, out_dir, card) -> files written.

Every writer keeps the rows' order, writes UTF-8, and puts each file in place by renaming a
finished temporary file, so the same rows give the same bytes and no file is ever half there.
A new format is one module with a writer function decorated ``@register_format("name")``
(imported below for a shipped one); ``curate export --format name`` then writes it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from curate.export.formats.beir import write_beir
from curate.export.formats.flagembedding import write_flagembedding
from curate.export.formats.hf import write_hf
from curate.export.formats.nemo import write_nemo, write_nemo_automodel
from curate.export.formats.st import write_st
from curate.export.formats.tevatron import write_tevatron
from curate.export.rows import ExportRow

Writer = Callable[[list[ExportRow], Path, dict], list[Path]]

def register_format(name: str):
    """Make ``writer`` the layout ``--format name`` writes."""
    def deco(writer: Writer) -> Writer:
        WRITERS[name] = writer
        return writer

    return deco


WRITERS: dict[str, Writer] = {
    "hf": write_hf,
    "sentence-transformers": write_st,
    "flagembedding": write_flagembedding,
    "tevatron": write_tevatron,
    "nemo": write_nemo,
    "nemo-automodel": write_nemo_automodel,
    "beir": write_beir,
}
