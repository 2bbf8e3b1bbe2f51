"""Read documents (a BEIR folder, a corpus JSONL, or a folder of .txt/.md/.html files) and cut
them into passages: the way in for users who have documents and no labelled queries.

Passages are ``DOC#k`` (k from 0 in document order), at most ``max_words`` words, packed from
whole paragraphs where they fit, each after the first opening with the last ``overlap_words``
words of the one before. Files are read in sorted path order, so the same input always gives
the same ids in the same order. Files that cannot be read as text are skipped and named;
nothing readable at all, a missing path or two documents under one id is one line.
"""

from __future__ import annotations

import codecs
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from curate.core.errors import CurateError
from curate.core.jsonl import atomic_write_jsonl
from curate.datasets.corpus import read_corpus_entries

TEXT_SUFFIXES = (".txt", ".md", ".html", ".htm")
HTML_SUFFIXES = (".html", ".htm")
NOT_UTF8, BINARY, EMPTY = "not UTF-8 text", "binary", "empty"


@dataclass(frozen=True)
class Passage:
    id: str  # f"{doc_id}#{k}"
    doc_id: str
    title: str  # "" when the document has none
    text: str  # whitespace normalised to single spaces
    source: str  # path relative to the input; for JSONL "file.jsonl:LINE"
    k: int  # the passage's place in its document, from 0


@dataclass(frozen=True)
class Skipped:
    path: str  # relative to the input; for JSONL "file.jsonl:LINE"
    reason: str  # NOT_UTF8, BINARY, EMPTY, or "cannot read (...)"


@dataclass
class Documents:
    path: Path
    max_words: int
    overlap_words: int
    passages: list[Passage] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    files: int = 0  # files read (a JSONL input is one)
    documents: int = 0  # documents that gave passages
    ignored: int = 0  # files in a folder with another suffix (not named one by one)

    def write_corpus(self, out: str | Path) -> Path:
        """The passages as a BEIR ``corpus.jsonl`` (``_id``, ``title``, ``text``, ``source``), so
        mining and round-trip filtering can use them as their corpus."""
        out = self.check_target(out)
        atomic_write_jsonl(out, ({"_id": p.id, "title": p.title, "text": p.text, "source": p.source}
                                 for p in self.passages))
        return out

    def check_target(self, out: str | Path) -> Path:
        """``out``, unless it is the file these passages were read from (writing would destroy it)."""
        out = Path(out)
        source = self.path / "corpus.jsonl" if self.path.is_dir() else self.path
        if out.exists() and source.exists() and out.resolve() == source.resolve():
            raise CurateError(f"{out}: is the input being read; write the passages elsewhere")
        return out

    def report(self) -> dict:
        return {"path": str(self.path), "files": self.files, "documents": self.documents,
                "passages": len(self.passages), "ignored": self.ignored,
                "skipped": [{"path": s.path, "reason": s.reason} for s in self.skipped],
                "skipped_by_reason": dict(Counter(s.reason for s in self.skipped)),
                "max_words": self.max_words, "overlap_words": self.overlap_words}


def read_documents(path: str | Path, max_words: int = 200, overlap_words: int = 40) -> Documents:
    """Read ``path`` (BEIR folder, ``.jsonl``, folder of text files, or one text file) into passages."""
    if (isinstance(max_words, bool) or isinstance(overlap_words, bool) or not isinstance(max_words, int)
            or not isinstance(overlap_words, int) or max_words < 1 or not 0 <= overlap_words < max_words):
        raise CurateError(f"max_words must be at least 1 and overlap_words from 0 to max_words - 1 "
                          f"(got max_words={max_words!r}, overlap_words={overlap_words!r})")
    path = Path(path)
    docs = Documents(path, max_words, overlap_words)
    if path.is_dir() and (path / "corpus.jsonl").is_file():  # BEIR: queries and qrels are not read
        _read_jsonl(docs, path / "corpus.jsonl", "corpus.jsonl")
    elif path.is_dir():
        _read_folder(docs, path)
    elif path.is_file() and path.suffix.lower() == ".jsonl":
        _read_jsonl(docs, path, path.name)
    elif path.is_file() and path.suffix.lower() in TEXT_SUFFIXES:
        docs.files, docs.documents = _read_files(docs, [(path, path.name)])
    elif path.exists():
        raise CurateError(f"{path}: not a document file (read: a folder, .jsonl, {', '.join(TEXT_SUFFIXES)})")
    else:
        raise CurateError(f"{path}: no such file or folder")
    if not docs.passages:
        raise CurateError(f"{path}: no readable documents ({_nothing_read(docs)})")
    return docs


