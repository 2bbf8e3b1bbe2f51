"""Generate (query, positive, graded negatives) records for a family's tasks.

Items are planned up front from (family, task, repetition, seed, overrides), which also
gives each its stable id and its own seed; an item already in ``generated.jsonl`` or
``failed.jsonl`` is not redone, so re-running after a crash continues without losing or
duplicating anything. Records and failures are appended and flushed as they finish.

An item may also bring fixed fields of its own (``Item.given``: a real query and positive,
for specs that list them under ``inputs``); they are template variables, and the record
keeps them verbatim instead of asking the model for them (see ``curate.generate.from_pairs``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curate.asyncrun import bounded
from curate.core.errors import CurateError
from curate.core.jsonl import JsonlAppender, atomic_write_jsonl, read_jsonl, trim_partial_tail
from curate.llm.client import Answer, LLMClient, derive_seed
from curate.progress import RunStats
from curate.core.records import Negative, Record, Task, stable_id
from curate.taskspec import TaskSpec

from curate.generate.prompting import build_messages, draw_variables

GENERATED = "generated.jsonl"
FAILED = "failed.jsonl"


@dataclass
class Item:
    id: str
    task: Task
    repetition: int
    seed: int
    given: dict[str, Any] = field(default_factory=dict)  # answer fields fixed in advance (verbatim)
    meta: dict[str, Any] = field(default_factory=dict)  # provenance copied into the record's meta


# Variables every generate template gets besides the drawn placeholders.
_BASE_VARIABLES = ("task", "n_negatives", "task_type")


def pinned_parts(overrides: dict[str, Any] | None, max_chars: int | None) -> list[tuple[str, Any]]:
    """The run settings that change what an item asks for, so they belong in its id."""
    pinned = sorted((overrides or {}).items())
    if max_chars:
        pinned.append(("max_chars", max_chars))
    return pinned


def make_item(spec: TaskSpec, task: Task, key: Any, seed: int, pinned: list, repetition: int = 0,
              given: dict[str, Any] | None = None, meta: dict[str, Any] | None = None) -> Item:
    """An item whose id (and so its seed) follows from family, task, ``key``, seed and pins."""
    item_id = stable_id(spec.family, task.task, key, seed, pinned)
    return Item(item_id, task, repetition, derive_seed("generate", item_id), dict(given or {}), dict(meta or {}))


def plan_items(spec: TaskSpec, tasks: Sequence[Task], n: int, seed: int,
               overrides: dict[str, Any] | None = None, max_chars: int | None = None) -> list[Item]:
    """Item i uses task i mod T, so the first items already cover every task."""
    if not tasks:
        return []
    pinned = pinned_parts(overrides, max_chars)
    items = []
    for i in range(n):
        task = tasks[i % len(tasks)]
        rep = i // len(tasks)
        items.append(make_item(spec, task, rep, seed, pinned, repetition=rep))
    return items


def finished_ids(out_dir: Path) -> set[str]:
    """Ids already written by an earlier run (records and final failures)."""
    done: set[str] = set()
    for name in (GENERATED, FAILED):
        path = out_dir / name
        if path.exists():
            trim_partial_tail(path)
            done.update(obj.get("id") for _, obj in read_jsonl(path) if isinstance(obj, dict))
    return done


def _answer_text(item: Item, data: dict[str, Any], key: str) -> str:
    """A given field verbatim, else the model's answer for it, stripped."""
    if key in item.given:
        return item.given[key]
    return str(data[key]).strip()


def answer_to_record(spec: TaskSpec, item: Item, data: dict[str, Any], meta: dict[str, Any]) -> Record:
    negatives = [
        Negative(text=str(n["text"]).strip(), level=level, score=n.get("score"), answerable=n.get("answerable"))
        for level, n in enumerate(data["negatives"][: spec.n_negatives], 1)
    ]
    return Record(
        id=item.id,
        task_type=spec.family,
        task=item.task.task,
        query=_answer_text(item, data, "query"),
        positive=_answer_text(item, data, "positive"),
        negatives=negatives,
        positive_score=data.get("positive_score"),
        positive_answerable=data.get("positive_answerable"),
        meta={**meta, "symmetric": spec.symmetric},
    )


