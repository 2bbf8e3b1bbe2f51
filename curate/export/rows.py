"""The exported row: one training step's worth of text, in the order the trainer must read it.

The export builds rows from records (curriculum, batch layout, instructions, splits) and the
format writers only lay rows out on disk, so every format carries the same order and texts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ExportRow:
    record_id: str
    split: str  # "train" or "dev"
    task_type: str
    task: str  # the task text the instruction was made from
    query: str  # the raw query, no instruction
    query_text: str  # the query as the trainer should encode it (instruction applied when asked)
    positive: str  # as the trainer should encode it (instruction applied for symmetric tasks)
    negatives: list[str] = field(default_factory=list)  # as the trainer should encode them
    instruction: str = ""  # the query-side prefix that was (or, for prompt-aware formats, would be) applied
    symmetric: bool = False  # the instruction applies to documents too
    positive_score: float | None = None  # teacher score of the positive, when known
    negative_scores: list[float | None] = field(default_factory=list)
    levels: list[int | None] = field(default_factory=list)  # difficulty of each negative, 1 hardest .. 4 easiest
    phase: int | None = None  # curriculum phase (1-based), None without a curriculum
    batch: int = 0  # index of the training batch this row belongs to (within its split)
    positive_id: str | None = None  # corpus ids, when the record came from a corpus (BEIR export)
    negative_ids: list[str | None] = field(default_factory=list)
    more_positives: list[tuple[str, str | None]] = field(default_factory=list)  # further relevant (text, corpus id)
    titles: dict[str, str] = field(default_factory=dict)  # bare document text -> its title, where it has one
    meta: dict[str, Any] = field(default_factory=dict)  # provenance carried from the record
