"""JSON Lines I/O with the guarantees every stage relies on.

* Reading names the file and line of anything malformed, as one line (the exact line, even
  for a byte that is not UTF-8); a UTF-8 byte-order mark at the start is read past.
* Appending writes whole lines and flushes them, so a killed run leaves at most one
  partial line at the end, which ``trim_partial_tail`` removes before resuming.
* Whole-file outputs go through ``atomic_write``: a temporary name, then a rename.
"""

from __future__ import annotations

import codecs
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


FILE_MODE = 0o666 & ~_umask()  # what open() would give; mkstemp's 0600 would hide outputs from others


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def read_lines(path: str | os.PathLike, kind: str = "file") -> Iterator[tuple[int, str]]:
    """Yield (line number, text without its line ending) for each line of a UTF-8 file.

    Read as bytes and decoded line by line, so a byte that is not UTF-8 is reported at its
    own line (text mode decodes in chunks and is off by as many lines as a chunk holds); a
    UTF-8 byte-order mark at the start is skipped, as editors on Windows write one. ``kind``
    names the file in the errors ("no such qrels file")."""
    path = Path(path)
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        raise CurateError(f"{path}: no such {kind}") from None
    except IsADirectoryError:
        raise CurateError(f"{path}: a folder, not a {kind}") from None
    except OSError as e:
        raise CurateError(f"{path}: cannot read: {e.strerror}") from None
    with fh:
        for lineno, raw in enumerate(fh, 1):
            if lineno == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8):]
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise CurateError(f"{path}:{lineno}: not UTF-8 text") from None
            yield lineno, line.rstrip("\r\n")


def read_jsonl(path: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """Yield (line number, parsed object) for each non-blank line."""
    for lineno, line in read_lines(path):
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line)
        except json.JSONDecodeError as e:
            raise CurateError(f"{path}:{lineno}: invalid JSON: {e.msg}") from None


def trim_partial_tail(path: str | os.PathLike) -> int:
    """Cut an unterminated last line (a write interrupted by a crash); return bytes removed."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return 0
    with path.open("rb+") as fh:
        size = fh.seek(0, os.SEEK_END)
        pos = size
        chunk = 65536
        while pos > 0:
            start = max(0, pos - chunk)
            fh.seek(start)
            data = fh.read(pos - start)
            idx = data.rfind(b"\n")
            if idx >= 0:
                keep = start + idx + 1
                break
            pos = start
        else:
            keep = 0
        if keep < size:
            fh.truncate(keep)
        return size - keep


class JsonlAppender:
    """Append-only JSONL writer: each ``write`` is one whole line, flushed at once."""

    def __init__(self, path: str | os.PathLike, fsync_every: int = 50):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        trim_partial_tail(self.path)
        self._fh = self.path.open("a", encoding="utf-8")
        self._since_sync = 0
        self._fsync_every = fsync_every

    def write(self, obj: Any) -> None:
        self._fh.write(dumps(obj) + "\n")
        self._fh.flush()
        self._since_sync += 1
        if self._since_sync >= self._fsync_every:
            self.sync()

    def sync(self) -> None:
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._since_sync = 0

    def close(self) -> None:
        if not self._fh.closed:
            self.sync()
            self._fh.close()

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_json_object(path: str | os.PathLike) -> dict[str, Any]:
    """A JSON object from ``path``; empty when it is missing, unreadable or not an object (a
    reader that only looks, such as a marker or another stage's report, treats all three alike)."""
    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return obj if isinstance(obj, dict) else {}


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write a whole file under a temporary name, then rename it into place."""
    atomic_write_bytes(path, [text.encode("utf-8")])


def atomic_write_bytes(path: str | os.PathLike, chunks: Iterable[bytes]) -> None:
    """Write ``chunks`` as a whole file under a temporary name, then rename it into place, so a
    kill leaves the old file or the new one, each whole."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_jsonl(path: str | os.PathLike, rows: Iterable[Any]) -> None:
    atomic_write_text(path, "".join(dumps(r) + "\n" for r in rows))


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, ensure_ascii=False, indent=2) + "\n")
