"""Read document collections: BEIR ``corpus.jsonl`` ({"_id", "title", "text"}) or plain {"text"} lines."""

from __future__ import annotations

from pathlib import Path

from curate.core.errors import CurateError
from curate.core.jsonl import read_jsonl


def doc_text(obj: dict) -> str:
    """BEIR convention: the title, when there is one, goes before the text."""
    title = (obj.get("title") or "").strip()
    text = (obj.get("text") or "").strip()
    return f"{title} {text}".strip() if title else text


def read_corpus(path: str | Path) -> list[tuple[str, str]]:
    """Return (doc id, text) pairs; a line without text is an error naming file and line.

    Every stage that reads a corpus reads it here, so the same faults stop all of them:
    an id given twice (a dict keyed by id would keep the last text, and positives and
    scores would silently change with line order) and a file with no document (a miner
    would fall back to the queries' own positives, an evaluation would score 0)."""
    docs = []
    first_line: dict[str, int] = {}
    for lineno, obj in read_jsonl(path):
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
            raise CurateError(f"{path}:{lineno}: a corpus line needs a string 'text'")
        key = "_id" if "_id" in obj else "id" if "id" in obj else None
        doc_id = str(obj[key]) if key else str(lineno)  # no id: the line number is its id
        first = first_line.setdefault(doc_id, lineno)
        if first != lineno:
            raise CurateError(f"{path}:{lineno}: duplicate {key or 'id (its line number)'} {doc_id!r} "
                              f"(first at line {first})")
        docs.append((doc_id, doc_text(obj)))
    if not docs:
        raise CurateError(f"{path}: no documents")
    return docs
