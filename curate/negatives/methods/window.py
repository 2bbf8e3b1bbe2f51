"""A window of ranks (SFR-Embedding / Linq: ranks 30..100, the first 29 candidates skipped)."""

from __future__ import annotations

from typing import Any

from curate.negatives.presets import preset
from curate.negatives.select import Thresholds


def _check_window(knobs: dict[str, Any]) -> str | None:
    lo, hi = knobs["range_min"], knobs["range_max"]
    return None if 0 <= lo < hi else f"--range-min {lo} / --range-max {hi}: need 0 <= range-min < range-max"


@preset("window", {"range_min": 29, "range_max": 100}, _check_window)
def window(knobs: dict[str, Any]) -> Thresholds:
    """Candidates ranked ``range_min + 1`` .. ``range_max`` (1-based): the first ``range_min``
    skipped, none deeper than ``range_max``, as sentence-transformers counts them."""
    return Thresholds(rank_min=int(knobs["range_min"]) + 1, rank_max=int(knobs["range_max"]))
