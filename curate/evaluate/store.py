"""Where evaluation keeps what outlives one run: light sets and full results.

Both live beside the embedding cache, under ``$CURATE_CACHE_DIR/eval`` (or
``~/.cache/curate/eval``):

* ``light/<dataset>-<split>-<key>.json``: a light set, keyed by the dataset, the split,
  the teacher and the set's parameters, so every checkpoint evaluated later reuses it;
* ``results/<dataset>-<split>-<key>.json``: the means of a full evaluation, keyed by the
  dataset, the split and everything that changes the model's vectors (``Teacher.model_id``
  carries the folder fingerprint and the precision; the prompts are added), so a light run
  can report its distance from the full score without recomputing it.

A dataset is identified by its resolved folder *and* the size and modification time of
the files read, so a corpus edited in place never meets a light set or result of its
previous contents.  Files are written atomically; unreadable ones are ignored (rebuilt).  A
folder that cannot be written is found before the encoding (``check_writable``).
"""

from __future__ import annotations

import errno
import hashlib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError
from curate.core.jsonl import atomic_write_json
from curate.core.runner import MIN_FREE_BYTES, disk_error
from curate.embed.cache import default_cache_dir


def eval_cache_dir() -> Path:
    return default_cache_dir().parent / "eval"


def digest(obj: Any, n: int = 16) -> str:
    """A short stable hash of a JSON-able value (dict keys sorted)."""
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:n]


def dataset_identity(folder: str | Path, split: str) -> dict[str, Any]:
    """The resolved folder, the split and a fingerprint of the three files an evaluation reads."""
    folder = Path(folder).resolve()
    files = [folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels" / f"{split}.tsv"]
    stats = []
    for f in files:
        st = f.stat()
        stats.append([f.name, st.st_size, st.st_mtime_ns])
    return {"path": str(folder), "split": split, "fingerprint": digest(stats)}


def _path(kind: str, dataset: dict[str, Any], key_parts: dict[str, Any]) -> Path:
    name = Path(dataset["path"]).name or "data"
    key = digest({"dataset": dataset, **key_parts})
    return eval_cache_dir() / kind / f"{name}-{dataset['split']}-{key}.json"


def light_set_path(dataset: dict[str, Any], key_parts: dict[str, Any]) -> Path:
    return _path("light", dataset, key_parts)


def result_path(dataset: dict[str, Any], model_key: dict[str, Any]) -> Path:
    return _path("results", dataset, model_key)


def read_json(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None when it is missing or unreadable."""
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def _cannot_write(e: OSError, path: Path) -> CurateError:
    """A failed write as one line naming ``path`` (the file the user asked for or the cache's)."""
    err = disk_error(OSError(e.errno, e.strerror), path)  # the project's wording, for the path given
    line = str(err) if isinstance(err, CurateError) else f"{path}: cannot write: {(e.strerror or str(e)).lower()}"
    hint = " (set CURATE_CACHE_DIR to a writable folder)" if eval_cache_dir() in path.parents else ""
    return CurateError(line + hint)


def check_writable(path: Path) -> None:
    """Make sure ``path`` can be written before the work that produces it: its folder made,
    a file creatable there, and room on the disk (``runner.MIN_FREE_BYTES``)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path.parent):
            pass
        free = shutil.disk_usage(path.parent).free
    except OSError as e:
        raise _cannot_write(e, path) from None
    if free < MIN_FREE_BYTES:
        raise _cannot_write(OSError(errno.ENOSPC, "No space left on device"), path)


def write_json(path: Path, obj: dict[str, Any]) -> None:
    """Write atomically; a disk that fails the write (full, read-only) is one line naming ``path``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, obj)
    except OSError as e:
        raise _cannot_write(e, path) from None
