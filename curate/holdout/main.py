"""The held-out set: a share of the *documents* set aside, their queries written as a BEIR folder.

A user with only documents has nothing to measure a trained model on. The pipeline writes queries
for passages of the documents; this stage sets aside a seeded share of the documents that have
queries (``share``, 0.2: Nemotron's recipe holds out a fifth) and writes

* ``eval/``: a BEIR folder, the whole corpus (every passage competes) with the held-out
  documents' filtered queries and their passages as qrels (``test``), which ``curate train``
  and ``curate eval`` read, and which the pipeline's export decontaminates against (a training
  query that near-copies a held-out one is dropped; the card counts the held-out set). It holds
  no query when nothing was held out;
* ``train.jsonl`` and ``corpus.jsonl``: the records and passages left for training. No passage of
  a held-out document is in them, nor a passage of another document that near-duplicates one
  (5-character shingle Jaccard >= ``near_duplicate``: the same paragraph pasted into two files),
  so mining never hands a held-out text to training as a negative; a training record whose
  positives include such a passage is dropped (``touches-held-out``).

The split is by document, not by query: the queries of one document are alike, and a split by
query would test on passages the model trained on. The held-out queries went through the same
filter as the training ones (a query that copies its passage is no test). A corpus of fewer than
``min_documents`` documents with queries is too small to hold one out: everything goes to
training and the report says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curate.core.hashing import value_digest
from curate.core.jsonl import atomic_write_jsonl
from curate.core.records import read_records
from curate.core.runner import REJECTED
from curate.core.stage import STAGES, FunnelRow, Stage
from curate.datasets.corpus import read_corpus_entries

TRAIN, CORPUS, EVAL = "train.jsonl", "corpus.jsonl", "eval"


@dataclass
class HoldoutOptions:
    inp: str = field(metadata={"flag": "--in", "path": "file", "help": "Filtered records (JSONL)."})
    corpus: str = field(metadata={"path": "file", "help": "The passages the records were written from (JSONL)."})
    out: str = field(metadata={"path": "dir", "help": "Folder for train.jsonl, corpus.jsonl and eval/."})
    share: float = field(default=0.2, metadata={
        "min": 0.0, "max": 0.9, "help": "Share of the documents with queries held out for evaluation (0: none)."})
    min_documents: int = field(default=5, metadata={
        "min": 2, "help": "Documents with queries needed to hold any out; fewer: all train."})
    near_duplicate: float = field(default=0.8, metadata={
        "min": 0.0, "max": 1.0, "min_open": True,
        "help": "Shingle Jaccard at which a training passage counts as a copy of a held-out one."})
    seed: int = field(default=0, metadata={"help": "Which documents are held out."})


def document_of(passage_id: str, source: str | None) -> str:
    """The document a passage was cut from: its source file, else its id before ``#k``."""
    return source or passage_id.rsplit("#", 1)[0]


def holdout_stage(opts: HoldoutOptions, run) -> dict[str, Any]:
    from curate.dedup.near_dup import NearDupIndex

    records = read_records(opts.inp)
    entries = read_corpus_entries(opts.corpus)
    doc_of = {e.id: document_of(e.id, e.source) for e in entries}

    def own_doc(rec) -> str | None:
        return doc_of.get(rec.positive_id) if rec.positive_id else None

    with_queries = sorted({d for d in map(own_doc, records) if d is not None})
    enough = opts.share > 0 and len(with_queries) >= opts.min_documents
    n_out = max(1, round(opts.share * len(with_queries))) if enough else 0
    held = set(sorted(with_queries, key=lambda d: value_digest([opts.seed, d]))[:n_out])
    held_passages = [e for e in entries if doc_of[e.id] in held]
    index = NearDupIndex(threshold=opts.near_duplicate)
    for e in held_passages:
        index.add_if_new(e.joined())
    near = {e.id for e in entries if doc_of[e.id] not in held and index.matches(e.joined())} if held else set()
    barred = {e.id for e in held_passages} | near

    eval_recs, train = [], []
    for rec in records:
        ids = {p.doc_id for p in rec.all_positives() if p.doc_id}
        if own_doc(rec) in held:
            eval_recs.append(rec)
        elif ids & barred:
            run.reject(rec.id, "touches-held-out", passages=sorted(ids & barred))
        else:
            train.append(rec)
    atomic_write_jsonl(run.path(TRAIN), (r.to_dict() for r in train))
    atomic_write_jsonl(run.path(CORPUS), ({"_id": e.id, "title": e.title, "text": e.text,
                                           **({"source": e.source} if e.source else {})}
                                          for e in entries if e.id not in barred))
    _write_beir(run.path(EVAL), entries, eval_recs)  # written when empty too: export decontaminates against it
    if not (run.dir / REJECTED).exists():
        (run.dir / REJECTED).write_text("", encoding="utf-8")
    return {"records_in": len(records), "documents_with_queries": len(with_queries), "documents_held_out": len(held),
            "held_out": sorted(held), "eval_queries": len(eval_recs), "eval_passages": len(entries),
            "records_kept": len(train), "passages_kept": len(entries) - len(barred),
            "near_duplicates": len(near), "dropped": len(records) - len(train) - len(eval_recs),
            "share": opts.share, "min_documents": opts.min_documents,
            "eval": EVAL if eval_recs else None}


def _write_beir(folder: Path, entries, records) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_jsonl(folder / "corpus.jsonl", ({"_id": e.id, "title": e.title, "text": e.text} for e in entries))
    atomic_write_jsonl(folder / "queries.jsonl", ({"_id": r.id, "text": r.query} for r in records))
    (folder / "qrels").mkdir(exist_ok=True)
    lines = ["query-id\tcorpus-id\tscore"] + [f"{r.id}\t{p.doc_id}\t1" for r in records
                                                for p in r.all_positives() if p.doc_id]
    (folder / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def funnel(report: dict[str, Any], folder: Path) -> dict[str, Any]:
    return {**{k: report[k] for k in ("records_in", "records_kept", "documents_with_queries", "documents_held_out",
                                      "eval_queries", "dropped", "near_duplicates", "min_documents")},
            "eval": str(folder / report["eval"]) if report.get("eval") else None}


def present(f: dict[str, Any]) -> FunnelRow:
    if not f["documents_held_out"]:
        text = (f"nothing held out: {f['documents_with_queries']} documents with queries, fewer than "
                f"{f['min_documents']}; all {f['records_kept']} records train")
    else:
        text = (f"{f['documents_held_out']} of {f['documents_with_queries']} documents held out: "
                f"{f['eval_queries']} quer{'y' if f['eval_queries'] == 1 else 'ies'} in {f['eval']} (curate train scores on it); "
                f"{f['records_kept']} records left for training")
        if f["dropped"]:
            text += f", {f['dropped']} dropped (a positive in or copied from a held-out document)"
    return FunnelRow(lines=[("holdout", text)], cells=[("documents held out", "documents_held_out"),
                                                      ("eval queries", "eval_queries"), ("records kept", "records_kept")],
                     dropped={"touches-held-out": f["dropped"]} if f["dropped"] else {})


STAGE = Stage("holdout", HoldoutOptions, holdout_stage, reads=("inp", "corpus"),
              writes={"records": TRAIN, "corpus": CORPUS, "eval": EVAL, "drops": REJECTED},
              funnel=funnel, present=present, needs=("query", "positive"))
STAGES.register(STAGE.name, STAGE)
