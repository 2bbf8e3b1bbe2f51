"""The one way curate hashes what a run read and what it was asked: a file, a folder, or a
JSON-able value. Run fingerprints, ``run.json``'s input digests and ablate's arm keys all
come from here, so "the same input" means the same thing everywhere."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

CHUNK = 1 << 20


def file_digest(path: str | os.PathLike) -> str | None:
    """SHA-256 of a file's bytes (a folder: of its files and their names, in name order; hidden
    files left out); None when nothing is there."""
    digest, _ = tree_digest(path)
    return digest


def tree_digest(path: str | os.PathLike) -> tuple[str | None, int]:
    """SHA-256 and size in bytes of a file or folder (see ``file_digest``)."""
    p = Path(path)
    if not p.exists():
        return None, 0
    files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file() and not f.name.startswith("."))
    digest, size = hashlib.sha256(), 0
    for f in files:
        if p.is_dir():
            digest.update(str(f.relative_to(p)).encode() + b"\0")
        with f.open("rb") as fh:
            for chunk in iter(lambda: fh.read(CHUNK), b""):
                digest.update(chunk)
                size += len(chunk)
    return digest.hexdigest(), size


def value_digest(value: Any, length: int | None = None) -> str:
    """SHA-256 of a JSON-able value, keys sorted (objects: their text), cut to ``length``."""
    blob = json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    text = hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()
    return text[:length] if length else text
