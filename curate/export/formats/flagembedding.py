"""``flagembedding``: JSONL for FlagEmbedding's embedder fine-tuning, one file per task type.

Matched against FlagEmbedding's ``abc/finetune/embedder/AbsDataset.py``: each line has
``query``, ``pos`` and ``neg`` (lists, ``neg`` never empty: it divides by its length),
``prompt`` and ``type``; ``pos_scores``/``neg_scores`` only for knowledge distillation.

* Layout: ``--train_data`` reads a folder's ``.json``/``.jsonl`` files, not its sub-folders, so
  the training files sit at the top (``<task_type>.jsonl``) and the folder is given as it is;
  the dev split goes to ``dev/``, which training never reads.
* FlagEmbedding puts ``prompt`` before the query itself (``--query_instruction_format '{}{}'``,
  applied when ``--query_instruction_for_retrieval`` is set, to anything, e.g. ""), so
  ``query`` is the bare query and ``prompt`` the export's instruction (on every row, "" when
  none: its same-dataset mode would otherwise prepend "None").
* ``type``: ``symmetric_sts`` / ``symmetric_clustering`` make it put the prompt on the
  documents too, so symmetric rows carry bare documents; ``symmetric_class`` for
  classification; ``normal`` otherwise.
* Classification and clustering files end in ``-no_in_batch_neg``, its switch for no in-batch
  negatives. It reads the switch from a file's name only when the file is given on its own
  (with ``--same_dataset_within_batch True``); given the folder, every file trains alike.
* Scores are distillation-ready: FlagEmbedding turns a row's teacher scores into targets with a
  softmax and no temperature, while the student's scores are its cosines divided by
  ``--temperature`` (0.02 by default). Raw cosines would make nearly uniform targets, so the
  teacher's cosines are written divided by the same ``SCORE_TEMPERATURE``, which puts teacher
  and student on one scale. They are written only in files where every row has all of them (it
  rejects a null).
FlagEmbedding reshuffles its data each epoch: the export's order is not kept there.
"""

from __future__ import annotations

from pathlib import Path

from curate.core.jsonl import atomic_write_jsonl
from curate.export.formats.common import (SCORE_TEMPERATURE, fill_negatives, raw_document, require_negatives,
                                          safe_name, split_indices, teacher_scores)
from curate.export.formats import register_format
from curate.export.formats.card import write_format_card
from curate.export.formats.usage import Settings, format_card_text
from curate.export.rows import ExportRow

NO_IN_BATCH = ("classification", "clustering")
TRAIN = "train"  # the split whose files sit at the top of the folder


def fe_type(row: ExportRow) -> str:
    if row.symmetric:
        return "symmetric_clustering" if row.task_type == "clustering" else "symmetric_sts"
    return "symmetric_class" if row.task_type == "classification" else "normal"


def file_stem(task_type: str) -> str:
    return safe_name(task_type) + ("-no_in_batch_neg" if task_type in NO_IN_BATCH else "")


def usage(s: Settings, where: str) -> str:
    return f"""**FlagEmbedding** (`{where}`):
```bash
torchrun --nproc_per_node 1 -m FlagEmbedding.finetune.embedder.encoder_only.base \\
    --model_name_or_path BASE_MODEL --train_data {where} \\
    --train_group_size {s.group_size} --query_max_len {s.query_max_len} --passage_max_len {s.passage_max_len} \\
    --query_instruction_for_retrieval "" --query_instruction_format "{{}}{{}}" \\
    --temperature {SCORE_TEMPERATURE}{" --knowledge_distillation True" if s.scored else ""} --output_dir OUT
```
""" + (f"The scores are the teacher's cosine / {SCORE_TEMPERATURE}, the student's `--temperature`, so the teacher's "
       "softmax has the student's sharpness." if s.scored else
       "Some rows have no teacher scores, so the files train without distillation.")


# it reads every JSON file of the folder it is given: a folder of its own, never beside the report
@register_format("flagembedding", usage, order=2, own_folder=True)
def write_flagembedding(rows: list[ExportRow], out_dir: Path, card: dict) -> list[Path]:
    require_negatives(rows, "flagembedding")
    out_dir = Path(out_dir)
    raw = [[raw_document(r, t) for t in r.negatives] for r in rows]
    negs, _ = fill_negatives(rows, raw, max((len(t) for t in raw), default=0), pad_short=False)
    written = []
    for split, idx in split_indices(rows).items():
        files: dict[str, list[int]] = {}
        for i in idx:
            files.setdefault(file_stem(rows[i].task_type), []).append(i)
        folder = out_dir if split == TRAIN else out_dir / split
        for stem, members in files.items():
            scores = {i: teacher_scores(rows[i], negs[i]) for i in members}
            keep = all(s is not None for s in scores.values())
            path = folder / f"{stem}.jsonl"
            atomic_write_jsonl(path, (_line(rows[i], negs[i], scores[i] if keep else None) for i in members))
            written.append(path)
    how = format_card_text("flagembedding", rows, card)
    # its files differ in columns by task, so no datasets config; FlagEmbedding skips the README.md
    written.append(write_format_card(out_dir, card, "flagembedding", written, how, configs=False))
    return written


def _line(row: ExportRow, negs: list[str], scores: tuple[float, list[float]] | None) -> dict:
    line = {"query": row.query, "pos": [raw_document(row, row.positive)], "neg": negs}
    if scores is not None:
        line["pos_scores"] = [round(scores[0] / SCORE_TEMPERATURE, 4)]
        line["neg_scores"] = [round(s / SCORE_TEMPERATURE, 4) for s in scores[1]]
    line["prompt"] = row.instruction
    line["type"] = fe_type(row)
    return line
