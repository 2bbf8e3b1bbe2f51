"""``flagembedding``: JSONL for FlagEmbedding's embedder fine-tuning, one file per split and task.

Matched against FlagEmbedding's ``abc/finetune/embedder/AbsDataset.py``: each line has
``query``, ``pos`` and ``neg`` (lists, ``neg`` never empty: it divides by its length),
``prompt`` and ``type``; ``pos_scores``/``neg_scores`` only for knowledge distillation.

* FlagEmbedding puts ``prompt`` before the query itself (``--query_instruction_format '{}{}'``,
  applied when ``--query_instruction_for_retrieval`` is set, to anything, e.g. ""), so
  ``query`` is the bare query and ``prompt`` the export's instruction.
* ``type``: ``symmetric_sts`` / ``symmetric_clustering`` make it put the prompt on the
  documents too, so symmetric rows carry bare documents; ``symmetric_class`` for
  classification; ``normal`` otherwise.
* Its same-dataset batching (``--same_dataset_within_batch``) treats a file as a dataset and
  wants one ``type`` per batch, hence ``<split>/<task_type>.jsonl``; classification and
  clustering files end in ``-no_in_batch_neg`` (its switch for no in-batch negatives).
* Scores are written only in files where every row has all of them (it rejects a null).
FlagEmbedding reshuffles its data each epoch: the export's order is not kept there.
"""

from __future__ import annotations

from pathlib import Path

from curate.export.formats.common import fill_negatives, raw_document, safe_name, split_indices, require_negatives
from curate.export.rows import ExportRow
from curate.core.jsonl import atomic_write_jsonl

NO_IN_BATCH = ("classification", "clustering")


def fe_type(row: ExportRow) -> str:
    if row.symmetric:
        return "symmetric_clustering" if row.task_type == "clustering" else "symmetric_sts"
    return "symmetric_class" if row.task_type == "classification" else "normal"


def write_flagembedding(rows: list[ExportRow], out_dir: Path, card: dict) -> list[Path]:
    require_negatives(rows, "flagembedding")
    out_dir = Path(out_dir)
    raw = [[raw_document(r, t) for t in r.negatives] for r in rows]
    negs, _ = fill_negatives(rows, raw, max((len(t) for t in raw), default=0), pad_short=False)
    written = []
    for split, idx in split_indices(rows).items():
        files: dict[str, list[int]] = {}
        for i in idx:
            stem = safe_name(rows[i].task_type) + ("-no_in_batch_neg" if rows[i].task_type in NO_IN_BATCH else "")
            files.setdefault(stem, []).append(i)
        for stem, members in files.items():
            with_scores = all(_scores(rows[i], negs[i]) is not None for i in members)
            path = out_dir / split / f"{stem}.jsonl"
            atomic_write_jsonl(path, (_line(rows[i], negs[i], with_scores) for i in members))
            written.append(path)
    return written


def _scores(row: ExportRow, negs: list[str]) -> tuple[list[float], list[float]] | None:
    """The row's teacher scores when every text written has one (filled rows have none)."""
    neg_scores = list(row.negative_scores)
    if (row.positive_score is None or len(neg_scores) != len(negs) or len(negs) != len(row.negatives)
            or any(s is None for s in neg_scores)):
        return None
    return [float(row.positive_score)], [float(s) for s in neg_scores]


def _line(row: ExportRow, negs: list[str], with_scores: bool) -> dict:
    line = {"query": row.query, "pos": [raw_document(row, row.positive)], "neg": negs}
    if with_scores:
        line["pos_scores"], line["neg_scores"] = _scores(row, negs)
    line["prompt"] = row.instruction
    line["type"] = fe_type(row)
    return line
