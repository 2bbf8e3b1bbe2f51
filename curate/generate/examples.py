"""Generate (query, positive, graded negatives) records for a family's tasks.

Items are planned up front from (family, task, repetition, seed, overrides), which also
gives each its stable id and its own seed; an item already in ``generated.jsonl`` or
``failed.jsonl`` is not redone, so re-running after a crash continues without losing or
duplicating anything. Records and failures are appended and flushed as they finish.

An item may also bring fixed fields of its own (``Item.given``: a real query and positive,
for specs that list them under ``inputs``); they are template variables, and the record
keeps them verbatim instead of asking the model for them (see ``curate.generate.from_pairs``).

With ``copy_retries``, a query the model writes for a given passage (``--from-corpus``) that
copies it (half or more of its word 4-grams in the passage or its title, ``curate.dedup.copies``)
is asked for again with another seed, up to that many times: the bundled model copies one passage
in five to ten, and a copy the filter drops costs a training row. The first answer that does not
copy is kept, else the one that copies least; the record's ``meta.copy`` keeps every answer's
containment, and the filter's copy guard judges what is left. Off by default: on zero-label
SciFact and NQ-UTD the second answers trained no better student than dropping the copies (docs:
Benchmarks).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curate.core.jsonl import atomic_write_jsonl, read_jsonl, trim_partial_tail
from curate.llm.batch import PENDING
from curate.llm.client import LLMClient, derive_seed
from curate.llm.task import LLMTask, Result
from curate.core.progress import RunStats
from curate.core.records import Negative, Positive, Record, Task, stable_id
from curate.generate.languages import Pool, item_languages
from curate.llm.taskspec import TaskSpec


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
    language: str | None = None  # drawn by --languages: the code the query is asked in (and the rest, but ...)
    positive_language: str | None = None  # ... for a pair (bitext): the positive's and negatives' code


# Variables every generate template gets besides the drawn placeholders.
_BASE_VARIABLES = ("task", "n_negatives", "task_type")


def pinned_parts(overrides: dict[str, Any] | None, max_chars: int | None) -> list[tuple[str, Any]]:
    """The run settings that change what an item asks for, so they belong in its id."""
    pinned = sorted((overrides or {}).items())
    if max_chars:
        pinned.append(("max_chars", max_chars))
    return pinned


@dataclass(frozen=True)
class Planning:
    """How a run plans its items, the same for every family and input source: how many (None:
    what the source gives), the seed, the ``--set`` pins, the character cap and the language pool."""

    n: int | None
    seed: int
    pins: dict[str, Any] = field(default_factory=dict)
    max_chars: int | None = None
    languages: Pool | None = None

    def pinned(self) -> list[tuple[str, Any]]:
        return pinned_parts(self.pins, self.max_chars)


def make_item(spec: TaskSpec, task: Task, key: Any, planning: Planning, repetition: int = 0,
              given: dict[str, Any] | None = None, meta: dict[str, Any] | None = None) -> Item:
    """An item whose id (and so its seed) follows from family, task, ``key``, seed and pins.

    With a language pool (``--languages``) and a spec that takes part (its ``languages`` key),
    the pool joins the pins, so a run with another pool makes other items, and the item draws
    its language(s) from its own seed: the template gets them (``language`` and
    ``language_code``, or ``language_pair``) and the record keeps their codes. Without, the id
    is what it always was."""
    pinned, languages = planning.pinned(), planning.languages
    if languages is not None and spec.languages is not None:
        pinned = [*pinned, ("languages", [spec.languages, languages.key()])]
    item_id = stable_id(spec.family, task.task, key, planning.seed, pinned)
    item = Item(item_id, task, repetition, derive_seed("generate", item_id), dict(given or {}), dict(meta or {}))
    drawn, item.language, item.positive_language = item_languages(spec.languages, languages, item.seed)
    item.given.update(drawn)  # template variables, after the spec's own draws (which they replace)
    return item


def plan_items(spec: TaskSpec, tasks: Sequence[Task], planning: Planning) -> list[Item]:
    """``planning.n`` items (100 when None); item i uses task i mod T, so the first items already
    cover every task; each draws its language from the pool (``make_item``)."""
    if not tasks:
        return []
    items = []
    for i in range(planning.n or 100):
        task = tasks[i % len(tasks)]
        rep = i // len(tasks)
        items.append(make_item(spec, task, rep, planning, repetition=rep))
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


@dataclass
class Example:
    """What the model wrote for one item (fields the item gives are ``None`` when not asked for)."""
    query: str | None
    positive: str | None
    negatives: list[Negative]
    positive_score: Any = None
    positive_answerable: Any = None
    parts: dict[str, str] = field(default_factory=dict)  # the spec's further query_parts, as written


def parse_example(data: dict[str, Any], n_negatives: int, query_parts: Sequence[str] = ()) -> Example:
    """Texts stripped; negatives graded by their order (level 1 hardest), at most ``n_negatives``."""
    def text(key: str) -> str | None:
        return str(data[key]).strip() if key in data else None

    negatives = [Negative(text=str(n["text"]).strip(), level=level, score=n.get("score"), answerable=n.get("answerable"))
                 for level, n in enumerate(data.get("negatives", [])[:n_negatives], 1)]
    return Example(text("query"), text("positive"), negatives, data.get("positive_score"),
                   data.get("positive_answerable"), {k: text(k) for k in query_parts[1:]})


def example_task(spec: TaskSpec, prompt_dirs: Sequence[str | Path] = (), max_chars: int | None = None) -> LLMTask[Example]:
    """The spec's generate step as an LLM task (answer strings capped at ``max_chars``)."""
    return spec.generate.with_max_chars(max_chars).task(
        "example", functools.partial(parse_example, n_negatives=spec.n_negatives, query_parts=spec.query_parts),
        prompt_dirs)