async def generate(
    spec: TaskSpec,
    tasks: Sequence[Task],
    n: int,
    client: LLMClient,
    out_dir: Path,
    seed: int,
    stats: RunStats,
    overrides: dict[str, Any] | None = None,
    prompt_dirs: Sequence[str | Path] = (),
    retry_failed: bool = False,
    progress=None,
    max_chars: int | None = None,
    items: Sequence[Item] | None = None,
) -> RunStats:
    """Run every planned item not finished yet; ``items`` replaces the plan from ``tasks`` and ``n``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if items is None:
        if spec.inputs:
            raise CurateError(f"{spec.family}: each item needs its own {' and '.join(spec.inputs)} "
                              f"(use --from-pairs FILE)")
        items = plan_items(spec, tasks, n, seed, overrides, max_chars)
    items = list(items)
    retried = _drop_failed(out_dir, {it.id for it in items}) if retry_failed else set()
    done = finished_ids(out_dir)
    todo = [it for it in items if it.id not in done]
    stats.total = len(items)
    stats.resumed = len(items) - len(todo)
    step = spec.generate.with_max_chars(max_chars)
    bar = progress.add_task(f"generate {spec.family}", total=len(items), completed=stats.resumed) if progress else None

    async def work(item: Item) -> tuple[Answer, dict[str, Any]]:
        variables = draw_variables(step, item.seed, overrides)
        variables.update(task=item.task.task, n_negatives=spec.n_negatives, task_type=spec.family)
        variables.update(item.given)
        messages, tmeta = build_messages(step, variables, prompt_dirs)
        answer = await client.ask_json(messages, step.schema, step.params, item.seed, name="example",
                                       fresh=item.id in retried)
        placeholders = {k: v for k, v in variables.items() if k not in _BASE_VARIABLES and k not in item.given}
        meta = {
            "model": client.cfg.model,
            **tmeta,
            "placeholders": placeholders,
            "seed": item.seed,
            **({"max_chars": max_chars} if max_chars else {}),
            "task_id": item.task.id,
            "repetition": item.repetition,
            **item.meta,
            "attempts": answer.attempts,
            **({"history": answer.history} if answer.history else {}),  # why earlier attempts failed
            "tokens": {"prompt": answer.prompt_tokens, "completion": answer.completion_tokens},
            "latency_s": round(answer.latency, 3),
            "from_cache": answer.cached,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        return answer, meta

    limit = client.cfg.concurrency * len(client.cfg.base_urls)
    with JsonlAppender(out_dir / GENERATED) as good, JsonlAppender(out_dir / FAILED) as bad:
        async for item, (answer, meta) in bounded(todo, work, limit):
            stats.add(answer.ok, answer.prompt_tokens, answer.completion_tokens, answer.reason, answer.cached)
            if answer.ok:
                good.write(answer_to_record(spec, item, answer.data, meta).to_dict())
            else:
                bad.write({
                    "id": item.id, "task_type": spec.family, "task": item.task.task,
                    "reason": answer.reason, "attempts": answer.attempts, "history": answer.history,
                    "raw": answer.raw, "meta": meta,
                })
            if bar is not None:
                progress.advance(bar)
    return stats


def _drop_failed(out_dir: Path, ids: set[str]) -> set[str]:
    """Forget earlier final failures of these items so they are tried again; return their ids."""
    path = out_dir / FAILED
    if not path.exists():
        return set()
    trim_partial_tail(path)
    rows = [obj for _, obj in read_jsonl(path)]
    atomic_write_jsonl(path, [obj for obj in rows if obj.get("id") not in ids])
    return {obj.get("id") for obj in rows if obj.get("id") in ids}
