"""``nemo``: NeMo retriever fine-tuning JSONL, ``train.jsonl`` and ``dev.jsonl``.

One line per row: ``{"question_id", "query", "pos_doc", "neg_doc"}`` with ``pos_doc`` a
string and ``neg_doc`` a list of strings. Both NeMo readers take this shape:
NeMo AutoModel's inline retrieval dataset (``retrieval_dataset_inline.py``: ``query`` or
``question``, ``pos_doc``, ``neg_doc``, optional ``question_id``; it cycles short negative
lists) and the NeMo framework's ``BertEmbeddingDataset`` (``query``/``pos_doc``/``neg_doc``
JSONL; it adds its own "query: "/"passage: " prefixes). Both fail on an empty ``neg_doc``, so
a row without negatives gets borrowed ones (``common.fill_negatives``). Texts carry the
export's instructions, since NeMo has no per-row instruction field for inline data.
"""

from __future__ import annotations

from pathlib import Path

from curate.export.formats.common import fill_negatives, id_tables, query_id, split_indices, require_negatives
from curate.export.rows import ExportRow
from curate.core.jsonl import atomic_write_jsonl


def write_nemo(rows: list[ExportRow], out_dir: Path, card: dict) -> list[Path]:
    require_negatives(rows, "nemo")
    out_dir = Path(out_dir)
    _, queries = id_tables(rows)
    negs, _ = fill_negatives(rows, [list(r.negatives) for r in rows],
                             max((len(r.negatives) for r in rows), default=0), pad_short=False)
    written = []
    for split, idx in split_indices(rows).items():
        path = out_dir / f"{split}.jsonl"
        atomic_write_jsonl(path, ({"question_id": query_id(rows[i], queries), "query": rows[i].query_text,
                                   "pos_doc": rows[i].positive, "neg_doc": negs[i]} for i in idx))
        written.append(path)
    return written
