"""``sentence-transformers``: ``anchor``, ``positive``, ``negative_1..n`` Parquet, and ``label``.

The sentence-transformers trainer feeds every column to the loss as text except one named
``label`` (or ``score``), which it hands the loss as its labels; so ids stay out and the teacher's
scores go in ``label``: for each row, the score of the positive, then of each negative in column
order (the positive's never below a negative's: ``curate.export.targets``). That one list is what
both of its distillation losses read (``DistillKLDivLoss`` as scores, ``MarginMSELoss`` turns it
into margins itself), and the contrastive losses ignore it, so
the same files train either way. The column is written only when every row of every split has
a score for each text it carries (a negative borrowed from another row has none): a loss cannot
take a missing target, and one schema serves every split. Every split has the same ``n`` (the
most negatives any row has) because a loss needs a full column for every row; shorter rows are
filled as ``common.fill_negatives`` explains (a row repeating its own negatives repeats their
scores too). The sampler that keeps file order is copied in beside the data, and with scores the
loss that sums the contrastive and the distillation loss (``curate.export.contrast_distill``).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from curate.export.formats import register_format
from curate.export.formats.card import write_card
from curate.export.formats.common import atomic_path, fill_negatives, split_indices, teacher_scores
from curate.export.formats.parquet import shard_rows, write_shards
from curate.export.formats.usage import Settings
from curate.export.rows import ExportRow
from curate.export.targets import agreeing_positive, lifts

SAMPLER_FILE = "sequential_sampler.py"
# Read as text, not imported: importing it would load torch for every export.
SAMPLER_SOURCE = Path(__file__).resolve().parents[1] / "sampler.py"
LOSS_FILE = "contrast_distill.py"
LOSS_SOURCE = Path(__file__).resolve().parents[1] / "contrast_distill.py"

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
`prompts` in the training arguments.
DISTIL"""


DISTIL = f"""\
The `label` column holds the teacher's scores (TEACHER): the positive's, then each negative's,
in column order. To learn from them as well as from the labels, train the same dataset with the
loss shipped here (`{LOSS_FILE}`, also `curate.export.contrast_distill`), the contrastive loss
plus sentence-transformers' `DistillKLDivLoss`; or with a distillation loss alone:

```python
from sentence_transformers.losses import DistillKLDivLoss, MarginMSELoss
from contrast_distill import ContrastAndDistill

loss = ContrastAndDistill(model, temperature=0.05)  # every text of the batch, and the teacher's softmax per row
# or: loss = DistillKLDivLoss(model, temperature=0.05)  # the teacher's softmax over each row's texts alone
# or: loss = MarginMSELoss(model)  # the teacher's margins, positive minus each negative
trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=ds["train"], loss=loss)
trainer.train()
```"""


RECOMMENDED = """\
With these scores (BM25 mixed into the teacher), measured on the bundled MiniLM (curate's docs,
Benchmarks: "A stronger teacher, and training on its scores"):
- `DistillKLDivLoss` at temperature 0.05, alone, is the recipe curate recommends for queries an LLM
  wrote from your documents (`curate pipeline`): with no labels it gave the one clear gain measured
  (NQ-UTD), never trained the student clearly below its untrained self, and through the whole
  pipeline raised each shipped set's real test on every seed. The contrastive loss, alone or added
  to it, once trained it below on one set; on some sets no loss moves a small model much.
- For labelled queries, the contrastive loss. With both of its parts counting, `ContrastAndDistill`
  trained level with it on SciFact, NFCorpus and NQ-UTD (3 seeds of a reduced budget, never ahead
  by more than the seed spread), and distillation alone, or CADET's flatter teacher weighed ten times,
  below it.
- Which wins depends on the data: `curate train RUN --loss pick` trains the contrastive loss, the sum
  and distillation alone on these rows and keeps the one your held-out queries score highest."""


def usage(s: Settings, where: str) -> str:
    return (f"**sentence-transformers** (`{where}`): the card there has the "
            f"code; `MultipleNegativesRankingLoss`, batch size {s.batch_size}, its sampler keeping the "
            f"file order, `max_seq_length = {max(s.query_max_len, s.passage_max_len)}`"
            + ("; or, on the teacher's scores in its `label` column, `DistillKLDivLoss` (temperature 0.05) "
               "or the shipped `ContrastAndDistill` (both losses)." if s.scored else "."))


