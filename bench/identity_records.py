"""After a record schema change: the same data, read as the current schema reads it.

``bench/identity.py`` compares bytes, so a change of the record layout (schema 3 -> 4 moved each
negative's facts onto it) shows every records file and the ``hf`` exports' ``meta`` column as
different. This script says whether they differ in anything but layout: each record file of the
older pass is read through ``Record.from_dict`` (which upgrades it) and written back, then compared
with the newer pass's file line by line; a Parquet file is compared column by column, its ``meta``
column read the same way (an export row's ``meta`` is its record's). Volatile keys the identity
bench cuts (``created``, ``latency_s``, ``from_cache``) are cut here too.

    python bench/identity_records.py /work/identity/head /work/identity/v4

Exit 0 only when every file the manifests call different is the same data once read.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from curate.core.records import Record, _upgrade_v3  # noqa: E402

VOLATILE = ("created", "latency_s", "from_cache")


def _cut(obj):
    if isinstance(obj, dict):
        return {k: _cut(v) for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [_cut(v) for v in obj]
    return obj


def _record(line: str) -> dict:
    obj = json.loads(line)
    try:
        return _cut(Record.from_dict(obj).to_dict())
    except (ValueError, TypeError):  # not a record (a qrels line, a convert row): as it is
        return _cut(obj)


def _meta(text: str | None) -> dict | None:
    """An export row's ``meta`` (its record's), as the current schema keeps it."""
    if text is None:
        return None
    rec = Record(id="x", task_type="t", task="t", query="q", positive="p", meta=json.loads(text))
    _upgrade_v3(rec, None)
    return _cut(rec.meta)


def same(a: Path, b: Path) -> str | None:
    """None when ``a`` and ``b`` hold the same data once read, else what differs."""
    if a.suffix == ".jsonl":
        la, lb = a.read_text().splitlines(), b.read_text().splitlines()
        if len(la) != len(lb):
            return f"{len(la)} lines against {len(lb)}"
        for i, (x, y) in enumerate(zip(la, lb), 1):
            if _record(x) != _record(y):
                return f"line {i} differs"
        return None
    if a.suffix == ".parquet":
        ta, tb = pq.read_table(a), pq.read_table(b)
        if ta.schema != tb.schema:
            return "schemas differ"
        for col in ta.column_names:
            xa, xb = ta[col].to_pylist(), tb[col].to_pylist()
            if col == "meta":
                xa, xb = [_meta(x) for x in xa], [_meta(x) for x in xb]
            if xa != xb:
                return f"column {col} differs"
        return None
    return "not a records or Parquet file"


def main(older: str, newer: str) -> int:
    ma = json.loads((Path(older) / "manifest.json").read_text())
    mb = json.loads((Path(newer) / "manifest.json").read_text())
    files_a, files_b = ma["data"], mb["data"]
    differ = sorted(f for f in files_a if f in files_b and files_a[f] != files_b[f])
    bad = 0
    for f in differ:
        why = same(Path(older) / f, Path(newer) / f)
        bad += why is not None
        print(f"  {'same data' if why is None else 'DIFFERENT: ' + why}: {f}")
    only = sorted(set(files_a) ^ set(files_b))
    for f in only:
        print(f"  only in one pass: {f}")
    print(f"{len(files_a)} data files; {len(differ)} differ as bytes; "
          f"{len(differ) - bad} of them the same data once read; {len(only)} in one pass only")
    print("RESULT:", "SAME DATA" if not bad and not only else "DIFFERENT")
    return 1 if bad or only else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
