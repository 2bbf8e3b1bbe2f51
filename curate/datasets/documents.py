"""Read documents (a BEIR folder, a corpus JSONL, or a folder of .txt/.md/.html files) and cut
them into passages: the way in for users who have documents and no labelled queries.

Passages are ``DOC#k`` (k from 0 in document order), at most ``max_words`` words, packed from
whole paragraphs where they fit, each after the first opening with the last ``overlap_words``
words of the one before. Files are read in sorted path order, so the same input always gives
the same ids in the same order. Files that cannot be read as text are skipped and named (in the
report and in one summary line, ``Documents.notes``); nothing readable at all, a missing path or
two documents under one id is one line.

What a folder can hold is not trusted to be tidy: a stray non-UTF-8 byte is replaced (and
counted) rather than losing the file, Markdown front matter is not text, unbroken text is cut
so no passage outgrows a character cap, links that lead out of the folder are not followed (a
link to a ``.env`` would put its secrets into prompts), and control characters in file names
are escaped so they never reach an id (``safe_name``).
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
from curate.core.records import UNSAFE_ID_CHARS
from curate.datasets.corpus import doc_text, read_corpus_entries

TEXT_SUFFIXES = (".txt", ".md", ".html", ".htm")
HTML_SUFFIXES = (".html", ".htm")
BINARY, EMPTY, OUTSIDE = "binary", "empty", "link outside DOCS"
MAX_WORD_CHARS = 128  # a longer run without whitespace is cut into pieces this long (see chunk_words)
BINARY_SHARE = 0.3  # past this share of undecodable bytes and control characters a file is binary
SHOWN = 3  # skipped files named in the summary line; the report names them all


@dataclass(frozen=True)
class Passage:
    id: str  # f"{doc_id}#{k}"
    doc_id: str
    title: str  # "" when the document has none
    text: str  # whitespace normalised to single spaces
    source: str  # path relative to the input; for JSONL "file.jsonl:LINE"
    k: int  # the passage's place in its document, from 0

    def joined(self) -> str:
        """The passage as a corpus reader gives it back from ``Documents.write_corpus``'s file
        (title before text): the positive a record keeps and the text a teacher encodes."""
        return doc_text({"title": self.title, "text": self.text})


@dataclass(frozen=True)
class Skipped:
    path: str  # relative to the input; for JSONL "file.jsonl:LINE"
    reason: str  # BINARY, EMPTY, OUTSIDE, or "cannot read (...)"


@dataclass(frozen=True)
class Replaced:
    path: str  # relative to the input
    bytes: int  # bytes that were not UTF-8, each run read as U+FFFD


@dataclass
class Documents:
    path: Path
    max_words: int
    overlap_words: int
    passages: list[Passage] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    replaced: list[Replaced] = field(default_factory=list)
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
                "replaced": [{"path": r.path, "bytes": r.bytes} for r in self.replaced],
                "max_words": self.max_words, "overlap_words": self.overlap_words}

    def notes(self, report: str = "the report") -> list[str]:
        """What the user should hear about the reading, one line each (none when all went well):
        the skipped files, the first few by name and reason, and the files whose non-UTF-8
        bytes were replaced; ``report`` names where the full lists are."""
        lines = []
        if self.skipped:
            entries = all(re.search(r"\.jsonl:\d+$", s.path) for s in self.skipped)  # lines of a JSONL
            noun = ("entry", "entries") if entries else ("file", "files")
            lines.append(f"{self.path}: skipped {_n(len(self.skipped), *noun)}: "
                         + _listed([f"{s.path} ({s.reason})" for s in self.skipped], report))
        if self.replaced:
            total = sum(r.bytes for r in self.replaced)
            lines.append(f"{self.path}: replaced {_n(total, 'byte', 'bytes')} that are not UTF-8 with U+FFFD "
                         f"in {_n(len(self.replaced), 'file', 'files')}: "
                         + _listed([f"{r.path} ({_n(r.bytes, 'byte', 'bytes')})" for r in self.replaced], report))
        return lines


def _n(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _listed(names: list[str], report: str) -> str:
    """The first ``SHOWN`` names, then how many more (all of them are in ``report``)."""
    more = len(names) - SHOWN
    return ", ".join(names[:SHOWN]) + (f", +{more} more (see {report})" if more > 0 else "")


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
    first: dict[str, str] = {}
    for e in read_corpus_entries(file):
        source = f"{name}:{e.line}"
        doc_id = safe_name(e.id)
        other = first.setdefault(doc_id, e.id)
        if other != e.id:  # two ids that differ only by escaped characters
            raise CurateError(f"{file}:{e.line}: _id {e.id!r} reads as {doc_id!r}, as does {other!r}")
        if not e.text:
            docs.skipped.append(Skipped(source, EMPTY))
            continue
        docs.documents += 1
        _add(docs, doc_id, e.title, e.text, source)


def _read_folder(docs: Documents, folder: Path) -> None:
    """Text files under ``folder`` (hidden folders not entered), sorted by path.

    A link (to a file or a folder) that resolves outside ``folder`` is skipped and named: the
    user gave this folder, not whatever its links reach. Links inside it are read like files;
    linked folders are not entered (what they hold is read where it lies, or is outside)."""
    root_real = folder.resolve()
    found: list[tuple[Path, str]] = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for d in dirs:  # os.walk does not enter linked folders: only those leading out are named
            link = Path(root, d)
            if link.is_symlink() and not _inside(link, root_real):
                docs.skipped.append(Skipped(safe_name(link.relative_to(folder).as_posix()), OUTSIDE))
        for name in names:
            file = Path(root, name)
            if name.startswith(".") or file.suffix.lower() not in TEXT_SUFFIXES or not file.is_file():
                docs.ignored += 1
                continue
            rel = safe_name(file.relative_to(folder).as_posix())
            if file.is_symlink() and not _inside(file, root_real):
                docs.skipped.append(Skipped(rel, OUTSIDE))
                continue
            found.append((file, rel))
    found.sort(key=lambda f: f[1])
    first: dict[str, tuple[Path, str]] = {}
    for file, rel in found:
        other_file, other = first.setdefault(_doc_id(rel), (file, rel))
        if other_file != file:  # two suffixes, or two names only an escape tells apart
            a, b = (other, rel) if other != rel else (repr(str(other_file.relative_to(folder))),
                                                      repr(str(file.relative_to(folder))))
            raise CurateError(f"{folder}: {_doc_id(rel)!r} is both {a} and {b}")
    docs.files, docs.documents = _read_files(docs, found)
    docs.skipped.sort(key=lambda s: s.path)  # links found on the walk among the files read, by path


def _inside(link: Path, root_real: Path) -> bool:
    """Whether ``link`` resolves to a place under ``root_real`` (the folder's own real path)."""
    try:
        return link.resolve().is_relative_to(root_real)
    except (OSError, RuntimeError):  # a loop of links
        return False


def safe_name(name: str) -> str:
    """``name`` with control characters (and line or paragraph separators, and the bytes a file
    name held that were not UTF-8) written as %XX escapes of their bytes, ``\\t`` as ``%09``:
    ids and paths made from file names then never split a line, a TSV field or a JSON writer.
    Other names are left exactly as they are, so ids stay what they were; two names that only
    an escape tells apart are refused where ids are checked for clashes."""
    return _UNSAFE_NAME.sub(_escape, name)


# What ``curate.core.records`` refuses in an id, and the lone surrogates by which ``os`` gives back
# the bytes of a file name that are not UTF-8 (``surrogateescape`` turns them back into those bytes).
_UNSAFE_NAME = re.compile(f"[{UNSAFE_ID_CHARS}\ud800-\udfff]")


def _escape(m: re.Match) -> str:
    """A file name's undecodable byte comes back as its byte; any other lone surrogate (a JSON id
    may spell one, ``"\\ud800"``) as the three bytes UTF-8 would give it, never an error."""
    char = m.group()
    try:
        raw = char.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raw = char.encode("utf-8", "surrogatepass")
    return "".join(f"%{b:02X}" for b in raw)


def _doc_id(rel: str) -> str:
    return rel[: -len(Path(rel).suffix)]


def _read_files(docs: Documents, files: list[tuple[Path, str]]) -> tuple[int, int]:
    """Add each file's passages (or its ``Skipped``); return (files read, documents that gave text)."""
    read = documents = 0
    for file, rel in files:
        text, why, replaced = _read_text(file)
        if why:
            docs.skipped.append(Skipped(rel, why))
            continue
        read += 1
        if replaced:
            docs.replaced.append(Replaced(rel, replaced))
        suffix = file.suffix.lower()
        title, text = (html_to_text(text) if suffix in HTML_SUFFIXES
                       else markdown_parts(text) if suffix == ".md" else ("", text))
        if not text.strip():  # an HTML page whose only text is its title, or markup alone
            docs.skipped.append(Skipped(rel, EMPTY))
            continue
        documents += 1
        _add(docs, _doc_id(rel), title, text, rel)
    return read, documents


def _read_text(file: Path) -> tuple[str, str | None, int]:
    """(text, None, bytes replaced), or ("", the reason the file is skipped, 0). A UTF-8 BOM is
    read past. Bytes that are not UTF-8 are read as U+FFFD and counted: one stray byte (a Latin-1
    accent) should not cost the whole file. A file with a NUL, or mostly undecodable bytes and
    control characters, is binary, not text with a few bad bytes."""
    try:
        data = file.read_bytes()
    except OSError as e:
        return "", f"cannot read ({e.strerror})", 0
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    if b"\0" in data:
        return "", BINARY, 0
    text = data.decode("utf-8", errors="replace")
    replaced = len(data) - len(data.decode("utf-8", errors="ignore").encode("utf-8")) if "\ufffd" in text else 0
    controls = len(re.findall(r"[\x01-\x08\x0e-\x1a\x1c-\x1f\x7f]", text))
    if replaced + controls > BINARY_SHARE * len(data):
        return "", BINARY, 0
    return (text, None, replaced) if text.strip() else ("", EMPTY, 0)


def _add(docs: Documents, doc_id: str, title: str, text: str, source: str) -> None:
    """The document's passages; its title held to the passages' caps (it goes with each of them)."""
    title = " ".join(_cut_long(title.split())[: docs.max_words])
    for k, words in enumerate(chunk_words(text, docs.max_words, docs.overlap_words)):
        docs.passages.append(Passage(f"{doc_id}#{k}", doc_id, title, " ".join(words), source, k))


# ----------------------------------------------------------------------------- chunking


def chunk_words(text: str, max_words: int, overlap_words: int) -> list[list[str]]:
    """Cut ``text`` into word lists of at most ``max_words``; each after the first starts with
    the last ``overlap_words`` words of the one before.

    Paragraphs (separated by blank lines) are packed whole while they fit; one that does not
    fit in the current passage starts the next (after the overlap) when it fits there, and is
    otherwise cut on word boundaries, filling each passage, so no passage is left short by a
    long paragraph. A run of more than ``MAX_WORD_CHARS`` characters without whitespace (a
    blob, a hash, a minified line) is cut into pieces that long, each a word: so a passage
    joined with single spaces is at most ``max_words`` words and at most
    ``max_words * (MAX_WORD_CHARS + 1) - 1`` characters, however the text is laid out. Joining
    the passages less their overlaps gives back every word (or piece) in order."""
    paragraphs = [_cut_long(p.split()) for p in re.split(r"\n[ \t\r\f\v]*\n", text)]
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


def _cut_long(words: list[str]) -> list[str]:
    """``words`` with each longer than ``MAX_WORD_CHARS`` cut into pieces of that length."""
    if all(len(w) <= MAX_WORD_CHARS for w in words):
        return words
    return [w[i:i + MAX_WORD_CHARS] for w in words for i in range(0, len(w), MAX_WORD_CHARS)]


# ----------------------------------------------------------------------- HTML, Markdown


class _HtmlText(HTMLParser):
    """Text of an HTML page: script, style and head dropped (the head's <title> kept apart),
    block elements as paragraph breaks, the rest of the whitespace collapsed as a browser would.

    As in a browser, the head ends at its end tag, at <body>, or at the first tag or text that
    cannot be in a head, and a title at the next tag: a page that never closes its head (or
    has no head or body tags) keeps its body text."""

    BLOCKS = {"address", "article", "aside", "blockquote", "br", "dd", "details", "div", "dl", "dt",
              "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6",
              "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section", "summary", "table",
              "tbody", "tfoot", "thead", "tr", "ul"}
    CELLS = {"td", "th"}
    DROPPED = {"script", "style"}
    IN_HEAD = {"base", "basefont", "bgsound", "head", "html", "link", "meta", "noscript", "script", "style",
               "template", "title"}  # tags a head may hold; any other starts the body

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title: list[str] = []
        self.dropped = 0  # inside script/style
        self.in_head = self.in_title = False

    def handle_starttag(self, tag, attrs):
        self.in_title = False  # a title holds no tags: one left open ends here
        if self.in_head and tag not in self.IN_HEAD:
            self.in_head = False
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
        self.in_title = False
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
            return
        if self.in_head and data.strip():  # text cannot be in a head: the body has begun
            self.in_head = False
        if not self.in_head:
            self.parts.append(re.sub(r"\s+", " ", data))


def html_to_text(html: str) -> tuple[str, str]:
    """(title, text with paragraphs separated by blank lines)."""
    parser = _HtmlText()
    parser.feed(html)
    parser.close()
    return " ".join("".join(parser.title).split()), "".join(parser.parts)


def markdown_parts(text: str) -> tuple[str, str]:
    """(title, text) of a Markdown file: its front matter dropped (settings, perhaps secrets,
    never text), the title the front matter's ``title``, else the first ``# `` heading."""
    meta_title, body = front_matter(text)
    title, rest = markdown_title(body)
    if not meta_title:
        return title, rest
    same = " ".join(title.split()) == " ".join(meta_title.split())
    return meta_title, rest if same else body  # a heading that repeats the title goes with it


_FRONT = {"---": ("---", "..."), "+++": ("+++",)}  # YAML, TOML: the opening line and the closing ones
_KEY = re.compile(r"[A-Za-z_][\w.-]*\s*[:=]|\[")  # a key (YAML or TOML) or a TOML [table]
_TITLE = {"---": re.compile(r"title\s*:\s*(.*)$"), "+++": re.compile(r"title\s*=\s*(.*)$")}


def front_matter(text: str) -> tuple[str, str]:
    """(the front matter's title, the text after it): a block that opens the file with a ``---``
    (YAML) or ``+++`` (TOML) line, ends at the next ``---``/``...`` or ``+++`` line and starts
    with a ``key:`` or ``key =`` line (so a rule at the top of a page is not taken for one).
    Otherwise there is no front matter: ("", text)."""
    lines = text.splitlines(keepends=True)
    opening = lines[0].rstrip() if lines else ""
    if opening not in _FRONT:
        return "", text
    for end in range(1, len(lines)):
        if lines[end].rstrip() in _FRONT[opening]:
            break
    else:
        return "", text
    settings = [line for line in lines[1:end] if line.strip() and not line.lstrip().startswith("#")]
    if settings and not _KEY.match(settings[0]):
        return "", text
    title = ""
    for line in lines[1:end]:
        m = _TITLE[opening].match(line.rstrip())  # a top-level key: no indent
        if m:
            title = _scalar(m.group(1))
            break
    return title, "".join(lines[end + 1:])


def _scalar(value: str) -> str:
    """A one-line YAML/TOML string value: quoted, or plain up to a `` #`` comment; a block
    scalar (``|``, ``>``) or a list is no title."""
    value = value.strip()
    if value[:1] in ("'", '"'):
        end = value.find(value[0], 1)
        return value[1:end] if end > 0 else value[1:]
    value = re.split(r"\s#", value, maxsplit=1)[0].strip()
    return "" if value[:1] in ("|", ">", "[", "{") else value


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
