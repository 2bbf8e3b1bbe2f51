"""BEIR folders: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``."""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field
from pathlib import Path

from curate.datasets.corpus import read_corpus_entries
from curate.core.errors import CurateError
from curate.core.jsonl import read_jsonl, read_lines

QRELS_HEADER = ("query-id", "qid", "query_id")
QUERY_MISSING = "query id not in queries.jsonl"
DOC_MISSING = "document id not in corpus.jsonl"


@dataclass
class DroppedQrel:
    """A qrels line left out because an id it cites is not in the data."""

    line: int
    query_id: str
    doc_id: str
    score: int
    reason: str  # QUERY_MISSING or DOC_MISSING


@dataclass
class BeirData:
    corpus: dict[str, str]  # id -> text, the title first (curate.datasets.corpus.doc_text)
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)  # query id -> {doc id: relevance}
    dropped: list[DroppedQrel] = field(default_factory=list)  # qrels lines citing unknown ids
    titles: dict[str, str] = field(default_factory=dict)  # id -> title, for documents that have one

    def relevant(self, qid: str, min_score: int = 1) -> list[str]:
        return [d for d, s in self.qrels.get(qid, {}).items() if s >= min_score]


def read_qrels(path: Path, docs: Container[str] | None = None, queries: Container[str] | None = None,
               dropped: list[DroppedQrel] | None = None) -> dict[str, dict[str, int]]:
    """``query-id<TAB>corpus-id<TAB>score`` lines (a header line is skipped) as {query: {doc: score}}.

    Given the corpus ids ``docs`` and/or the query ids ``queries``, a line citing an id they
    lack is dropped (appended to ``dropped`` when given) and the drops are counted in one
    warning line: an evaluation would otherwise score such a document as a miss it can never
    retrieve, and a miner would look for a positive that is not there."""
    qrels: dict[str, dict[str, int]] = {}
    lost: list[DroppedQrel] = []
    total = 0
    for lineno, line in read_lines(path, "qrels file"):
        parts = line.split("\t") if "\t" in line else line.split()
        if not line.strip() or (lineno == 1 and parts[0] in QRELS_HEADER):
            continue
        if len(parts) < 3:
            raise CurateError(f"{path}:{lineno}: expected 'query-id<TAB>corpus-id<TAB>score'")
        try:
            score = int(float(parts[-1]))
        except ValueError:
            raise CurateError(f"{path}:{lineno}: score {parts[-1]!r} is not a number") from None
        total += 1
        qid, did = parts[0], parts[-2]
        reason = (QUERY_MISSING if queries is not None and qid not in queries
                  else DOC_MISSING if docs is not None and did not in docs else None)
        if reason:
            lost.append(DroppedQrel(lineno, qid, did, score, reason))
            continue
        qrels.setdefault(qid, {})[did] = score
    if lost:
        _warn_dropped(path, lost, total)
        if dropped is not None:
            dropped.extend(lost)
    return qrels


def _warn_dropped(path: Path, lost: list[DroppedQrel], total: int) -> None:
    """One line on stderr: how many qrels lines were left out, why, and the first of each kind."""
    from curate.core.progress import console

    parts = []
    for reason in (DOC_MISSING, QUERY_MISSING):
        these = [d for d in lost if d.reason == reason]
        if these:
            first = these[0]
            cited = first.doc_id if reason == DOC_MISSING else first.query_id
            parts.append(f"{len(these)} with a {reason} (first: line {first.line}, {cited!r})")
    console.print(f"curate: warning: {path}: dropped {len(lost)} of {total} lines: {'; '.join(parts)}",
                  markup=False, highlight=False, soft_wrap=True)


def qrels_file(folder: Path, split: str) -> Path:
    """``folder/qrels/<split>.tsv``; a split that is not there names the ones that are."""
    path = folder / "qrels" / f"{split}.tsv"
    if not path.exists():
        have = sorted(p.stem for p in (folder / "qrels").glob("*.tsv") if p.is_file())
        raise CurateError(f"{path}: no such split {split!r} (have: {', '.join(have) or 'none'})")
    return path


def require_queries(data: BeirData, folder: str | Path, what: str) -> None:
    """Refuse a folder whose ``queries.jsonl`` is empty, naming that file (``what``: what the
    caller then cannot do). ``load_beir`` drops every qrels line for want of its query, so a
    caller's later "no qrels" or "no relevant document" would name the wrong file."""
    if not data.queries:
        raise CurateError(f"{Path(folder) / 'queries.jsonl'}: no queries in the file: {what}")


def load_beir(folder: str | Path, split: str | None = "test", qrels: str | Path | None = None) -> BeirData:
    """The folder's corpus, queries and the qrels of ``split`` (or the file ``qrels``), the
    qrels checked against the corpus and queries (lines citing unknown ids dropped, counted)."""
    folder = Path(folder)
    if not (folder / "corpus.jsonl").exists():
        raise CurateError(f"{folder}: not a BEIR folder (no corpus.jsonl)")
    qrels_path = Path(qrels) if qrels else qrels_file(folder, split) if split else None  # before the big read
    entries = read_corpus_entries(folder / "corpus.jsonl")
    corpus = {e.id: e.joined() for e in entries}
    queries = {}
    for lineno, obj in read_jsonl(folder / "queries.jsonl"):
        if not isinstance(obj, dict) or "_id" not in obj or not isinstance(obj.get("text"), str):
            raise CurateError(f"{folder / 'queries.jsonl'}:{lineno}: a query line needs '_id' and 'text'")
        queries[str(obj["_id"])] = obj["text"]
    data = BeirData(corpus=corpus, queries=queries, titles={e.id: e.title for e in entries if e.title})
    if qrels_path is not None and queries:  # no queries: the caller names queries.jsonl (require_queries),
        data.qrels = read_qrels(qrels_path, corpus, queries, data.dropped)  # not every qrels line as dropped
    return data
