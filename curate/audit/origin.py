"""Where a text of a record came from: written by an LLM, or taken from a corpus.

The audit compares texts by origin, so the origin must be read from the record, never guessed
from the text. What the stages write decides it:

* a negative with a corpus ``doc_id``, or whose ``source`` is ``mined`` (``curate mine``,
  ``curate convert`` with a teacher) or ``sampled`` (``curate convert`` drawing at random), is
  corpus text; one whose ``source`` is ``llm`` (the default, what ``curate generate`` writes)
  without a ``doc_id`` is LLM-written; any other source is left out of origin comparisons;
* a positive is corpus text when it has a corpus id (``positive_id``, a further positive's
  ``doc_id``), or its record came from a dataset (``meta.source``: ``beir``, ``pairs``, ``hf``,
  ``convert``), a real pair (``meta.pair``: ``generate --from-pairs``) or a passage of the
  user's documents (``meta.passage``: ``generate --from-corpus``); it is LLM-written when its
  record was generated (``meta.template``) without any of those; otherwise its origin is unknown.
"""

from __future__ import annotations

from curate.core.records import Negative, Record

LLM, CORPUS, UNKNOWN = "llm", "corpus", "unknown"
CORPUS_NEGATIVE_SOURCES = ("mined", "sampled")
CORPUS_RECORD_SOURCES = ("beir", "pairs", "hf", "convert")  # meta.source of records made from a dataset


def negative_origin(neg: Negative) -> str:
    if neg.doc_id is not None or neg.source in CORPUS_NEGATIVE_SOURCES:
        return CORPUS
    return LLM if neg.source == "llm" else UNKNOWN


def positive_origin(rec: Record) -> str:
    """The origin of a record's own positive (further positives with a ``doc_id`` are corpus text)."""
    meta = rec.meta or {}
    if rec.positive_id is not None or meta.get("source") in CORPUS_RECORD_SOURCES or "pair" in meta \
            or "passage" in meta:
        return CORPUS
    return LLM if "template" in meta else UNKNOWN


def positives_with_origin(rec: Record) -> list[tuple[str, str]]:
    """(text, origin) of the record's positive and each further one."""
    own = positive_origin(rec)
    return [(rec.positive, own), *((p.text, CORPUS if p.doc_id is not None else own) for p in rec.positives)]
