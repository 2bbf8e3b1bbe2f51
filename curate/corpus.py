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
    """Return (doc id, text) pairs; a line without text is an error naming file and line."""
    docs = []
    for lineno, obj in read_jsonl(path):
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
            raise CurateError(f"{path}:{lineno}: a corpus line needs a string 'text'")
        docs.append((str(obj.get("_id", obj.get("id", lineno))), doc_text(obj)))
    return docs
