"""Read a YAML config file (task spec, recipe); a syntax error names the file and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from curate.core.errors import CurateError


def read_yaml_mapping(path: Path, what: str) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise CurateError(f"{where}: invalid YAML: {getattr(e, 'problem', e)}") from None
    if not isinstance(raw, dict):
        raise CurateError(f"{path}: a {what} must be a YAML mapping")
    return raw
