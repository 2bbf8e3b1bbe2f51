"""Negatives that are a copy of one of their record's positives: dropped before any row is built.

A negative whose text is a positive's (an LLM that repeated the passage, a mined document that is
the same text under another id) asks the trainer to push the query away from the very text it
pulls it towards: the loss can only learn noise from it. Texts are compared with their whitespace
normalised, whole: a document read from a corpus with titles is one text with its title first, so
the comparison is of title and text together, as the formats that carry titles write them.
"""

from __future__ import annotations

from collections.abc import Sequence

from curate.core.records import Negative
from curate.export.inputs import Item

REASON = "negative-equals-positive"


def same_text(text: str) -> str:
    """The form two texts are compared in: words joined by one space, nothing around them."""
    return " ".join(text.split())


def drop_positive_copies(items: Sequence[Item]) -> list[tuple[Item, Negative]]:
    """Remove from each record every negative equal to one of its positives; return them.

    A negative carries its own facts (teacher rank, mine's rank, judges' verdicts), so they go
    with it."""
    dropped: list[tuple[Item, Negative]] = []
    for it in items:
        rec = it.record
        positives = {same_text(p.text) for p in rec.all_positives()}
        copies = [k for k, n in enumerate(rec.negatives) if same_text(n.text) in positives]
        if not copies:
            continue
        dropped += [(it, rec.negatives[k]) for k in copies]
        rec.keep_negatives([k for k in range(len(rec.negatives)) if k not in copies])
    return dropped
