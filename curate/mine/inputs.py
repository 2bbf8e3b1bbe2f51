"""What the miner reads: queries with all their known positives, and a corpus.

Four sources, one shape (``MineInput``: ``MineItem`` per query over one ``Corpus``):

* a BEIR folder: one item per query id of the split's qrels (lines citing ids the folder lacks
  are dropped by the reader and counted here), positives = documents with
  relevance >= ``min_relevance``, most relevant first, then in qrels order (the first is the
  record's positive);
* a pairs JSONL file: lines ``{"query": ..., "positive": "text" or ["text", ...]}`` (optional
  ``query_id``, ``task_type``, ``task``); lines with the same query text form one item;
* curate records: one item per record id (a repeated id: its first copy), positives =
  ``Record.all_positives()``; the record's own negatives are kept and never mined again, nor
  is any passage of the document a ``--from-corpus`` query was written from (``meta.passage``);
* a Hugging Face dataset (hub name, ``save_to_disk`` folder, or a local data file): rows
  are pairs, read from the query and positive columns (default: the first two).

The corpus is deduplicated by exact text, as sentence-transformers' ``mine_hard_negatives``
does: two documents with the same text are one candidate (mined at most once, and never
mined when either is a positive).  A document with no text (blank or whitespace only, as in
several classic IR collections) is left out of the pool altogether and counted: it can be
nobody's negative or positive, and inside the pool it would still take a rank in every
query's list and a place in BM25's statistics, so a corpus with and without it would mine
differently.  Positives missing from the corpus are added to it, and
without a corpus the positives themselves are the pool.  ``finalize`` works out what each
query may never be given: the positives of every item with the same query text, any
document whose text is the query itself (it would compete with itself), and, for records,
the negatives they already have.  The positives of other items with the same query text
also count for the lowest positive score (one query text, one set of known positives).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from curate.datasets.corpus import read_corpus_entries
from curate.core.errors import CurateError
from curate.core.jsonl import read_jsonl
from curate.core.records import Record, first_of_each_id, read_records, stable_id

REPEATED_ID = "record id seen before (first copy kept)"
# The input kinds mine builds records from a dataset with, written as each record's ``meta["source"]``
# (records read with --in keep their own meta); the stage declares them (``Stage.dataset_sources``)
BEIR, PAIRS, HF = "beir", "pairs", "hf"
DATASET_KINDS = (BEIR, PAIRS, HF)


class Corpus:
    """Distinct document texts, each with every id it was given."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.ids: list[list[str]] = []
        self._by_text: dict[str, int] = {}
        self._by_id: dict[str, int] = {}
        self.titles: dict[int, str] = {}  # text index -> its document's title, where it has one
        self.added = 0  # texts added because a positive was not in the corpus file
        self.duplicates = 0  # corpus lines whose text an earlier line already had
        self.blank_ids: set[str] = set()  # ids of corpus lines with no text, left out of the pool

    @classmethod
    def from_file(cls, path: str | Path | None) -> Corpus:
        corpus = cls()
        if path is not None:
            for e in read_corpus_entries(path):
                corpus.add(e.joined(), e.id, title=e.title)
        return corpus

    def add(self, text: str, doc_id: str | None = None, positive: bool = False, title: str = "") -> int | None:
        """The text's index in the pool; ``None`` for a text with nothing in it (never in the pool)."""
        if not text.strip():
            if doc_id is not None:
                self.blank_ids.add(doc_id)
            return None
        idx = self._by_text.get(text)
        if idx is None:
            idx = len(self.texts)
            self._by_text[text] = idx
            self.texts.append(text)
            self.ids.append([])
            if positive:
                self.added += 1
        elif doc_id is not None and not positive:
            self.duplicates += 1
        if title and text.startswith(title):
            self.titles.setdefault(idx, title)
        if doc_id is not None and doc_id not in self._by_id:
            self._by_id[doc_id] = idx
            self.ids[idx].append(doc_id)
        return idx

    def find_text(self, text: str) -> int | None:
        return self._by_text.get(text)

    def find_id(self, doc_id: str) -> int | None:
        return self._by_id.get(doc_id)

    def doc_id(self, idx: int) -> str:
        return self.ids[idx][0] if self.ids[idx] else f"text:{stable_id(self.texts[idx])}"

    def title(self, idx: int) -> str | None:
        return self.titles.get(idx)

    def __len__(self) -> int:
        return len(self.texts)