def joined_query(parts: Sequence[str]) -> str:
    """A spec's ``query_parts`` as the one query text an embedder sees: "query. instruction".
    A part that ends without a full stop, question or exclamation mark, colon or semicolon gets
    a full stop before the next one."""
    out = ""
    for part in (" ".join(p.split()) for p in parts):
        if not part:
            continue
        if out and not out.endswith((".", "?", "!", ":", ";")):
            out += "."
        out = f"{out} {part}" if out else part
    return out


def answer_to_record(spec: TaskSpec, item: Item, example: Example, meta: dict[str, Any]) -> Record:
    """The record for an item: its given fields verbatim, the rest from the model's answer."""
    given = item.given
    query = given["query"] if "query" in given else example.query
    if spec.query_parts:  # the query the embedder sees carries them all; meta keeps each one
        parts = {"query": query, **example.parts}
        meta = {**meta, "query_parts": parts}
        query = joined_query([parts[k] for k in spec.query_parts])
    return Record(
        id=item.id,
        task_type=spec.family,
        task=item.task.task,
        query=query,
        positive=given["positive"] if "positive" in given else example.positive,
        positive_id=given.get("positive_id"),  # the corpus id of a given positive (--from-corpus)
        positive_title=given.get("positive_title"),
        language=item.language,
        positive_language=item.positive_language,
        positives=[Positive.from_dict(d, "given positive") for d in given.get("positives", [])],  # a bundle's
        negatives=example.negatives,
        positive_score=example.positive_score,
        positive_answerable=example.positive_answerable,
        meta={**meta, "symmetric": spec.symmetric},
    )


def asked_spec(spec: TaskSpec, items: Sequence[Item]) -> TaskSpec:
    """The spec the items are asked with: what they bring is not asked for (``TaskSpec.taking``)."""
    return spec.taking(k for it in items for k in it.given)


def item_variables(spec: TaskSpec, item: Item, overrides: dict[str, Any] | None) -> dict[str, Any]:
    """What the item's prompt is rendered with: its drawn placeholders, the task, what it brings."""
    variables = spec.generate.variables(item.seed, overrides)
    variables.update(task=item.task.task, n_negatives=spec.n_negatives, task_type=spec.family)
    variables.update(item.given)
    return variables


@dataclass(frozen=True)
class Asking:
    """How every item of the run is asked for (the same for every family)."""

    overrides: dict[str, Any] = field(default_factory=dict)  # --set pins
    prompt_dirs: tuple[str, ...] = ()
    max_chars: int | None = None
    copy_retries: int = 0


