"""Records for the audit's tests, built from SciFact passages: a control (corpus text on both
sides) and shortcuts planted in LLM-marked negatives (a fixed closing phrase, a length gap).
Each call builds fresh records (a filter step prunes the ones it is given)."""

from __future__ import annotations

import functools
import json
import random

import pytest

from curate.core.records import Negative, Record
from tests.helpers import SHARED_DATA

CLOSING = " I hope this helps!"
N_RECORDS = 120


@functools.lru_cache(maxsize=1)
def _passages() -> tuple[tuple[str, str], ...]:
    path = SHARED_DATA / "scifact" / "corpus.jsonl"
    if not path.exists():  # pragma: no cover - the shared data is part of every checkout
        pytest.skip("SciFact is not in ../shared/data")
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            if len(d["text"].split()) >= 60:
                out.append((str(d["_id"]), d["text"]))
            if len(out) >= 3000:
                break
    random.Random(3).shuffle(out)
    return tuple(out)


def passages() -> list[tuple[str, str]]:
    """(id, text) of SciFact passages, the first 3,000 with at least 60 words, shuffled."""
    return list(_passages())


def make_records(passages, negative=lambda text, k: (text, "llm"), n: int = N_RECORDS, negatives: int = 3,
                 family: str = "short-long") -> list[Record]:
    """``n`` records, each a corpus positive (with its id) and ``negatives`` other passages passed
    through ``negative(text, k) -> (text, source)``; every passage is used once."""
    records = []
    it = iter(passages)
    for i in range(n):
        pid, pos = next(it)
        negs = []
        for k in range(negatives):
            did, text = next(it)
            text, source = negative(text, k)
            negs.append(Negative(text=text, level=k + 1, source=source,
                                 doc_id=did if source == "mined" else None))
        records.append(Record(id=f"r{i}", task_type=family, task="Given a claim, find the abstract",
                              query=f"claim {i}", positive=pos, positive_id=pid, negatives=negs))
    return records


def control() -> list[Record]:
    """Mined-style records: positives and negatives are all SciFact passages."""
    return make_records(passages(), lambda t, k: (t, "mined"))


def closing() -> list[Record]:
    """LLM-marked negatives that all end with the same phrase."""
    return make_records(passages(), lambda t, k: (t + CLOSING, "llm"))


def short() -> list[Record]:
    """LLM-marked negatives cut to their first 20 words: a length gap."""
    return make_records(passages(), lambda t, k: (" ".join(t.split()[:20]), "llm"))
