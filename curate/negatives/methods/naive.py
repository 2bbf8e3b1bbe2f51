"""NV-Retriever's Naive Top-K: every candidate, best first."""

from __future__ import annotations

from typing import Any

from curate.negatives.presets import preset
from curate.negatives.select import Thresholds


@preset("naive")
def naive(knobs: dict[str, Any]) -> Thresholds:
    """Every candidate, best first (Naive Top-K)."""
    return Thresholds()
