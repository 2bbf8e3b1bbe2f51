"""Where evaluation keeps what outlives one run: light sets and full results.

Both live beside the embedding cache, under ``$CURATE_CACHE_DIR/eval`` (or
``~/.cache/curate/eval``):

* ``light/<dataset>-<split>-<key>.json``: a light set, keyed by the dataset, the split,
  the teacher and the set's parameters, so every checkpoint evaluated later reuses it;
* ``results/<dataset>-<split>-<key>.json``: the means of a full evaluation, keyed by the
  dataset, the split and everything that changes the model's vectors (``Teacher.model_id``
  carries the folder fingerprint and the precision; the prompts are added), so a light run
  can report its distance from the full score without recomputing it.

Both are caches, keyed the way a stage's fingerprint is (``curate.core.hashing``): a dataset is
the SHA-256 of the three files an evaluation reads, not their path, so a corpus edited in place
never meets a light set or result of its previous contents, and a moved copy still does. Files
are written atomically; unreadable ones are ignored (rebuilt). A folder that cannot be written
is found before the encoding (``check_writable``).
"""

from __future__ import annotations

import errno
import functools
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError
from curate.core.hashing import file_digest, value_digest
from curate.core.jsonl import atomic_write_json
from curate.core.runner import MIN_FREE_BYTES, disk_error
from curate.embed.cache import default_cache_dir


def eval_cache_dir() -> Path:
    return default_cache_dir().parent / "eval"


def dataset_identity(folder: str | Path, split: str) -> dict[str, Any]:
    """The folder, the split and the content of the three files an evaluation reads (only the
    split and the content key the caches: the path is for the report)."""
    folder = Path(folder).resolve()
    files = [folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels" / f"{split}.tsv"]
    return {"path": str(folder), "split": split, "fingerprint": value_digest([_content(f) for f in files], 16)}


def _content(path: Path) -> list[Any]:
    st = path.stat()  # a missing file fails here, as the evaluation itself would
    return [path.name, _hashed(str(path), st.st_size, st.st_mtime_ns)]


@functools.lru_cache(maxsize=64)
def _hashed(path: str, size: int, mtime_ns: int) -> str | None:
    """A file's SHA-256, hashed once per process while its size and time stay (a grid scores
    many models on one corpus)."""
    return file_digest(path)


def _path(kind: str, dataset: dict[str, Any], key_parts: dict[str, Any]) -> Path:
    name = Path(dataset["path"]).name or "data"
    key = value_digest({"dataset": {k: dataset[k] for k in ("split", "fingerprint")}, **key_parts}, 16)
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
