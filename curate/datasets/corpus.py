"""Read document collections: BEIR ``corpus.jsonl`` ({"_id", "title", "text"}) or plain {"text"} lines."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from curate.core.errors import CurateError
from curate.core.jsonl import read_jsonl


def doc_text(obj: dict) -> str:
    """BEIR convention: the title, when there is one, goes before the text."""
    title = (obj.get("title") or "").strip()
    text = (obj.get("text") or "").strip()
    return f"{title} {text}".strip() if title else text


@dataclass(frozen=True)
class CorpusEntry:
    """One corpus line with its parts kept apart: the document reader chunks the text and
    keeps the title beside each passage, where ``read_corpus`` joins them."""

    id: str
    title: str  # stripped; "" when the line has none
    text: str  # stripped
    line: int
    source: str | None = None  # the file it was cut from, when the document reader wrote one

    def joined(self) -> str:
        return doc_text({"title": self.title, "text": self.text})


def read_corpus_entries(path: str | Path) -> list[CorpusEntry]:
    """Every line of a corpus as a ``CorpusEntry``; a line without text is an error naming file and line.

    Every stage that reads a corpus reads it here, so the same faults stop all of them:
    an id given twice (a dict keyed by id would keep the last text, and positives and
    scores would silently change with line order) and a file with no document (a miner
    would fall back to the queries' own positives, an evaluation would score 0)."""
    entries = []
    first_line: dict[str, int] = {}
    for lineno, obj in read_jsonl(path):
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
            raise CurateError(f"{path}:{lineno}: a corpus line needs a string 'text'")
        title = obj.get("title") or ""
        if not isinstance(title, str):  # was a crash in .strip(); a number or a list is a fault of the file
            raise CurateError(f"{path}:{lineno}: a corpus line's 'title' must be a string")
        key = "_id" if "_id" in obj else "id" if "id" in obj else None
        doc_id = str(obj[key]) if key else str(lineno)  # no id: the line number is its id
        first = first_line.setdefault(doc_id, lineno)
        if first != lineno:
            raise CurateError(f"{path}:{lineno}: duplicate {key or 'id (its line number)'} {doc_id!r} "
                              f"(first at line {first})")
        source = obj.get("source") if isinstance(obj.get("source"), str) else None
        entries.append(CorpusEntry(doc_id, title.strip(), obj["text"].strip(), lineno, source))
    if not entries:
        raise CurateError(f"{path}: no documents")
    return entries


def read_corpus(path: str | Path) -> list[tuple[str, str]]:
    """Return (doc id, text) pairs, the title before the text (see ``read_corpus_entries``)."""
    return [(e.id, e.joined()) for e in read_corpus_entries(path)]
