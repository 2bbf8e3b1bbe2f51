"""``sentence-transformers``: ``anchor``, ``positive``, ``negative_1..n`` Parquet, nothing else.

The sentence-transformers trainer feeds every column to the loss as text (ids and labels
included), so this layout carries only the texts. Every split has the same ``n`` (the most
negatives any row has) because a loss such as MultipleNegativesRankingLoss needs a full
column for every row; shorter rows are filled as ``common.fill_negatives`` explains.
The sampler that keeps file order is copied in beside the data.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from curate.export.formats import register_format
from curate.export.formats.card import write_card
from curate.export.formats.common import atomic_path, fill_negatives, split_indices
from curate.export.formats.parquet import shard_rows, write_shards
from curate.export.formats.usage import Settings
from curate.export.rows import ExportRow

SAMPLER_FILE = "sequential_sampler.py"
# Read as text, not imported: importing it would load torch for every export.
SAMPLER_SOURCE = Path(__file__).resolve().parents[1] / "sampler.py"

USAGE = f"""\
The trainer shuffles by default; pass the sampler shipped here (`{SAMPLER_FILE}`, also
`curate.export.sampler`) and set the per-device batch size to the export's batch size
(BATCH), so each step is one exported batch, in order.

```python
import sys
from datasets import load_dataset
from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
from sentence_transformers.losses import MultipleNegativesRankingLoss

sys.path.insert(0, "PATH/TO/THIS/FOLDER")
from sequential_sampler import training_args

ds = load_dataset("PATH/TO/THIS/FOLDER")
model = SentenceTransformer("BASE_MODEL")
args = training_args(batch_size=BATCH, output_dir="OUT", num_train_epochs=1)
trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=ds["train"],
                                     eval_dataset=ds["dev"], loss=MultipleNegativesRankingLoss(model))
trainer.train()
```
Equivalently: `SentenceTransformerTrainingArguments(..., per_device_train_batch_size=BATCH,
batch_sampler=SequentialBatchSampler)`. The texts already carry their instructions: set no
`prompts` in the training arguments."""


def usage(s: Settings, where: str) -> str:
    return (f"**sentence-transformers** (`{where}`): the card there has the "
            f"code; `MultipleNegativesRankingLoss`, batch size {s.batch_size}, its sampler keeping the "
            f"file order, `max_seq_length = {max(s.query_max_len, s.passage_max_len)}`.")


@register_format("sentence-transformers", usage, order=1)
def write_st(rows: list[ExportRow], out_dir: Path, card: dict) -> list[Path]:
    out_dir = Path(out_dir)
    n = max((len(r.negatives) for r in rows), default=0)
    negs, filled = fill_negatives(rows, [list(r.negatives) for r in rows], n)
    names = ["anchor", "positive"] + [f"negative_{k + 1}" for k in range(n)]
    schema = pa.schema([(c, pa.string()) for c in names])
    tables = {}
    for split, idx in split_indices(rows).items():
        columns = [[rows[i].query_text for i in idx], [rows[i].positive for i in idx]]
        columns += [[negs[i][k] for i in idx] for k in range(n)]
        tables[split] = pa.Table.from_arrays(columns, schema=schema)
    files = write_shards(out_dir, tables, shard_rows(card))
    notes = [f"{filled} row(s) had fewer than {n} negatives and were filled: a row repeats its own "
             "negatives in order; a row without any takes the negatives of the other rows of its batch "
             "(texts every query of that batch already sees as candidates), never a positive."] if filled else []
    batch = (card.get("parameters") or {}).get("batch_size")
    usage = USAGE.replace("BATCH", str(batch)) if isinstance(batch, int) else USAGE
    readme = write_card(out_dir, card, files, tables, _columns(n), usage, notes)
    shipped = out_dir / SAMPLER_FILE
    with atomic_path(shipped) as tmp:
        tmp.write_text(SAMPLER_SOURCE.read_text(encoding="utf-8"), encoding="utf-8")
    return [out_dir / p for paths in files.values() for p in paths] + [readme, shipped]


def _columns(n: int) -> dict[str, str]:
    cols = {"anchor": "the query, instruction applied", "positive": "the positive document"}
    if n:
        cols["negative_1 .. negative_%d" % n] = "negatives, in the row's order"
    return cols
