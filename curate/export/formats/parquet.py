"""Parquet shards laid out the way the Hugging Face hub and ``datasets.load_dataset`` expect.

``data/<split>-00000-of-0000N.parquet``, rows in export order, files listed one by one in the
dataset card so the reader keeps the file order (a glob would too, but a stale shard from an
earlier export with more shards would then be read as well).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from curate.core.errors import CurateError
from curate.export.formats.common import atomic_path

DEFAULT_SHARD_ROWS = 100_000
_SHARD_RE = re.compile(r"\w+-\d{5}-of-\d{5}\.parquet")


def shard_rows(card: dict) -> int:
    """The shard size, from the export's parameters (``shard_rows``), 100k rows by default."""
    value = (card.get("parameters") or {}).get("shard_rows") or DEFAULT_SHARD_ROWS
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise CurateError(f"shard_rows must be a positive whole number of rows, not {value!r}")
    return value


def write_shards(out_dir: Path, tables: dict[str, pa.Table], rows_per_shard: int) -> dict[str, list[str]]:
    """Write every split's table as shards under ``out_dir/data``; return split -> relative paths."""
    data_dir = out_dir / "data"
    written: dict[str, list[str]] = {}
    for split, table in tables.items():
        n_shards = max(1, -(-table.num_rows // rows_per_shard))
        names = []
        for k in range(n_shards):
            name = f"{split}-{k:05d}-of-{n_shards:05d}.parquet"
            with atomic_path(data_dir / name) as tmp:
                pq.write_table(table.slice(k * rows_per_shard, rows_per_shard), tmp)
            names.append(f"data/{name}")
        written[split] = names
    keep = {Path(p).name for paths in written.values() for p in paths}
    for old in data_dir.glob("*.parquet"):  # shards of an earlier export into the same folder
        if _SHARD_RE.fullmatch(old.name) and old.name not in keep:
            old.unlink()
    return written


def yaml_features(schema: pa.Schema) -> list[dict[str, Any]]:
    """The ``dataset_info.features`` list of a dataset card for the column types we write."""
    return [{"name": f.name, **_yaml_type(f.type, f.name)} for f in schema]


def _yaml_type(t: pa.DataType, name: str) -> dict[str, Any]:
    if pa.types.is_list(t):
        inner = _yaml_type(t.value_type, name)
        return {"list": inner["dtype"] if set(inner) == {"dtype"} else inner}
    for test, dtype in ((pa.types.is_string, "string"), (pa.types.is_int64, "int64"),
                        (pa.types.is_float64, "float64"), (pa.types.is_boolean, "bool")):
        if test(t):
            return {"dtype": dtype}
    raise CurateError(f"internal: column {name!r} has a type the dataset card cannot describe ({t})")
