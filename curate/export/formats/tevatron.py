"""``tevatron``: Tevatron's grouped training JSONL, ``train.jsonl`` and ``dev.jsonl``.

Matched against Tevatron's ``retriever/dataset.py`` (the format with inline passages):
``query_id``, ``query``, ``positive_passages`` and ``negative_passages`` as lists of
``{"docid", "title", "text"}``. Tevatron joins title and text with a space, so the title is
left empty and the text is the whole document. It has one query prefix for the whole run,
while an export can hold several tasks, so the texts carry their instructions already:
train with ``--query_prefix ''`` and ``--passage_prefix ''``. A row without negatives gets
borrowed ones (``common.fill_negatives``): Tevatron samples from the list and fails on an
empty one. Tevatron's trainer shuffles; the file keeps the export's order.
"""

from __future__ import annotations

from pathlib import Path

from curate.export.formats.common import doc_ids, fill_negatives, id_tables, query_id, raw_document, split_indices, require_negatives
from curate.export.rows import ExportRow
from curate.core.jsonl import atomic_write_jsonl


def write_tevatron(rows: list[ExportRow], out_dir: Path, card: dict) -> list[Path]:
    require_negatives(rows, "tevatron")
    out_dir = Path(out_dir)
    docs, queries = id_tables(rows)
    ids = [doc_ids(r, docs) for r in rows]
    negs, _ = fill_negatives(rows, [list(r.negatives) for r in rows],
                             max((len(r.negatives) for r in rows), default=0), pad_short=False)
    written = []
    for split, idx in split_indices(rows).items():
        lines = []
        for i in idx:
            row = rows[i]
            neg_ids = (ids[i][1] if negs[i] == list(row.negatives)
                       else [docs.assign(raw_document(row, t)) for t in negs[i]])  # borrowed ones
            lines.append({
                "query_id": query_id(row, queries),
                "query": row.query_text,
                "positive_passages": [_passage(ids[i][0], row.positive)],
                "negative_passages": [_passage(d, t) for d, t in zip(neg_ids, negs[i])],
            })
        path = out_dir / f"{split}.jsonl"
        atomic_write_jsonl(path, lines)
        written.append(path)
    return written


def _passage(docid: str, text: str) -> dict:
    return {"docid": docid, "title": "", "text": text}
