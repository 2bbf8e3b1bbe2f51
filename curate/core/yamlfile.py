"""Read a YAML config file (task spec, recipe); a syntax error or a byte that is not UTF-8
names the file and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from curate.core.errors import CurateError


def read_yaml_mapping(path: Path, what: str) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(read_utf8_text(path))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise CurateError(f"{where}: invalid YAML: {getattr(e, 'problem', e)}") from None
    if not isinstance(raw, dict):
        raise CurateError(f"{path}: a {what} must be a YAML mapping")
    return raw


def read_utf8_text(path: Path) -> str:
    """The file's text, less a leading byte-order mark (editors on Windows add one); bytes that
    are not UTF-8 (a file saved as Latin-1) name the line."""
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        raise CurateError(f"{path}: is a folder, not a file") from None
    except OSError as e:
        raise CurateError(f"{path}: cannot read: {e.strerror}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise CurateError(f"{path}:{line}: not UTF-8 text (byte 0x{data[e.start]:02x}); save it as UTF-8") from None
