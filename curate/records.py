"""The record schema every stage reads and writes.

One dataclass for a training example (query, positive, graded negatives) and one for a
brainstormed task. Later stages add their numbers to ``Negative.teacher_score`` /
``Record.scores`` / ``Record.meta`` rather than inventing new shapes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from curate.errors import CurateError

SCHEMA_VERSION = 1
# The task families the shipped specs cover; a user may add more with a template and a spec.
FAMILIES = ("short-long", "long-short", "short-short", "long-long", "sts", "bitext")


def stable_id(*parts: Any, length: int = 16) -> str:
    """A short, stable id from the parts that define an item (same inputs, same id, any run)."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:length]


@dataclass
class Negative:
    """One negative; ``level`` 1 is the hardest (closest to the query), 4 the easiest."""

    text: str
    level: int | None = None
    score: float | None = None  # the generator's own relevance/relatedness score (1-10)
    answerable: bool | None = None  # does this text answer the query, per the generator
    teacher_score: float | None = None  # filled by teacher-based stages
    source: str = "llm"  # "llm" for generated, "mined" for retrieved from a corpus

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Negative:
        if not isinstance(d, dict) or not isinstance(d.get("text"), str):
            raise ValueError("a negative must be an object with a string 'text'")
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)


@dataclass
class Record:
    """One training example, the unit that flows from generate to export."""

    id: str
    task_type: str
    task: str
    query: str
    positive: str
    negatives: list[Negative] = field(default_factory=list)
    positive_score: float | None = None
    positive_answerable: bool | None = None
    scores: dict[str, Any] = field(default_factory=dict)  # stage-computed numbers (teacher etc.)
    meta: dict[str, Any] = field(default_factory=dict)  # provenance: model, template, seed, ...
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        """A plain dict in field order. Built directly: ``asdict`` deep-copies every nested
        value, a cost that shows when thousands of records a second are written."""
        d = {name: getattr(self, name) for name in self.__dataclass_fields__}
        d["negatives"] = [{name: getattr(n, name) for name in n.__dataclass_fields__} for n in self.negatives]
        d["scores"], d["meta"] = dict(self.scores), dict(self.meta)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Record:
        if not isinstance(d, dict):
            raise ValueError("a record must be a JSON object")
        missing = [k for k in ("id", "task_type", "task", "query", "positive") if k not in d]
        if missing:
            raise ValueError(f"record lacks {', '.join(missing)}")
        for k in ("id", "task_type", "task", "query", "positive"):
            if not isinstance(d[k], str):
                raise ValueError(f"record field '{k}' must be a string")
        negs = d.get("negatives") or []
        if not isinstance(negs, list):
            raise ValueError("record field 'negatives' must be a list")
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d and k != "negatives"}
        return cls(**known, negatives=[Negative.from_dict(n) for n in negs])


@dataclass
class Task:
    """A brainstormed (or fixed) task instruction for one family."""

    id: str
    task_type: str
    task: str
    meta: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Task:
        if not isinstance(d, dict) or not isinstance(d.get("task"), str):
            raise ValueError("a task must be an object with a string 'task'")
        task_type = d.get("task_type", "")
        return cls(
            id=d.get("id") or stable_id(task_type, d["task"]),
            task_type=task_type,
            task=d["task"],
            meta=d.get("meta") or {},
        )


def read_records(path) -> list[Record]:
    """Read a JSONL file of records; a bad line is a one-line error naming file and line."""
    from curate.jsonl import read_jsonl

    out = []
    for lineno, obj in read_jsonl(path):
        try:
            out.append(Record.from_dict(obj))
        except (ValueError, TypeError) as e:
            raise CurateError(f"{path}:{lineno}: not a curate record: {e}") from None
    return out