async def ask_item(spec: TaskSpec, task: LLMTask[Example], item: Item, client: LLMClient, asking: Asking,
                   fresh: bool) -> tuple[Result[Example], dict[str, Any]]:
    """Ask for one item (``task``: the spec's ``example_task``); its answer and the record's meta.
    ``fresh``: skip cached answers (the item failed before and is tried again)."""
    variables = item_variables(spec, item, asking.overrides)
    max_chars, copy_retries = asking.max_chars, asking.copy_retries
    result = await task.run(client, variables, item.seed, fresh=fresh)
    copy = None
    if copy_retries and result.ok and "positive" in item.given and "query" not in item.given:
        result, copy = await _unless_copied(task, client, variables, item, result, copy_retries, fresh)
    answer = result.answer
    placeholders = {k: v for k, v in variables.items() if k not in _BASE_VARIABLES and k not in item.given}
    meta = {
        "model": client.cfg.model,
        **result.prompt.provenance(),
        "placeholders": placeholders,
        "seed": item.seed,
        **({"max_chars": max_chars} if max_chars else {}),
        "task_id": item.task.id,
        "repetition": item.repetition,
        **item.meta,
        "attempts": answer.attempts,
        **({"history": answer.history} if answer.history else {}),  # why earlier attempts failed
        **({"copy": copy} if copy else {}),  # the query was asked for again: it copied its passage
        "tokens": {"prompt": answer.prompt_tokens, "completion": answer.completion_tokens},
        "latency_s": round(answer.latency, 3),
        "from_cache": answer.cached,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    return result, meta


async def _unless_copied(task: LLMTask, client: LLMClient, variables: dict[str, Any], item: Item,
                         first: Result[Example], retries: int, fresh: bool) -> tuple[Result[Example], dict | None]:
    """``first``, or, when its query copies the item's given passage, the first of up to
    ``retries`` answers under other seeds whose query does not, else the valid one that copies
    least; with each answer's containment (None: the first did not copy, nothing was asked)."""
    from curate.dedup.copies import CopyGuard, is_copy

    guard = CopyGuard(item.given["positive"], title=item.given.get("positive_title"))

    def share(result: Result[Example]) -> float | None:
        got = guard.share(result.value.query or "") if result.ok else None
        return None if got is None else round(got[0], 4)

    answers = [(first, share(first))]
    if not is_copy(answers[0][1]):
        return first, None
    for k in range(1, retries + 1):
        again = await task.run(client, variables, derive_seed(item.seed, "copy", k), fresh=fresh)
        if again.answer.reason == PENDING:  # a batch run: the item waits for the next batch
            return again, None
        answers.append((again, share(again)))
        if again.ok and not is_copy(answers[-1][1]):
            break
    # the valid answer that copies least: the one that stopped the loop, if any (a query too short
    # to judge counts as no copy), else the first of the least copying ones
    kept = min((s or 0.0, i) for i, (r, s) in enumerate(answers) if r.ok)[1]
    tokens = {"prompt": 0, "completion": 0}  # of the answers not kept
    for i, (r, _) in enumerate(answers):
        if i != kept:
            tokens["prompt"] += r.answer.prompt_tokens
            tokens["completion"] += r.answer.completion_tokens
    return answers[kept][0], {"containment": [s for _, s in answers], "kept": kept, "tokens": tokens}


def still_copies(copy: dict[str, Any]) -> bool:
    """Whether the answer a record kept (its ``meta.copy``) still copies its passage."""
    from curate.dedup.copies import is_copy

    return is_copy(copy["containment"][copy["kept"]])


def count_copy(stats: RunStats, copy: dict[str, Any]) -> None:
    """The run's counts of queries asked for again, and of those that still copy."""
    extra = stats.extra
    extra["copies_asked_again"] = extra.get("copies_asked_again", 0) + 1
    if still_copies(copy):
        extra["copies_left"] = extra.get("copies_left", 0) + 1
    stats.prompt_tokens += copy["tokens"]["prompt"]
    stats.completion_tokens += copy["tokens"]["completion"]


def drop_failed(out_dir: Path, ids: set[str]) -> set[str]:
    """Forget earlier final failures of these items so they are tried again; return their ids."""
    path = out_dir / FAILED
    if not path.exists():
        return set()
    trim_partial_tail(path)
    rows = [obj for _, obj in read_jsonl(path)]
    atomic_write_jsonl(path, [obj for obj in rows if obj.get("id") not in ids])
    return {obj.get("id") for obj in rows if obj.get("id") in ids}
