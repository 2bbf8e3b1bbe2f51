"""Find the shipped folders (prompts/, tasks/, filters/, data/) in a checkout or an installed wheel.

The wheel carries them under ``curate/_resources``; a checkout (or an editable install)
keeps them at the repository top level. Both must behave the same.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from curate.core.errors import CurateError

_PACKAGE = Path(__file__).resolve().parents[1]  # the curate package (this module is in core/)
KINDS = ("prompts", "tasks", "filters", "data")


@lru_cache(maxsize=None)
def resource_dir(kind: str) -> Path:
    """Return the folder that holds the shipped ``kind`` files (looked up once: it is asked
    for every rendered prompt)."""
    if kind not in KINDS:
        raise ValueError(f"unknown resource kind {kind!r}")
    for candidate in (_PACKAGE / "_resources" / kind, _PACKAGE.parent / kind):
        if candidate.is_dir():
            return candidate
    raise CurateError(f"the shipped '{kind}/' folder is missing from this installation")
