"""How to train on each format of an export, with the settings its trainer needs filled in.

A trainer's defaults rarely fit a given export: its group size must be the negatives a row plus
the positive (Tevatron and FlagEmbedding default to 8 and sample with replacement when a row
has fewer), its length limits must hold the texts, and the instructions are already in the
texts, so every prefix flag is empty. The numbers come from the rows themselves; each format's
own text is its ``usage``, in its module (``curate.export.formats.Format``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from curate.export.formats import FORMATS, in_order
from curate.export.formats.common import teacher_scores
from curate.export.rows import ExportRow

CHARS_PER_TOKEN = 4  # English word pieces average about four characters
MAX_LENGTH = 512  # what most small encoders take


@dataclass(frozen=True)
class Settings:
    negatives_per_row: int
    query_max_len: int
    passage_max_len: int
    batch_size: int | None
    scored: bool  # every row has the teacher's scores of all its texts: distillation can train

    @property
    def group_size(self) -> int:
        return self.negatives_per_row + 1


def _tokens(texts: list[str]) -> int:
    """An estimate of the longest text's tokens, rounded up to a multiple of 16, at most 512."""
    longest = max((len(t) for t in texts), default=0)
    return min(MAX_LENGTH, max(16, 16 * math.ceil(longest / CHARS_PER_TOKEN / 16)))


def settings(rows: list[ExportRow], batch_size: int | None) -> Settings:
    return Settings(negatives_per_row=max(1, max((len(r.negatives) for r in rows), default=1)),
                    query_max_len=_tokens([r.query_text for r in rows]),
                    passage_max_len=_tokens([t for r in rows for t in (r.positive, *r.negatives)]),
                    batch_size=batch_size,
                    scored=all(r.negatives and teacher_scores(r, list(r.negatives)) is not None for r in rows))


def commands(formats: list[str], s: Settings, nested: bool = True) -> str:
    """Markdown: for each format of ``formats`` that says how to train on it (its ``usage``), the
    command that does, in the formats' order (``nested``: each format's files are in a sub-folder
    named after it, else in the card's)."""
    parts = []
    for fmt in in_order(formats):
        usage = FORMATS.get(fmt).usage
        if usage is not None:
            parts.append(usage(s, f"EXPORT/{fmt}" if nested else "EXPORT"))
    return "\n\n".join(parts)


def format_card_text(fmt: str, rows: list[ExportRow], card: dict) -> str:
    """The training section of one format's own card (EXPORT: that folder)."""
    batch = (card.get("parameters") or {}).get("batch_size")
    return "EXPORT below is this folder.\n\n" + commands([fmt], settings(rows, batch), nested=False)
