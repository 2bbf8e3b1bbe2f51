"""JSONL inputs of ``curate convert``; anything malformed is one error naming file and line."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError
from curate.core.jsonl import read_jsonl


def _text(path: Path, lineno: int, obj: dict, key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise CurateError(f"{path}:{lineno}: needs a string '{key}'")
    if not value.strip():
        raise CurateError(f"{path}:{lineno}: '{key}' is empty")
    return value


def read_labeled(path: str | Path) -> tuple[list[str], list[Any]]:
    """``{"text": ..., "label": ...}`` lines (a label is a string, an integer or a boolean)."""
    path = Path(path)
    texts: list[str] = []
    labels: list[Any] = []
    for lineno, obj in read_jsonl(path):
        if not isinstance(obj, dict):
            raise CurateError(f"{path}:{lineno}: expected an object with 'text' and 'label'")
        text = _text(path, lineno, obj, "text")
        if "label" not in obj:
            raise CurateError(f"{path}:{lineno}: needs a 'label'")
        label = obj["label"]
        if not isinstance(label, (str, int)) or (isinstance(label, str) and not label.strip()):
            raise CurateError(f"{path}:{lineno}: 'label' must be a non-empty string or an integer")
        texts.append(text)
        labels.append(label)
    if not texts:
        raise CurateError(f"{path}: no examples")
    return texts, labels


def read_sts_pairs(path: str | Path, scale_max: float | None = None) -> list[tuple[str, str, float]]:
    """``{"sentence1", "sentence2", "score"}`` lines; with ``scale_max``, scores must lie in [0, scale_max]."""
    path = Path(path)
    pairs: list[tuple[str, str, float]] = []
    for lineno, obj in read_jsonl(path):
        if not isinstance(obj, dict):
            raise CurateError(f"{path}:{lineno}: expected an object with 'sentence1', 'sentence2' and 'score'")
        s1 = _text(path, lineno, obj, "sentence1")
        s2 = _text(path, lineno, obj, "sentence2")
        score = obj.get("score")
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            raise CurateError(f"{path}:{lineno}: 'score' must be a number")
        if scale_max is not None and not 0 <= score <= scale_max:
            raise CurateError(f"{path}:{lineno}: score {score} is outside [0, {scale_max:g}] "
                              f"(set --scale-max to the top of the data's scale)")
        pairs.append((s1, s2, float(score)))
    if not pairs:
        raise CurateError(f"{path}: no pairs")
    return pairs
