"""Seeded samples of JSONL lines, and records looked up by id, without parsing whole files.

A run of a million records must still give a page that opens fast, so the page holds a sample;
the counts beside it stay exact. Counting lines and picking some costs one pass over the bytes,
and only the chosen lines are parsed."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_ID = re.compile(rb'"id"\s*:\s*"((?:[^"\\]|\\.)*)"')


def _lines(path: Path) -> Iterator[bytes]:
    with path.open("rb") as fh:
        for line in fh:
            if line.strip():
                yield line


def count_lines(path: Path) -> int:
    """Non-blank lines: the records a JSONL file holds."""
    try:
        return sum(1 for _ in _lines(path))
    except OSError:
        return 0


def sample_lines(paths: list[Path], k: int, seed: int) -> tuple[int, list[tuple[Path, dict[str, Any]]]]:
    """The number of lines in ``paths`` together, and ``k`` of them drawn with ``seed`` (all when
    fewer), in file order, each parsed, with the file it came from."""
    counts = [count_lines(p) for p in paths]
    total = sum(counts)
    chosen = set(random.Random(seed).sample(range(total), min(k, total)))
    picked: list[tuple[Path, dict[str, Any]]] = []
    start = 0
    for path, n in zip(paths, counts):
        if n and any(start <= i < start + n for i in chosen):
            for i, line in enumerate(_lines(path), start):
                if i in chosen:
                    obj = _parse(line)
                    if obj is not None:
                        picked.append((path, obj))
        start += n
    return total, picked


def records_by_id(path: Path, ids: set[str]) -> dict[str, dict[str, Any]]:
    """The records of ``path`` whose id is in ``ids``; a record's id is read from its first
    ``"id"`` key (records are written id first), and only matching lines are parsed."""
    found: dict[str, dict[str, Any]] = {}
    if not ids or not path.is_file():
        return found
    for line in _lines(path):
        m = _ID.search(line, 0, 400)
        if m is None:
            continue
        rid = json.loads(b'"' + m.group(1) + b'"')
        if rid in ids and rid not in found:
            obj = _parse(line)
            if obj is not None:
                found[rid] = obj
                if len(found) == len(ids):
                    break
    return found


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None