def _nothing_read(docs: Documents) -> str:
    why = f"{len(docs.skipped)} skipped"
    if docs.skipped:
        why += f": {docs.skipped[0].path}: {docs.skipped[0].reason}"
    if docs.ignored:
        why += f"; {docs.ignored} ignored, not {'/'.join(TEXT_SUFFIXES)}"
    return why


def _read_jsonl(docs: Documents, file: Path, name: str) -> None:
    """Entries come from the one corpus reader (duplicate ids, bad lines, empty file)."""
    docs.files = 1
    for e in read_corpus_entries(file):
        source = f"{name}:{e.line}"
        if not e.text:
            docs.skipped.append(Skipped(source, EMPTY))
            continue
        docs.documents += 1
        _add(docs, e.id, e.title, e.text, source)


def _read_folder(docs: Documents, folder: Path) -> None:
    """Text files under ``folder`` (hidden folders not entered), sorted by path."""
    found: list[tuple[Path, str]] = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            file = Path(root, name)
            if name.startswith(".") or file.suffix.lower() not in TEXT_SUFFIXES or not file.is_file():
                docs.ignored += 1
                continue
            found.append((file, file.relative_to(folder).as_posix()))
    found.sort(key=lambda f: f[1])
    first: dict[str, str] = {}
    for _, rel in found:
        other = first.setdefault(_doc_id(rel), rel)
        if other != rel:
            raise CurateError(f"{folder}: {_doc_id(rel)!r} is both {other} and {rel}")
    docs.files, docs.documents = _read_files(docs, found)


def _doc_id(rel: str) -> str:
    return rel[: -len(Path(rel).suffix)]


def _read_files(docs: Documents, files: list[tuple[Path, str]]) -> tuple[int, int]:
    """Add each file's passages (or its ``Skipped``); return (files read, documents that gave text)."""
    read = documents = 0
    for file, rel in files:
        text, why = _read_text(file)
        if why:
            docs.skipped.append(Skipped(rel, why))
            continue
        read += 1
        suffix = file.suffix.lower()
        title, text = (html_to_text(text) if suffix in HTML_SUFFIXES
                       else markdown_title(text) if suffix == ".md" else ("", text))
        if not text.strip():  # an HTML page whose only text is its title, or markup alone
            docs.skipped.append(Skipped(rel, EMPTY))
            continue
        documents += 1
        _add(docs, _doc_id(rel), title, text, rel)
    return read, documents


def _read_text(file: Path) -> tuple[str, str | None]:
    """(text, None), or ("", the reason the file is skipped). A UTF-8 BOM is read past."""
    try:
        data = file.read_bytes()
    except OSError as e:
        return "", f"cannot read ({e.strerror})"
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    if b"\0" in data:
        return "", BINARY
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "", NOT_UTF8
    return (text, None) if text.strip() else ("", EMPTY)


def _add(docs: Documents, doc_id: str, title: str, text: str, source: str) -> None:
    for k, words in enumerate(chunk_words(text, docs.max_words, docs.overlap_words)):
        docs.passages.append(Passage(f"{doc_id}#{k}", doc_id, " ".join(title.split()), " ".join(words),
                                     source, k))


