"""NV-Retriever's TopK-MarginPos: a ceiling a fixed gap below the positive."""

from __future__ import annotations

from typing import Any

from curate.negatives.knobs import Ceiling
from curate.negatives.presets import preset
from curate.negatives.select import Thresholds


@preset("marginpos", {"absolute_margin": Ceiling.margin})
def marginpos(knobs: dict[str, Any]) -> Thresholds:
    """Candidates scoring at most ``pos - absolute_margin`` (TopK-MarginPos)."""
    return Thresholds(margin=float(knobs["absolute_margin"]))
