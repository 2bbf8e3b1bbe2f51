"""NV-Retriever's Top-K shifted by N: the first N candidates skipped."""

from __future__ import annotations

from typing import Any

from curate.negatives.presets import preset
from curate.negatives.select import Thresholds


@preset("shift", {"shift": 10})
def shift(knobs: dict[str, Any]) -> Thresholds:
    """All but the first ``shift`` candidates (Top-K shifted by N): sentence-transformers'
    ``range_min`` N with no ``range_max``."""
    return Thresholds(rank_min=int(knobs["shift"]) + 1) if knobs["shift"] else Thresholds()
