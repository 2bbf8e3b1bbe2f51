"""``nemo`` and ``nemo-automodel``: the two NVIDIA retriever fine-tuning inputs.

``nemo``: what NeMo 2.x's ``CustomRetrievalDataModule`` reads, ``train.json`` and ``dev.json``,
each one JSON array (it loads a whole file with ``json.load``) of ``{"question_id", "question",
"pos_doc": [text], "neg_doc": [texts]}``. ``question`` is its default query key, and ``pos_doc``
is a list as its own examples write it (a string there turns the negatives into a nested list).
Give ``data_root=.../train.json`` and ``val_root=.../dev.json``; its ``BertEmbeddingDataset``
adds "query: " and "passage: " itself, so the texts carry only the export's instructions.

``nemo-automodel``: NeMo Automodel's inline retrieval data, ``train.jsonl`` and ``dev.jsonl``,
one ``{"question_id", "query", "pos_doc", "neg_doc"}`` object a line (its loader routes a local
file to the inline reader by the ``.jsonl`` suffix; ``pos_doc`` a string, ``neg_doc`` a list,
which it cycles when short). Automodel adds no prefix to inline data unless its collator is
told to.

Both fail on an empty ``neg_doc``, so a row without negatives gets borrowed ones
(``common.fill_negatives``). Texts carry the export's instructions: neither has a per-row
instruction field for inline data.
"""

from __future__ import annotations

import json
from pathlib import Path

from curate.core.jsonl import atomic_write_jsonl, atomic_write_text
from curate.export.formats.common import fill_negatives, id_tables, query_id, require_negatives, split_indices
from curate.export.formats import register_format
from curate.export.formats.card import write_format_card
from curate.export.formats.usage import Settings, format_card_text
from curate.export.rows import ExportRow


def _lines(rows: list[ExportRow], fmt: str) -> dict[str, list[tuple[str, str, str, list[str]]]]:
    """Per split: (question id, query, positive, negatives) of each row, in order."""
    require_negatives(rows, fmt)
    _, queries = id_tables(rows)
    negs, _ = fill_negatives(rows, [list(r.negatives) for r in rows],
                             max((len(r.negatives) for r in rows), default=0), pad_short=False)
    return {split: [(query_id(rows[i], queries), rows[i].query_text, rows[i].positive, negs[i]) for i in idx]
            for split, idx in split_indices(rows).items()}


def nemo_usage(s: Settings, where: str) -> str:
    return f"""**NeMo 2.x** (`{where}`; it adds "query: " and "passage: " itself):
```python
from nemo.collections.llm.gpt.data.retrieval import CustomRetrievalDataModule
data = CustomRetrievalDataModule(data_root="{where}/train.json", val_root="{where}/dev.json",
                                 dataset_kwargs={{"num_hard_negatives": {s.negatives_per_row}}})
```"""


def automodel_usage(s: Settings, where: str) -> str:
    return (f"**NeMo Automodel** (`{where}`): an inline retrieval dataset on "
            f"`{where}/train.jsonl` with `n_passages: {s.group_size}`, empty "
            "query and passage prefixes.")


@register_format("nemo", nemo_usage, order=4)
def write_nemo(rows: list[ExportRow], out_dir: Path, card: dict) -> list[Path]:
    written = []
    for split, lines in _lines(rows, "nemo").items():
        path = Path(out_dir) / f"{split}.json"
        atomic_write_text(path, json.dumps([{"question_id": q, "question": text, "pos_doc": [pos], "neg_doc": negs}
                                            for q, text, pos, negs in lines], ensure_ascii=False) + "\n")
        written.append(path)
    written.append(write_format_card(Path(out_dir), card, "nemo", written, format_card_text("nemo", rows, card)))
    return written


@register_format("nemo-automodel", automodel_usage, order=5)
def write_nemo_automodel(rows: list[ExportRow], out_dir: Path, card: dict) -> list[Path]:
    written = []
    for split, lines in _lines(rows, "nemo-automodel").items():
        path = Path(out_dir) / f"{split}.jsonl"
        atomic_write_jsonl(path, ({"question_id": q, "query": text, "pos_doc": pos, "neg_doc": negs}
                                  for q, text, pos, negs in lines))
        written.append(path)
    written.append(write_format_card(Path(out_dir), card, "nemo-automodel", written,
                                     format_card_text("nemo-automodel", rows, card)))
    return written
