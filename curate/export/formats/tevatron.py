"""``tevatron``: Tevatron's grouped training JSONL, ``train.jsonl`` and ``dev.jsonl``.

Matched against Tevatron's ``retriever/dataset.py`` (the format with inline passages):
``query_id``, ``query``, ``positive_passages`` and ``negative_passages`` as lists of
``{"docid", "title", "text"}``. Tevatron joins a passage's title and text with a space when
the passage has a ``title`` key, so every passage has one (a file where some lack it fails
there): the document's title where it came from a corpus with titles, else empty with the
whole document in ``text``; either way Tevatron encodes the text curate mined with. Passages carry the teacher's ``score`` (its
cosine, the scale Tevatron's distillation divides by ``--distil_temperature`` on both sides)
when every passage of the export has one (one schema for every split); ``train_distil`` needs
it on each. Tevatron has one query
prefix for the whole run, while an export can hold several tasks, so the texts carry their
instructions already: train with ``--query_prefix ''`` and ``--passage_prefix ''``. A row
without negatives gets borrowed ones (``common.fill_negatives``): Tevatron samples from the
list and fails on an empty one. Its trainer shuffles; the file keeps the export's order.
"""

from __future__ import annotations

from pathlib import Path

from curate.core.jsonl import atomic_write_jsonl
from curate.export.formats.common import (doc_ids, fill_negatives, id_tables, query_id, raw_document,
                                          require_negatives, split_indices, split_title, teacher_scores)
from curate.export.formats import register_format
from curate.export.formats.card import write_format_card
from curate.export.formats.usage import Settings, format_card_text
from curate.export.rows import ExportRow


def usage(s: Settings, where: str) -> str:
    return f"""**Tevatron** (`{where}`; `train_distil` with `--distil_temperature 0.02
--normalize` reads each passage's `score`, the teacher's cosine):
```bash
python -m tevatron.retriever.driver.train --model_name_or_path BASE_MODEL --dataset_name json \\
    --dataset_path {where}/train.jsonl --train_group_size {s.group_size} \\
    --query_max_len {s.query_max_len} --passage_max_len {s.passage_max_len} \\
    --query_prefix "" --passage_prefix "" --output_dir OUT
```"""


@register_format("tevatron", usage, order=3)
def write_tevatron(rows: list[ExportRow], out_dir: Path, card: dict) -> list[Path]:
    require_negatives(rows, "tevatron")
    out_dir = Path(out_dir)
    docs, queries = id_tables(rows)
    ids = [doc_ids(r, docs) for r in rows]
    negs, _ = fill_negatives(rows, [list(r.negatives) for r in rows],
                             max((len(r.negatives) for r in rows), default=0), pad_short=False)
    scores = [teacher_scores(r, n) for r, n in zip(rows, negs)]
    scored = all(s is not None for s in scores)  # in every split alike: one schema for datasets
    written = []
    for split, idx in split_indices(rows).items():
        lines = []
        for i in idx:
            row = rows[i]
            neg_ids = (ids[i][1] if negs[i] == list(row.negatives)
                       else [docs.assign(raw_document(row, t)) for t in negs[i]])  # borrowed ones
            pos_score, neg_scores = scores[i] if scored else (None, [None] * len(negs[i]))
            lines.append({
                "query_id": query_id(row, queries),
                "query": row.query_text,
                "positive_passages": [_passage(ids[i][0], split_title(row, row.positive), pos_score)],
                "negative_passages": [_passage(d, split_title(row, t), s)
                                      for d, t, s in zip(neg_ids, negs[i], neg_scores)],
            })
        path = out_dir / f"{split}.jsonl"
        atomic_write_jsonl(path, lines)
        written.append(path)
    written.append(write_format_card(out_dir, card, "tevatron", written, format_card_text("tevatron", rows, card)))
    return written


def _passage(docid: str, title_text: tuple[str, str], score: float | None) -> dict:
    out = {"docid": docid, "title": title_text[0], "text": title_text[1]}
    if score is not None:
        out["score"] = score
    return out