@dataclass
class MineItem:
    key: str  # seeds the query's generator and its teacher in a cross ensemble
    query: str
    positives: list[int]  # corpus indices; the first is the record's positive
    record_id: str
    query_id: str | None = None
    task_type: str = "retrieval"
    task: str | None = None
    record: Record | None = None  # records mode: the record the negatives are added to
    exclude: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    # positives labelled under another id (or line) with the same query text: never mined, and
    # they count for the "lowest positive" that sets the thresholds
    also_positive: list[int] = field(default_factory=list)
    # how many leading positives share the top relevance (BEIR qrels); the record's positive may be
    # chosen among them (``positive_choice``).  Records keep their own positive: 1.
    top_tied: int = 1


@dataclass
class MineInput:
    items: list[MineItem]
    corpus: Corpus
    source: dict[str, Any]
    skipped: dict[str, int] = field(default_factory=dict)
    # (id, reason, detail) of input items left out, for the run's rejected.jsonl
    rejected: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


def finalize(inp: MineInput) -> MineInput:
    """Fill each item's ``exclude``: what no negative of that query may be."""
    by_query: dict[str, set[int]] = {}
    for it in inp.items:
        by_query.setdefault(it.query, set()).update(it.positives)
    siblings = _passages_by_document(inp.corpus)
    for it in inp.items:
        ex = set(by_query[it.query])
        # only real positives (the same query text's): an excluded document is no positive, and one
        # taken for a positive would anchor the thresholds at its score
        it.also_positive = sorted(ex - set(it.positives))
        self_doc = inp.corpus.find_text(it.query)
        if self_doc is not None:
            ex.add(self_doc)
        ex |= siblings.get(_source_document(it.record), set())
        if it.record is not None:
            for neg in it.record.negatives:
                j = inp.corpus.find_text(neg.text)
                if j is not None:
                    ex.add(j)
        it.exclude = np.array(sorted(ex), dtype=np.int64)
    return inp


def _passages_by_document(corpus: Corpus) -> dict[str, set[int]]:
    """Corpus entries that are passages of one document (ids ``DOC#k``, as
    ``curate.datasets.documents`` cuts them), by document."""
    out: dict[str, set[int]] = {}
    for idx, ids in enumerate(corpus.ids):
        for doc_id in ids:
            doc, sep, k = doc_id.rpartition("#")
            if sep and doc and k.isdigit():
                out.setdefault(doc, set()).add(idx)
    return out


def _passage(rec: Record | None) -> dict[str, Any] | None:
    """The passage a record's query was written from (``generate --from-corpus`` keeps it in
    ``meta.passage``), or None for a record whose positive is a judgment (labels, pairs)."""
    passage = rec.meta.get("passage") if rec is not None and isinstance(rec.meta, dict) else None
    return passage if isinstance(passage, dict) else None


def written_from_passage(item: MineItem) -> bool:
    """Whether the item's positive is where an LLM wrote its query from, not a judgment."""
    return _passage(item.record) is not None


def _source_document(rec: Record | None) -> str | None:
    """The document a record's query was written from (``generate --from-corpus``): the other
    passages of it overlap the positive and share its subject, so none is mined as a negative."""
    doc = (_passage(rec) or {}).get("doc_id")
    return doc if isinstance(doc, str) else None


# -- BEIR ---------------------------------------------------------------------------------


def load_beir_input(folder: str | Path, split: str = "train", qrels_path: str | Path | None = None,
                    min_relevance: int = 1) -> MineInput:
    from curate.datasets.beir import load_beir

    folder = Path(folder)
    data = load_beir(folder, split, qrels_path)
    qrels_file = Path(qrels_path) if qrels_path else folder / "qrels" / f"{split}.tsv"
    _check_not_empty(data, folder, qrels_file)
    qrels = data.qrels
    corpus = Corpus()
    for doc_id, text in data.corpus.items():
        corpus.add(text, doc_id, title=data.titles.get(doc_id, ""))
    inp = MineInput([], corpus, {"kind": BEIR, "path": str(folder), "split": split,
                                 "qrels": str(qrels_file), "min_relevance": min_relevance})
    _count_dropped_qrels(inp, data, min_relevance)
    for qid, rels in qrels.items():
        if not data.queries[qid].strip():  # a record needs text on both sides (records.py checks it)
            inp.skip("query text is empty")
            continue
        positives, relevance = [], []
        # most relevant first (the record's positive), qrels order among equals
        for doc_id, rel in sorted(rels.items(), key=lambda kv: -kv[1]):
            if rel < min_relevance:
                continue
            idx = corpus.find_id(doc_id)
            if idx is None:  # the reader kept only known ids: this one's text is blank
                inp.skip("positive text is empty (positive dropped)")
            elif idx not in positives:
                positives.append(idx)
                relevance.append(rel)
        if not positives:
            inp.skip(f"no positive with relevance >= {min_relevance}")
            continue
        inp.items.append(MineItem(key=qid, query=data.queries[qid], positives=positives,
                                  record_id=stable_id("beir", folder.name, qid), query_id=qid,
                                  top_tied=relevance.count(relevance[0])))
    return finalize(inp)


