"""``beir``: a BEIR folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``).

For evaluating on the held-out split with any BEIR/MTEB-style tool, or for trainers that read
qrels. Texts are bare (no instruction; ``queries.jsonl`` keeps it in an ``instruction``
field), documents are deduplicated by text, and a document keeps its corpus id when the row
has one (``positive_id``/``negative_ids``, and for mined rows ``more_positives``: the record's
further labelled positives), else a stable hash of its text.
Qrels list positives only, relevance 1; negatives are in the corpus as distractors. A document
from a corpus with titles gets its title back in ``title``.
"""

from __future__ import annotations

from pathlib import Path

from curate.export.formats import register_format
from curate.export.formats.common import atomic_path, doc_ids, id_tables, query_id, split_indices, split_title
from curate.export.formats.usage import Settings
from curate.export.rows import ExportRow
from curate.core.jsonl import atomic_write_jsonl


def usage(s: Settings, where: str) -> str:
    return (f"**BEIR** (`{where}`): `curate eval --data {where} --split dev`, or any "
            "BEIR/MTEB tool, on the held-out split.")


@register_format("beir", usage, order=6)
def write_beir(rows: list[ExportRow], out_dir: Path, card: dict) -> list[Path]:
    out_dir = Path(out_dir)
    docs, queries = id_tables(rows)
    query_info: dict[str, dict] = {}
    qrels: dict[str, dict[tuple[str, str], None]] = {}
    for split, idx in split_indices(rows).items():
        pairs = qrels.setdefault(split, {})
        for i in idx:
            row = rows[i]
            qid = query_id(row, queries)
            query_info.setdefault(qid, {"task_type": row.task_type, "instruction": row.instruction})
            pos, _ = doc_ids(row, docs)
            pairs[(qid, pos)] = None
            for text, given in row.more_positives:
                pairs[(qid, docs.assign(text, given))] = None
    written = [out_dir / "corpus.jsonl", out_dir / "queries.jsonl"]
    titled = {t: split_title(row, t) for row in rows for t in row.titles}
    parts = ((d, *titled.get(t, ("", t))) for d, t in docs.items())
    atomic_write_jsonl(written[0], ({"_id": d, "title": title, "text": text} for d, title, text in parts))
    atomic_write_jsonl(written[1], ({"_id": q, "text": t, **query_info[q]} for q, t in queries.items()))
    for split, pairs in qrels.items():
        path = out_dir / "qrels" / f"{split}.tsv"
        with atomic_path(path) as tmp:
            tmp.write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in pairs),
                           encoding="utf-8")
        written.append(path)
    return written
