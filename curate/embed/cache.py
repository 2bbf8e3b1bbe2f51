"""An on-disk embedding cache: one float32 vector per (model id, prompt, text).

Vectors live in one SQLite file (``vectors.sqlite``) under the cache directory:

* ``spaces`` names each (model id, prompt) pair once and records its dimension;
* ``vectors`` holds ``(space, sha256(text), float32 blob)`` rows, clustered by key
  (``WITHOUT ROWID``) so a batch lookup is a handful of index range reads.

Safety: every ``put_many`` is one transaction in WAL mode, so a process killed mid-write
leaves the earlier batches intact and the interrupted one absent, never half-written.
A blob whose length does not match its space's dimension is treated as a miss, so even a
file damaged by other means cannot hand back a wrong-shaped vector.  Several processes
may share one cache (SQLite locks; writers wait up to a minute for each other).  What goes
in is the teacher's to check (``curate.embed.teacher.checked_vectors``); the cache refuses
only vectors that are not finite, and, with one line, vectors of another length than those
it holds for that (model, prompt).  A failing disk (full, read-only, damaged) is one
``CurateError`` line naming the directory, never a half-written batch.

The directory is ``$CURATE_CACHE_DIR/embeddings`` when that variable is set, else
``$XDG_CACHE_HOME/curate/embeddings`` (``~/.cache/curate/embeddings``), or whatever path
the constructor is given (a directory, or a file ending in ``.sqlite``/``.db``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from curate.core.errors import CurateError

DB_NAME = "vectors.sqlite"
_IN_CHUNK = 500  # hashes per "IN (...)" lookup; well under SQLite's bound-parameter limit
_PUT_CHUNK = 20_000  # rows per write transaction


def default_cache_dir() -> Path:
    """Where embeddings go when no path is given (see the module docstring)."""
    root = os.environ.get("CURATE_CACHE_DIR")
    if root:
        return Path(root).expanduser() / "embeddings"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "curate" / "embeddings"


def text_key(text: str) -> bytes:
    """The 32-byte key of a text: sha256 of its UTF-8 bytes (lone surrogates kept as-is)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class EmbeddingCache:
    """Batch get/put of float32 vectors keyed by (model id, prompt, sha256 of text).

    Counters: ``hits`` and ``misses`` (texts looked up), ``written`` (vectors stored).
    """

    def __init__(self, path: str | Path | None = None):
        where = Path(path).expanduser() if path else default_cache_dir()
        self.path = where if where.suffix in (".sqlite", ".db") else where / DB_NAME
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=60, isolation_level=None,
                                       check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS spaces (id INTEGER PRIMARY KEY, model TEXT NOT NULL, "
                "prompt TEXT NOT NULL, dim INTEGER NOT NULL, UNIQUE (model, prompt))")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS vectors (space INTEGER NOT NULL, h BLOB NOT NULL, "
                "v BLOB NOT NULL, PRIMARY KEY (space, h)) WITHOUT ROWID")
        except (OSError, sqlite3.Error) as e:
            raise CurateError(f"cannot open the embedding cache at {self.path}: {e} "
                              "(set CURATE_CACHE_DIR to a writable directory)") from None
        self._lock = threading.Lock()
        self._spaces: dict[tuple[str, str], tuple[int, int]] = {}
        self.hits = 0
        self.misses = 0
        self.written = 0

    # -- spaces -------------------------------------------------------------------------

    def _space(self, model_id: str, prompt: str, dim: int | None = None) -> tuple[int, int] | None:
        """(space id, dim) of a (model, prompt) pair; created when ``dim`` is given."""
        key = (model_id, prompt)
        if key in self._spaces:
            return self._spaces[key]
        row = self._db.execute("SELECT id, dim FROM spaces WHERE model = ? AND prompt = ?",
                               key).fetchone()
        if row is None and dim is not None:
            self._db.execute("INSERT OR IGNORE INTO spaces (model, prompt, dim) VALUES (?, ?, ?)",
                             (model_id, prompt, int(dim)))
            row = self._db.execute("SELECT id, dim FROM spaces WHERE model = ? AND prompt = ?",
                                   key).fetchone()
        if row is None:
            return None
        self._spaces[key] = (int(row[0]), int(row[1]))
        return self._spaces[key]

    def dim_of(self, model_id: str) -> int | None:
        """The length of the vectors stored under ``model_id`` (with any prompt), or None."""
        with self._lock, self._failing("read"):
            row = self._db.execute(
                "SELECT s.dim FROM spaces s WHERE s.model = ? AND EXISTS "
                "(SELECT 1 FROM vectors v WHERE v.space = s.id) ORDER BY s.id LIMIT 1", (model_id,)).fetchone()
        return None if row is None else int(row[0])

    @contextlib.contextmanager
    def _failing(self, doing: str):
        """SQLite's errors (a full disk, a read-only or damaged file) as one line naming the
        cache's directory: they are the machine's, not the run's, and the user can fix them there."""
        try:
            yield
        except sqlite3.Error as e:
            raise CurateError(f"cannot {doing} the embedding cache in {self.path.parent}: {e} (free space there, "
                              "or set CURATE_CACHE_DIR to another directory)") from None

    # -- reads --------------------------------------------------------------------------

    def get_many(self, model_id: str, prompt: str, texts: Sequence[str]) -> list[np.ndarray | None]:
        """One float32 vector or ``None`` per text, in order."""
        keys = [text_key(t) for t in texts]
        found: dict[bytes, np.ndarray] = {}
        with self._lock, self._failing("read"):
            space = self._space(model_id, prompt)
            if space is not None:
                sid, dim = space
                nbytes = dim * 4
                uniq = list(dict.fromkeys(keys))
                for i in range(0, len(uniq), _IN_CHUNK):
                    part = uniq[i:i + _IN_CHUNK]
                    marks = ",".join("?" * len(part))
                    rows = self._db.execute(
                        f"SELECT h, v FROM vectors WHERE space = ? AND h IN ({marks})",
                        (sid, *part)).fetchall()
                    for h, v in rows:
                        if len(v) == nbytes:  # anything else is damage: a miss, never a bad vector
                            found[bytes(h)] = np.frombuffer(v, dtype="<f4")
        out = [found.get(k) for k in keys]
        hit = sum(v is not None for v in out)
        self.hits += hit
        self.misses += len(out) - hit
        return out

    def get_matrix(self, model_id: str, prompt: str,
                   texts: Sequence[str]) -> tuple[np.ndarray | None, np.ndarray]:
        """The cached vectors as one (n, dim) float32 matrix plus a found-mask.

        Rows of texts not found are zero; the matrix is ``None`` when nothing was found.
        """
        vecs = self.get_many(model_id, prompt, texts)
        mask = np.array([v is not None for v in vecs], dtype=bool)
        if not mask.any():
            return None, mask
        dim = next(v.shape[0] for v in vecs if v is not None)
        mat = np.zeros((len(vecs), dim), dtype=np.float32)
        for i, v in enumerate(vecs):
            if v is not None:
                mat[i] = v
        return mat, mask

    def count(self, model_id: str | None = None, prompt: str | None = None) -> int:
        """Stored vectors, all of them or those of one (model, prompt) space."""
        with self._lock:
            if model_id is None:
                return int(self._db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0])
            space = self._space(model_id, prompt or "")
            if space is None:
                return 0
            return int(self._db.execute("SELECT COUNT(*) FROM vectors WHERE space = ?",
                                        (space[0],)).fetchone()[0])

    # -- writes -------------------------------------------------------------------------

    def put_many(self, model_id: str, prompt: str, texts: Sequence[str], vectors) -> None:
        """Store one vector per text (a (n, dim) array or a list of 1-d arrays)."""
        if len(texts) == 0:
            return
        mat = np.ascontiguousarray(np.asarray(vectors, dtype="<f4"))
        if mat.ndim != 2 or mat.shape[0] != len(texts):
            raise ValueError(f"put_many needs one vector per text: {len(texts)} texts, "
                             f"vectors of shape {mat.shape}")
        if not np.isfinite(mat).all():
            raise ValueError("refusing to cache vectors with NaN or infinite values")
        dim = mat.shape[1]
        with self._lock, self._failing("write to"):
            sid, have = self._space(model_id, prompt, dim)
            if have != dim:
                sid = self._resize_empty(model_id, prompt, sid, have, dim)
            for i in range(0, len(texts), _PUT_CHUNK):
                rows = [(sid, text_key(t), mat[j].tobytes())
                        for j, t in enumerate(texts[i:i + _PUT_CHUNK], start=i)]
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    self._db.executemany(
                        "INSERT OR REPLACE INTO vectors (space, h, v) VALUES (?, ?, ?)", rows)
                    self._db.execute("COMMIT")
                except BaseException:
                    if self._db.in_transaction:  # SQLite may have rolled back already (a full disk)
                        with contextlib.suppress(sqlite3.Error):
                            self._db.execute("ROLLBACK")
                    raise
                self.written += len(rows)

    def _resize_empty(self, model_id: str, prompt: str, sid: int, have: int, dim: int) -> int:
        """A space of another length takes ``dim`` when it holds no vector (a write that failed
        after naming it); otherwise one line saying what the cache holds under that name."""
        if self._db.execute("SELECT 1 FROM vectors WHERE space = ? LIMIT 1", (sid,)).fetchone() is not None:
            raise CurateError(f"the embedding cache in {self.path.parent} holds {have}-d vectors for "
                              f"{model_id} (prompt {prompt!r}), not {dim}-d: give the model another name, set "
                              "CURATE_CACHE_DIR to another directory, or delete that one")
        self._db.execute("UPDATE spaces SET dim = ? WHERE id = ?", (dim, sid))
        self._spaces[(model_id, prompt)] = (sid, dim)
        return sid

    # -- housekeeping -------------------------------------------------------------------

    def stats(self) -> dict[str, int]:
        return {"hits": self.hits, "misses": self.misses, "written": self.written}

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None  # type: ignore[assignment]

    def __enter__(self) -> EmbeddingCache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EmbeddingCache({str(self.path)!r})"