def _check_not_empty(data, folder: Path, qrels_file: Path) -> None:
    """An empty qrels file or queries file leaves nothing to mine: say which file is empty (a bare
    "no queries to mine" sends the user looking in the wrong one)."""
    from curate.datasets.beir import require_queries

    require_queries(data, folder, "no queries to mine")
    if not data.qrels and not data.dropped:
        raise CurateError(f"{qrels_file}: no qrels lines: no queries to mine")


def _count_dropped_qrels(inp: MineInput, data, min_relevance: int) -> None:
    """The qrels lines the reader left out (unknown ids), counted in the report as this input's
    skips: each unknown query once, each unknown positive, and each query left with none."""
    from curate.datasets.beir import DOC_MISSING, QUERY_MISSING

    for _ in {d.query_id for d in data.dropped if d.reason == QUERY_MISSING}:
        inp.skip("query id not in queries.jsonl")
    emptied = set()
    for d in data.dropped:
        if d.reason == DOC_MISSING and d.score >= min_relevance:
            inp.skip("positive id not in corpus.jsonl (positive dropped)")
        if d.reason == DOC_MISSING and d.query_id not in data.qrels and d.query_id not in emptied:
            emptied.add(d.query_id)
            inp.skip(f"no positive with relevance >= {min_relevance}")


# -- pairs (JSONL or Hugging Face rows) ---------------------------------------------------


def _group_pairs(rows: Iterable[tuple[str, Any]], corpus: Corpus, inp: MineInput,
                 query_key: str = "query", positive_key: str = "positive", id_key: str | None = None) -> None:
    """Rows of (where, mapping) become items, one per distinct query text."""
    by_text: dict[str, MineItem] = {}
    for where, obj in rows:
        if not isinstance(obj, dict):
            raise CurateError(f"{where}: expected an object with '{query_key}' and '{positive_key}'")
        query = obj.get(query_key)
        pos = obj.get(positive_key)
        if pos is None and positive_key == "positive":
            pos = obj.get("positives")
        if not isinstance(query, str) or not query.strip():
            raise CurateError(f"{where}: '{query_key}' must be a non-empty string")
        if isinstance(pos, str):
            pos = [pos]
        if (not isinstance(pos, (list, tuple)) or not pos
                or not all(isinstance(p, str) and p.strip() for p in pos)):
            raise CurateError(f"{where}: '{positive_key}' must be a non-empty string or a list of them")
        qid = obj.get(id_key) if id_key else obj.get("query_id", obj.get("qid"))
        qid = None if qid is None else str(qid)
        item = by_text.get(query)
        if item is None:
            item = MineItem(key=qid or query, query=query, positives=[], record_id=stable_id("pair", query),
                            query_id=qid, task_type=str(obj.get("task_type") or "retrieval"),
                            task=obj.get("task") if isinstance(obj.get("task"), str) else None)
            by_text[query] = item
            inp.items.append(item)
        for p in pos:
            idx = corpus.add(p, positive=True)
            if idx is not None and idx not in item.positives:
                item.positives.append(idx)
        item.top_tied = len(item.positives)  # pairs carry no grades: every positive ties


def load_pairs_input(pairs_path: str | Path, corpus_path: str | Path | None = None) -> MineInput:
    corpus = Corpus.from_file(corpus_path)
    inp = MineInput([], corpus, {"kind": PAIRS, "path": str(pairs_path),
                                 "corpus": str(corpus_path) if corpus_path else None})
    _group_pairs(((f"{pairs_path}:{ln}", obj) for ln, obj in read_jsonl(pairs_path)), corpus, inp)
    if not inp.items:
        raise CurateError(f"{pairs_path}: no pairs")
    return finalize(inp)


def _hf_dataset(name: str, split: str, config: str | None):
    """A ``datasets.Dataset``: a ``save_to_disk`` folder, a local data file or folder, or a hub name."""
    local = Path(name).expanduser()  # local paths load with packaged builders: no network
    try:
        import datasets
    except ImportError:
        raise CurateError("--hf needs the 'datasets' package (pip install datasets)") from None
    try:
        if local.is_dir() and any((local / f).exists() for f in ("dataset_dict.json", "state.json")):
            ds = datasets.load_from_disk(str(local))
            if isinstance(ds, datasets.DatasetDict):
                if split not in ds:
                    raise CurateError(f"{name}: no split {split!r} (has {', '.join(ds)})")
                ds = ds[split]
            return ds
        if local.is_file():
            kinds = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet", ".tsv": "csv"}
            kind = kinds.get(local.suffix.lower())
            if kind is None:
                raise CurateError(f"{name}: cannot tell the format from {local.suffix!r} "
                                  "(use .jsonl, .json, .csv, .tsv or .parquet)")
            extra = {"delimiter": "\t"} if local.suffix.lower() == ".tsv" else {}
            return datasets.load_dataset(kind, data_files=str(local), split="train", **extra)
        return datasets.load_dataset(str(local) if local.exists() else name, config, split=split)
    except CurateError:
        raise
    except Exception as e:  # datasets raises many types; the user needs one line
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CurateError(f"{name}: cannot load the dataset: {msg}") from None


