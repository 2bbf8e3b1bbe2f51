"""``hf``: every field of every row as a Parquet dataset with a dataset card.

The full-information format: texts as trained (instruction applied) and raw, scores, levels,
phases and batch numbers, so any other layout can be rebuilt from it and a run can be audited.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

from curate.export.formats import register_format
from curate.export.formats.card import write_card
from curate.export.formats.common import by_split
from curate.export.formats.parquet import shard_rows, write_shards
from curate.export.rows import ExportRow

SCHEMA = pa.schema([
    ("record_id", pa.string()), ("split", pa.string()), ("batch", pa.int64()), ("phase", pa.int64()),
    ("task_type", pa.string()), ("task", pa.string()), ("instruction", pa.string()), ("symmetric", pa.bool_()),
    ("query", pa.string()), ("query_text", pa.string()), ("positive", pa.string()),
    ("negatives", pa.list_(pa.string())), ("positive_score", pa.float64()),
    ("negative_scores", pa.list_(pa.float64())), ("levels", pa.list_(pa.int64())),
    ("positive_id", pa.string()), ("negative_ids", pa.list_(pa.string())), ("meta", pa.string()),
])

COLUMNS = {
    "record_id": "id of the curate record the row came from",
    "split": "train or dev (dev is held out by task: no query appears in both)",
    "batch": "training batch within the split; rows of one batch are consecutive",
    "phase": "curriculum phase, 1 = trained first; empty without a curriculum",
    "task_type": "task family (short-long, sts, retrieval, ...)",
    "task": "the task text the instruction was made from",
    "instruction": "the query-side prefix (applied in query_text; on documents too when symmetric)",
    "symmetric": "true when the instruction is applied to documents as well (STS-like tasks)",
    "query": "the query without instruction",
    "query_text": "the query as the model should encode it",
    "positive": "the positive as the model should encode it",
    "negatives": "the negatives as the model should encode them",
    "positive_score": "teacher score of the positive, when known",
    "negative_scores": "teacher score of each negative, when known",
    "levels": "difficulty of each negative: 1 hardest .. 4 easiest",
    "positive_id": "corpus id of the positive, when it came from a corpus",
    "negative_ids": "corpus id of each negative, when known",
    "meta": "provenance of the record, as JSON",
}

USAGE = """\
```python
from datasets import load_dataset

ds = load_dataset("PATH/TO/THIS/FOLDER")  # splits: train, dev; rows in training order
# Read it in order, e.g. torch.utils.data.DataLoader(ds["train"], batch_size=B, shuffle=False)
# with B = the export's batch_size, so each step is one exported batch (the `batch` column).
```
For sentence-transformers use the `sentence-transformers` export, which has only the text
columns that trainer wants and ships the sampler that keeps this order."""


def row_dict(row: ExportRow) -> dict:
    return {
        "record_id": row.record_id, "split": row.split, "batch": row.batch, "phase": row.phase,
        "task_type": row.task_type, "task": row.task, "instruction": row.instruction,
        "symmetric": bool(row.symmetric), "query": row.query, "query_text": row.query_text,
        "positive": row.positive, "negatives": list(row.negatives), "positive_score": row.positive_score,
        "negative_scores": list(row.negative_scores), "levels": list(row.levels),
        "positive_id": row.positive_id, "negative_ids": list(row.negative_ids),
        "meta": json.dumps(row.meta, ensure_ascii=False, sort_keys=True, default=str),
    }


@register_format("hf", order=0)  # the card's training section: the sentence-transformers layout's instead
def write_hf(rows: list[ExportRow], out_dir: Path, card: dict) -> list[Path]:
    out_dir = Path(out_dir)
    tables = {split: pa.Table.from_pylist([row_dict(r) for r in part], schema=SCHEMA)
              for split, part in by_split(rows).items()}
    files = write_shards(out_dir, tables, shard_rows(card))
    readme = write_card(out_dir, card, files, tables, COLUMNS, USAGE)
    return [out_dir / p for paths in files.values() for p in paths] + [readme]
