"""How to train on each format of an export, with the settings its trainer needs filled in.

A trainer's defaults rarely fit a given export: its group size must be the negatives a row plus
the positive (Tevatron and FlagEmbedding default to 8 and sample with replacement when a row
has fewer), its length limits must hold the texts, and the instructions are already in the
texts, so every prefix flag is empty. The numbers come from the rows themselves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from curate.export.formats.common import SCORE_TEMPERATURE, teacher_scores
from curate.export.rows import ExportRow

CHARS_PER_TOKEN = 4  # English word pieces average about four characters
MAX_LENGTH = 512  # what most small encoders take


@dataclass(frozen=True)
class Settings:
    negatives_per_row: int
    query_max_len: int
    passage_max_len: int
    batch_size: int | None
    scored: bool  # every row has the teacher's scores of all its texts: distillation can train

    @property
    def group_size(self) -> int:
        return self.negatives_per_row + 1


def _tokens(texts: list[str]) -> int:
    """An estimate of the longest text's tokens, rounded up to a multiple of 16, at most 512."""
    longest = max((len(t) for t in texts), default=0)
    return min(MAX_LENGTH, max(16, 16 * math.ceil(longest / CHARS_PER_TOKEN / 16)))


def settings(rows: list[ExportRow], batch_size: int | None) -> Settings:
    return Settings(negatives_per_row=max(1, max((len(r.negatives) for r in rows), default=1)),
                    query_max_len=_tokens([r.query_text for r in rows]),
                    passage_max_len=_tokens([t for r in rows for t in (r.positive, *r.negatives)]),
                    batch_size=batch_size,
                    scored=all(r.negatives and teacher_scores(r, list(r.negatives)) is not None for r in rows))


def commands(formats: list[str], s: Settings, nested: bool = True) -> str:
    """Markdown: for each format of ``formats`` that has a trainer, the command that trains on it
    (``nested``: each format's files are in a sub-folder named after it, else in the card's)."""
    where = {f: f"EXPORT/{f}" if nested else "EXPORT" for f in formats}
    parts = []
    if "sentence-transformers" in formats:
        parts.append(f"**sentence-transformers** (`{where['sentence-transformers']}`): the card there has the "
                     f"code; `MultipleNegativesRankingLoss`, batch size {s.batch_size}, its sampler keeping the "
                     f"file order, `max_seq_length = {max(s.query_max_len, s.passage_max_len)}`.")
    if "flagembedding" in formats:
        parts.append(f"""**FlagEmbedding** (`{where['flagembedding']}`):
```bash
torchrun --nproc_per_node 1 -m FlagEmbedding.finetune.embedder.encoder_only.base \\
    --model_name_or_path BASE_MODEL --train_data {where['flagembedding']} \\
    --train_group_size {s.group_size} --query_max_len {s.query_max_len} --passage_max_len {s.passage_max_len} \\
    --query_instruction_for_retrieval "" --query_instruction_format "{{}}{{}}" \\
    --temperature {SCORE_TEMPERATURE}{" --knowledge_distillation True" if s.scored else ""} --output_dir OUT
```
""" + (f"The scores are the teacher's cosine / {SCORE_TEMPERATURE}, the student's `--temperature`, so the teacher's "
       "softmax has the student's sharpness." if s.scored else
       "Some rows have no teacher scores, so the files train without distillation."))
    if "tevatron" in formats:
        parts.append(f"""**Tevatron** (`{where['tevatron']}`; `train_distil` with `--distil_temperature 0.02
--normalize` reads each passage's `score`, the teacher's cosine):
```bash
python -m tevatron.retriever.driver.train --model_name_or_path BASE_MODEL --dataset_name json \\
    --dataset_path {where['tevatron']}/train.jsonl --train_group_size {s.group_size} \\
    --query_max_len {s.query_max_len} --passage_max_len {s.passage_max_len} \\
    --query_prefix "" --passage_prefix "" --output_dir OUT
```""")
    if "nemo" in formats:
        parts.append(f"""**NeMo 2.x** (`{where['nemo']}`; it adds "query: " and "passage: " itself):
```python
from nemo.collections.llm.gpt.data.retrieval import CustomRetrievalDataModule
data = CustomRetrievalDataModule(data_root="{where['nemo']}/train.json", val_root="{where['nemo']}/dev.json",
                                 dataset_kwargs={{"num_hard_negatives": {s.negatives_per_row}}})
```""")
    if "nemo-automodel" in formats:
        parts.append(f"**NeMo Automodel** (`{where['nemo-automodel']}`): an inline retrieval dataset on "
                     f"`{where['nemo-automodel']}/train.jsonl` with `n_passages: {s.group_size}`, empty "
                     "query and passage prefixes.")
    if "beir" in formats:
        parts.append(f"**BEIR** (`{where['beir']}`): `curate eval --data {where['beir']} --split dev`, or any "
                     "BEIR/MTEB tool, on the held-out split.")
    return "\n\n".join(parts)


def format_card_text(fmt: str, rows: list[ExportRow], card: dict) -> str:
    """The training section of one format's own card (EXPORT: that folder)."""
    batch = (card.get("parameters") or {}).get("batch_size")
    return "EXPORT below is this folder.\n\n" + commands([fmt], settings(rows, batch), nested=False)
