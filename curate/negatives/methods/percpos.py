"""NV-Retriever's TopK-PercPos, its best method: a ceiling at a share of the positive's score."""

from __future__ import annotations

from typing import Any

from curate.negatives.presets import preset
from curate.negatives.select import Thresholds


@preset("percpos", {"relative_margin": 0.05})  # the share 0.95 of NV-Retriever's best setting
def percpos(knobs: dict[str, Any]) -> Thresholds:
    """Candidates scoring at most ``pos - |pos| * relative_margin`` (TopK-PercPos: the share
    ``1 - relative_margin`` of a positive ``pos``). The ceiling takes ``round(1 - percent, 12)``,
    which gives back ``relative_margin`` itself (to 12 places), so the floats are the ones the
    share gave before the rename."""
    return Thresholds(percent=1.0 - float(knobs["relative_margin"]))