@register_format("sentence-transformers", usage, order=1)
def write_st(rows: list[ExportRow], out_dir: Path, card: dict) -> list[Path]:
    out_dir = Path(out_dir)
    n = max((len(r.negatives) for r in rows), default=0)
    negs, filled = fill_negatives(rows, [list(r.negatives) for r in rows], n)
    names = ["anchor", "positive"] + [f"negative_{k + 1}" for k in range(n)]
    agree = lifts(card.get("parameters") or {})
    labels = [row_labels(r, ns, agree) for r, ns in zip(rows, negs)]
    scored = bool(rows) and all(lab is not None for lab in labels)
    schema = pa.schema([(c, pa.string()) for c in names] + ([("label", pa.list_(pa.float64()))] if scored else []))
    tables = {}
    for split, idx in split_indices(rows).items():
        columns = [[rows[i].query_text for i in idx], [rows[i].positive for i in idx]]
        columns += [[negs[i][k] for i in idx] for k in range(n)]
        if scored:
            columns.append([labels[i] for i in idx])
        tables[split] = pa.Table.from_arrays(columns, schema=schema)
    files = write_shards(out_dir, tables, shard_rows(card))
    notes = [f"{filled} row(s) had fewer than {n} negatives and were filled: a row repeats its own "
             "negatives in order; a row without any takes the negatives of the other rows of its batch "
             "(texts every query of that batch already sees as candidates), never a positive."] if filled else []
    batch = (card.get("parameters") or {}).get("batch_size")
    usage = USAGE.replace("BATCH", str(batch)) if isinstance(batch, int) else USAGE
    teacher, hybrid = _teacher(card)
    distil = DISTIL.replace("TEACHER", teacher) + ("\n" + RECOMMENDED if hybrid else "")
    usage = usage.replace("DISTIL", "\n" + distil if scored else "")
    if not scored and rows:
        notes.append("No `label` column: " + ("no row has teacher scores" if all(lab is None for lab in labels) else
                     f"{sum(lab is None for lab in labels)} row(s) lack a teacher score for a text they carry")
                     + ", so these files train with a contrastive loss only.")
    readme = write_card(out_dir, card, files, tables, _columns(n, scored, agree), usage, notes)
    shipped = [(out_dir / SAMPLER_FILE, SAMPLER_SOURCE)] + ([(out_dir / LOSS_FILE, LOSS_SOURCE)] if scored else [])
    for path, source in shipped:
        with atomic_path(path) as tmp:
            tmp.write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    return [out_dir / p for paths in files.values() for p in paths] + [readme] + [path for path, _ in shipped]


def _teacher(card: dict) -> tuple[str, bool]:
    """Who scored the export's sources, as their mine reports say, and whether BM25 was mixed in
    (``mine --scores hybrid``: the scores the measurements recommend training on)."""
    names, hybrid = [], False
    for src in card.get("sources") or []:
        for part in src.values() if isinstance(src, dict) else ():
            if not isinstance(part, dict):
                continue
            teachers = [str(t) for t in part.get("teachers") or [] if t]
            mixed = part.get("scores") or {}
            if mixed.get("kind") == "hybrid":
                hybrid = True
                teachers = [f"BM25 mixed into {t} at weight {mixed.get('weight')}" for t in teachers or ["the teacher"]]
            names += teachers
    return ", ".join(dict.fromkeys(names)) or "the mining teacher, a cosine", hybrid


def row_labels(row: ExportRow, negs: list[str], agree: bool = True) -> list[float] | None:
    """The teacher's scores of the row's positive and of each negative as written (``negs``: its own,
    maybe repeated to fill the row), or None when one is unknown: a borrowed negative, an unscored row.
    With ``agree`` (``--targets labels``) the positive's score is never below a negative's
    (``curate.export.targets``: lifted where the teacher disagrees with the label)."""
    own = teacher_scores(row, list(row.negatives))
    if own is None:
        return None
    by_text = dict(zip(row.negatives, own[1]))
    if any(t not in by_text for t in negs):
        return None
    return [agreeing_positive(*own) if agree else own[0], *(by_text[t] for t in negs)]


def _columns(n: int, scored: bool, agree: bool = True) -> dict[str, str]:
    cols = {"anchor": "the query, instruction applied", "positive": "the positive document"}
    if n:
        cols["negative_1 .. negative_%d" % n] = "negatives, in the row's order"
    if scored:
        lift = ("where the teacher put a negative at or above the positive, the positive's is lifted just above it"
                if agree else "as the teacher gave them, never lifted (--targets teacher)")
        cols["label"] = (f"the teacher's scores: the positive's, then each negative's in column order ({n + 1} "
                         f"numbers; {lift}: see label targets); the distillation losses read it, the "
                         "contrastive ones ignore it")
    return cols
