"""A per-request answer cache, keyed by everything that determines the answer.

The key is the rendered messages, model, answer schema and sampling parameters (seed
included), never code: editing curate does not invalidate finished requests, and a
re-run sends none of them again.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any


def request_key(body: dict[str, Any]) -> str:
    blob = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class RequestCache:
    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path else None
        self._db: sqlite3.Connection | None = None
        self.hits = 0
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, value TEXT NOT NULL)")

    def get(self, key: str) -> dict[str, Any] | None:
        if self._db is None:
            return None
        row = self._db.execute("SELECT value FROM answers WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        self.hits += 1
        return json.loads(row[0])

    def put(self, key: str, value: dict[str, Any]) -> None:
        if self._db is not None:
            self._db.execute(
                "INSERT OR REPLACE INTO answers (key, value) VALUES (?, ?)",
                (key, json.dumps(value, ensure_ascii=False)),
            )

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