# ----------------------------------------------------------------------------- chunking


def chunk_words(text: str, max_words: int, overlap_words: int) -> list[list[str]]:
    """Cut ``text`` into word lists of at most ``max_words``; each after the first starts with
    the last ``overlap_words`` words of the one before.

    Paragraphs (separated by blank lines) are packed whole while they fit; one that does not
    fit in the current passage starts the next (after the overlap) when it fits there, and is
    otherwise cut on word boundaries, filling each passage, so no passage is left short by a
    long paragraph. Joining the passages less their overlaps gives back every word in order."""
    paragraphs = [p.split() for p in re.split(r"\n[ \t\r\f\v]*\n", text)]
    out: list[list[str]] = []
    cur: list[str] = []
    fresh = 0  # words in ``cur`` beyond the overlap it started with

    def flush(words: list[str]) -> list[str]:
        """Close a passage; return the overlap the next one starts with."""
        out.append(words)
        return words[max(0, len(words) - overlap_words):] if overlap_words else []

    for para in filter(None, paragraphs):
        if len(cur) + len(para) > max_words and fresh:
            if min(len(cur), overlap_words) + len(para) <= max_words:  # whole in the next passage: start it here
                cur, fresh = flush(cur), 0
        while len(cur) + len(para) > max_words:  # cannot be whole: fill, cut, go on
            take = max_words - len(cur)
            cur, para = cur + para[:take], para[take:]
            cur, fresh = flush(cur), 0
        cur, fresh = cur + para, fresh + len(para)
    if fresh:
        out.append(cur)
    return out


# ----------------------------------------------------------------------- HTML, Markdown


class _HtmlText(HTMLParser):
    """Text of an HTML page: script, style and head dropped (the head's <title> kept apart),
    block elements as paragraph breaks, the rest of the whitespace collapsed as a browser would."""

    BLOCKS = {"address", "article", "aside", "blockquote", "br", "dd", "details", "div", "dl", "dt",
              "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6",
              "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary", "table",
              "tbody", "tfoot", "thead", "tr", "ul"}
    CELLS = {"td", "th"}
    DROPPED = {"script", "style"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title: list[str] = []
        self.dropped = 0  # inside script/style
        self.in_head = self.in_title = False

    def handle_starttag(self, tag, attrs):
        if tag in self.DROPPED:
            self.dropped += 1
        elif tag == "head":
            self.in_head = True
        elif tag == "body":
            self.in_head = False
        elif tag == "title":
            self.in_title = True
        elif tag in self.BLOCKS:
            self.parts.append("\n\n")
        elif tag in self.CELLS:
            self.parts.append(" ")

    def handle_endtag(self, tag):
        if tag in self.DROPPED:
            self.dropped = max(0, self.dropped - 1)
        elif tag == "head":
            self.in_head = False
        elif tag == "title":
            self.in_title = False
        elif tag in self.BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data):
        if self.dropped:
            return
        if self.in_title:
            self.title.append(data)
        elif not self.in_head:
            self.parts.append(re.sub(r"\s+", " ", data))


def html_to_text(html: str) -> tuple[str, str]:
    """(title, text with paragraphs separated by blank lines)."""
    parser = _HtmlText()
    parser.feed(html)
    parser.close()
    return " ".join("".join(parser.title).split()), "".join(parser.parts)


def markdown_title(text: str) -> tuple[str, str]:
    """(the first ``# `` heading outside code fences, the text without that line); ("", text) if none."""
    lines = text.splitlines()
    fence = None
    for i, line in enumerate(lines):
        mark = line.lstrip()[:3]
        if mark in ("```", "~~~"):
            fence = None if fence == mark else fence or mark
        elif fence is None and line.startswith("# "):
            title = re.sub(r"\s+#+\s*$", "", line[2:]).strip()
            return title, "\n".join(lines[:i] + lines[i + 1:])
    return "", text
