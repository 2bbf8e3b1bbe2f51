"""NV-Retriever's TopK-Abs: a ceiling on the teacher's score."""

from __future__ import annotations

from typing import Any

from curate.negatives.presets import preset
from curate.negatives.select import Thresholds


@preset("abs", {"max_score": 0.7})
def absolute(knobs: dict[str, Any]) -> Thresholds:
    """Candidates scoring at most ``max_score`` (TopK-Abs)."""
    return Thresholds(max_score=float(knobs["max_score"]))
