"""BEIR folders: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from curate.corpus import read_corpus
from curate.core.errors import CurateError
from curate.core.jsonl import read_jsonl


@dataclass
class BeirData:
    corpus: dict[str, str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)  # query id -> {doc id: relevance}

    def relevant(self, qid: str, min_score: int = 1) -> list[str]:
        return [d for d, s in self.qrels.get(qid, {}).items() if s >= min_score]


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise CurateError(f"{path}: no such qrels file") from None
    for lineno, line in enumerate(lines, 1):
        parts = line.split("\t") if "\t" in line else line.split()
        if not line.strip() or (lineno == 1 and parts[0] in ("query-id", "qid", "query_id")):
            continue
        if len(parts) < 3:
            raise CurateError(f"{path}:{lineno}: expected 'query-id<TAB>corpus-id<TAB>score'")
        try:
            score = int(float(parts[-1]))
        except ValueError:
            raise CurateError(f"{path}:{lineno}: score {parts[-1]!r} is not a number") from None
        qrels.setdefault(parts[0], {})[parts[-2]] = score
    return qrels


def load_beir(folder: str | Path, split: str | None = "test") -> BeirData:
    folder = Path(folder)
    if not (folder / "corpus.jsonl").exists():
        raise CurateError(f"{folder}: not a BEIR folder (no corpus.jsonl)")
    corpus = dict(read_corpus(folder / "corpus.jsonl"))
    queries = {}
    for lineno, obj in read_jsonl(folder / "queries.jsonl"):
        if not isinstance(obj, dict) or "_id" not in obj or not isinstance(obj.get("text"), str):
            raise CurateError(f"{folder / 'queries.jsonl'}:{lineno}: a query line needs '_id' and 'text'")
        queries[str(obj["_id"])] = obj["text"]
    qrels = read_qrels(folder / "qrels" / f"{split}.tsv") if split else {}
    return BeirData(corpus=corpus, queries=queries, qrels=qrels)