def load_hf_input(name: str, split: str = "train", config: str | None = None, query_column: str | None = None,
                  positive_column: str | None = None, id_column: str | None = None,
                  corpus_path: str | Path | None = None) -> MineInput:
    ds = _hf_dataset(name, split, config)
    cols = list(ds.column_names)
    qcol = query_column or (cols[0] if cols else None)
    pcol = positive_column or (cols[1] if len(cols) > 1 else None)
    for flag, col in (("--query-column", qcol), ("--positive-column", pcol), ("--id-column", id_column)):
        if col is not None and col not in cols:
            raise CurateError(f"{name}: no column {col!r} for {flag} (columns: {', '.join(cols)})")
    if qcol is None or pcol is None:
        raise CurateError(f"{name}: needs a query and a positive column (columns: {', '.join(cols)})")
    corpus = Corpus.from_file(corpus_path)
    inp = MineInput([], corpus, {"kind": HF, "name": name, "split": split, "config": config,
                                 "query_column": qcol, "positive_column": pcol,
                                 "corpus": str(corpus_path) if corpus_path else None})
    keep = [c for c in (qcol, pcol, id_column) if c]
    rows = ((f"{name}[{i}]", row) for i, row in enumerate(ds.select_columns(keep)))
    _group_pairs(rows, corpus, inp, query_key=qcol, positive_key=pcol, id_key=id_column)
    if not inp.items:
        raise CurateError(f"{name}: no rows")
    return finalize(inp)


# -- curate records -----------------------------------------------------------------------


def load_records_input(in_path: str | Path, corpus_path: str | Path | None = None) -> MineInput:
    """One item per record; a record id seen before is skipped (the first copy is mined)."""
    records, repeats = first_of_each_id(read_records(in_path))
    if not records:
        raise CurateError(f"{in_path}: no records")
    corpus = Corpus.from_file(corpus_path)
    inp = MineInput([], corpus, {"kind": "records", "path": str(in_path),
                                 "corpus": str(corpus_path) if corpus_path else None})
    for rec in repeats:
        inp.skip(REPEATED_ID)
        inp.rejected.append((rec.id, "duplicate-id", {"query": rec.query}))
    for rec in records:
        positives: list[int] = []
        for p in rec.all_positives():
            idx = corpus.add(p.text, positive=True)
            if idx is not None and idx not in positives:
                positives.append(idx)
        qid = rec.meta.get("query_id") if isinstance(rec.meta, dict) else None
        inp.items.append(MineItem(key=rec.id, query=rec.query, positives=positives, record_id=rec.id,
                                  query_id=str(qid) if qid is not None else rec.id,
                                  task_type=rec.task_type, task=rec.task, record=rec))
    return finalize(inp)


def load_input(*, data: str | None = None, split: str = "train", qrels: str | None = None,
               min_relevance: int = 1, pairs: str | None = None, records: str | None = None,
               hf: str | None = None, hf_split: str = "train", hf_config: str | None = None,
               query_column: str | None = None, positive_column: str | None = None,
               id_column: str | None = None, corpus: str | None = None) -> MineInput:
    """Exactly one of ``data`` / ``pairs`` / ``records`` / ``hf``."""
    given = [flag for flag, v in (("--data", data), ("--pairs", pairs), ("--in", records), ("--hf", hf)) if v]
    if len(given) != 1:
        raise CurateError("give exactly one of --data, --pairs, --in, --hf"
                          + (f" (got {', '.join(given)})" if given else ""))
    if data:
        if corpus:
            raise CurateError("--corpus does not go with --data (the BEIR folder has its corpus)")
        return load_beir_input(data, split, qrels, min_relevance)
    if qrels:
        raise CurateError("--qrels goes with --data")
    loaders: dict[str, Callable[[], MineInput]] = {
        "pairs": lambda: load_pairs_input(pairs, corpus),
        "records": lambda: load_records_input(records, corpus),
        "hf": lambda: load_hf_input(hf, hf_split, hf_config, query_column, positive_column, id_column, corpus),
    }
    return loaders["pairs" if pairs else "records" if records else "hf"]()
