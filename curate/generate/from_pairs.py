"""Graded negatives for real (query, positive) pairs (MGH's treatment of public retrieval data).

Each pair becomes one item of the ``generate`` loop whose query and positive are fixed
(``Item.given``): the template sees them as ``query`` and ``positive``, the model is asked
only for the four negatives (level 1 hardest .. 4 easiest) and its scores, and the record
keeps the real query and positive verbatim.  An item's id follows from the family, its task,
the pair's two texts, the seed and the pinned settings, so re-running resumes exactly as
``generate`` does, whatever order the pairs come in.

Pairs come from a JSONL file of ``{"query", "positive"}`` lines (an optional ``"task"`` gives
that pair its instruction) or from a BEIR folder (``queries.jsonl``, ``corpus.jsonl`` and
``qrels/<split>.tsv``: one pair per relevant (query, document)).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError
from curate.core.jsonl import read_jsonl
from curate.core.progress import RunStats
from curate.core.records import Task, stable_id
from curate.llm.taskspec import TaskSpec

from curate.generate.examples import Item, Planning, make_item

FAMILY = "from-pairs"


@dataclass
class Pair:
    query: str
    positive: str
    task: str | None = None  # this pair's own instruction, if its line gave one
    source: dict[str, Any] = field(default_factory=dict)  # where it came from (line, ids)


def read_pairs_jsonl(path: Path) -> list[Pair]:
    """``{"query": ..., "positive": ...[, "task": ...]}`` lines; a bad line names file and line."""
    pairs = []
    for lineno, obj in read_jsonl(path):
        if not isinstance(obj, dict):
            raise CurateError(f"{path}:{lineno}: a pair must be a JSON object with 'query' and 'positive'")
        for key in ("query", "positive"):
            value = obj.get(key)
            if not isinstance(value, str):
                raise CurateError(f"{path}:{lineno}: a pair needs a string '{key}'")
            if not value.strip():
                raise CurateError(f"{path}:{lineno}: '{key}' is empty")
        task = obj.get("task")
        if task is not None and (not isinstance(task, str) or not task.strip()):
            raise CurateError(f"{path}:{lineno}: 'task' must be a non-empty string")
        pairs.append(Pair(obj["query"], obj["positive"], task, {"line": lineno}))
    return pairs


def read_pairs_beir(folder: Path, split: str, min_relevance: int = 1) -> list[Pair]:
    """One pair per (query, document) the split's qrels call relevant, in qrels order (the
    reader drops, and counts, lines whose ids the folder lacks)."""
    from curate.datasets.beir import load_beir

    data = load_beir(folder, split)
    pairs = []
    for qid, docs in data.qrels.items():
        for did, rel in docs.items():
            if rel < min_relevance:
                continue
            pairs.append(Pair(data.queries[qid], data.corpus[did], None,
                              {"split": split, "query_id": qid, "doc_id": did}))
    return pairs


def read_pairs(path: str | Path, split: str = "train") -> list[Pair]:
    """Pairs from a JSONL file or a BEIR folder; no pairs at all is an error."""
    path = Path(path)
    pairs = read_pairs_beir(path, split) if path.is_dir() else read_pairs_jsonl(path)
    if not pairs:
        raise CurateError(f"{path}: no (query, positive) pairs")
    return pairs


def pair_task(spec: TaskSpec, pair: Pair, tasks: Sequence[Task]) -> Task:
    """The pair's own task, else one of ``tasks`` picked by the pair's texts (not its position)."""
    if pair.task:
        text = " ".join(pair.task.split())
        return Task(id=stable_id(spec.family, text), task_type=spec.family, task=text, meta={"source": "pair"})
    pick = int(stable_id(pair.query, pair.positive), 16) % len(tasks)
    return tasks[pick]


def plan_pair_items(spec: TaskSpec, pairs: Sequence[Pair], tasks: Sequence[Task],
                    planning: Planning) -> tuple[list[Item], int]:
    """One item per distinct (task, query, positive), at most ``planning.n``; also the duplicates
    skipped. The language pool reaches only a spec that takes part (the shipped from-pairs does
    not: its negatives are written in the language of the given pair)."""
    if not tasks and any(p.task is None for p in pairs):
        raise CurateError(f"{spec.family}: no task instruction for pairs without a 'task'")
    items: list[Item] = []
    seen: set[str] = set()
    duplicates = 0
    for pair in pairs:
        if planning.n is not None and len(items) >= planning.n:
            break
        task = pair_task(spec, pair, tasks)
        item = make_item(spec, task, {"query": pair.query, "positive": pair.positive}, planning,
                         given={"query": pair.query, "positive": pair.positive}, meta={"pair": pair.source})
        if item.id in seen:
            duplicates += 1
            continue
        seen.add(item.id)
        items.append(item)
    return items, duplicates


def pair_items(spec: TaskSpec, pairs: Sequence[Pair], tasks: Sequence[Task], planning: Planning,
               stats: RunStats) -> list[Item]:
    """The items ``generate`` runs for ``--from-pairs`` (its loop, with given query/positive)."""
    missing = [k for k in ("query", "positive") if k not in spec.inputs and k not in spec.optional_inputs]
    if missing:
        raise CurateError(f"--from-pairs needs a spec whose 'inputs' list query and positive "
                          f"({spec.family} asks the model for {', '.join(missing)})")
    items, duplicates = plan_pair_items(spec, pairs, tasks, planning)
    stats.extra["pairs"] = len(pairs)
    stats.extra["duplicate_pairs"] = duplicates
    return items
