"""Generate's one queue: every family's items in one stream of requests, families interleaved.

Each family is planned first (its tasks brainstormed or read, its items planned, each with its
stable id and seed, ``curate.generate.examples``); then one queue asks for every family's items
that are not finished yet, in turns (the first item of each family, then the second of each, ...),
so the families progress together and one family's slow tail does not leave the servers idle
while the next family waits. The queue runs here, or sharded over several client processes
(``--executor ray``, ``curate.generate.shards``). What an item asks and what its record holds do
not depend on the queue: its id, seed and prompt are its own, so the records, ``resume`` and the
request cache are those of running the families one after another, and the finished
``generated.jsonl`` is put in item order (family by family) at the end of the run.

Numbers stay per family: each family keeps its ``RunStats`` (records, failures, tokens) and
counts the requests its own items sent and the answers they read from the cache (the client's
``TALLY``, one per family's items), and its bar shows its own progress.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curate.core.estimate import Estimate, Pace
from curate.core.progress import RunStats
from curate.generate.examples import FAILED, GENERATED, Item, _drop_failed, finished_ids
from curate.llm.taskspec import TaskSpec


@dataclass
class Family:
    """One family's part of the run: its spec, its items in plan order, and its numbers."""

    spec: TaskSpec
    items: list[Item]
    stats: RunStats
    todo: list[Item] = field(default_factory=list)  # the items no earlier run finished


@dataclass(frozen=True)
class Asking:
    """How every item of the run is asked for (the same for every family)."""

    overrides: dict[str, Any] = field(default_factory=dict)  # --set pins
    prompt_dirs: tuple[str, ...] = ()
    max_chars: int | None = None
    copy_retries: int = 0


def interleave(families: Sequence[Family]) -> list[tuple[int, Item]]:
    """(family index, item) for every item still to do: round by round, one item of each family
    a round, each family's in plan order."""
    longest = max((len(f.todo) for f in families), default=0)
    return [(k, f.todo[i]) for i in range(longest) for k, f in enumerate(families) if i < len(f.todo)]


def prepare(families: Sequence[Family], out_dir: Path, retry_failed: bool) -> set[str]:
    """Fold in what shards of a killed run left, forget earlier failures with ``retry_failed``,
    and set each family's items still to do; returns the ids to ask afresh (their cached answers
    were why they failed)."""
    from curate.generate.shards import merge_parts

    out_dir.mkdir(parents=True, exist_ok=True)
    merge_parts(out_dir)
    ids = {it.id for f in families for it in f.items}
    retried = _drop_failed(out_dir, ids) if retry_failed else set()
    done = finished_ids(out_dir)
    for f in families:
        f.todo = [it for it in f.items if it.id not in done]
        f.stats.total = len(f.items)
        f.stats.resumed = len(f.items) - len(f.todo)
    return retried


async def run_queue(queue: Sequence[tuple[int, Item]], specs: Sequence[TaskSpec], asking: Asking, client: Any,
                    retried: set[str], records: Path, failures: Path, stats: Sequence[RunStats],
                    tallies: Sequence[list[int]], on_done: Callable[[int], None] | None = None,
                    pace: Pace | None = None) -> None:
    """Ask for every queued item, at most the client's concurrency per server at once, appending
    each record (or failure) to ``records`` (``failures``) as it comes; each family's numbers go
    to its ``stats`` and ``tallies`` ([requests sent, cache hits]); ``on_done(family)`` after each;
    ``pace`` times the answers (``curate.core.estimate``)."""
    from curate.core.asyncrun import bounded
    from curate.core.jsonl import JsonlAppender
    from curate.generate.examples import _count_copy, answer_to_record, ask_item, example_task
    from curate.llm.client import TALLY

    tasks = [example_task(spec, asking.prompt_dirs, asking.max_chars) for spec in specs]

    async def work(entry: tuple[int, Item]):
        k, item = entry
        TALLY.set(tallies[k])  # this item's task only: its requests and cache hits count for its family
        return await ask_item(specs[k], tasks[k], item, client, asking.overrides, asking.max_chars,
                              asking.copy_retries, item.id in retried)

    limit = in_flight(client)
    with JsonlAppender(records) as good, JsonlAppender(failures) as bad:
        async for (k, item), (result, meta) in bounded(queue, work, limit):
            spec, s, answer = specs[k], stats[k], result.answer
            s.add(result.ok, answer.prompt_tokens, answer.completion_tokens, result.reason, answer.cached)
            if pace is not None:
                pace.answered(1, answer.prompt_tokens + answer.completion_tokens)
            if "copy" in meta:
                _count_copy(s, meta["copy"])
            if result.ok:
                good.write(answer_to_record(spec, item, result.value, meta).to_dict())
            else:
                bad.write({
                    "id": item.id, "task_type": spec.family, "task": item.task.task,
                    "reason": result.reason, "attempts": answer.attempts, "history": answer.history,
                    "raw": answer.raw, "meta": meta,
                })
            if on_done is not None:
                on_done(k)


async def run_families(families: Sequence[Family], client: Any, out_dir: Path, asking: Asking,
                       retry_failed: bool = False, progress=None, executor=None, cache_path: Path | None = None,
                       timings: dict[str, float] | None = None) -> None:
    """Every family's unfinished items in one queue, interleaved (``interleave``): here, or with
    an ``executor`` of several shards on that many client processes (``curate.generate.shards``).
    Each family's ``stats`` gain its counts, requests and cache hits; ``timings`` the queue's."""
    from curate.generate.examples import asked_spec

    out_dir = Path(out_dir)
    specs = [asked_spec(f.spec, f.items) for f in families]
    retried = prepare(families, out_dir, retry_failed)
    queue = interleave(families)
    bars = [progress.add_task(f"generate {f.spec.family}", total=len(f.items), completed=f.stats.resumed,
                              stats=f.stats) if progress is not None else None for f in families]
    left = [len(f.todo) for f in families]
    timings = timings if timings is not None else {}
    for f in families:
        f.stats.extra.setdefault("cache_hits", 0)
        if not f.todo:
            f.stats.ended = time.perf_counter()

    estimate = plan_queue(queue, specs, asking, client, families[0].stats.price) if queue else None
    pace = Pace(estimate) if estimate is not None else None
    sharded = executor is not None and executor.shards > 1 and len(queue) > 1

    def advance(k: int, n: int = 1) -> None:  # n more of family k's items finished
        if sharded and pace is not None:  # the shards' answers, timed here as they are reported
            pace.answered(n)
        left[k] -= n
        if bars[k] is not None:
            progress.advance(bars[k], n)
        if not left[k]:
            families[k].stats.ended = time.perf_counter()

    started = time.perf_counter()
    if pace is not None:
        estimate.announce()
        pace.begin()
    if sharded:
        from curate.generate.shards import run_sharded

        run_sharded(families, specs, queue, client.cfg, cache_path, out_dir, asking, retried, executor, advance,
                    timings)
    else:
        tallies = [[0, 0] for _ in families]
        sent_before = client.requests_sent
        await run_queue(queue, specs, asking, client, retried, out_dir / GENERATED, out_dir / FAILED,
                        [f.stats for f in families], tallies, advance, pace)
        answered = [f.stats.ok + f.stats.failed for f in families]  # this run's answers
        for f, n, (_, hits) in zip(families, requests_by_family(tallies, client.requests_sent - sent_before, answered),
                                   tallies):
            f.stats.requests += n
            f.stats.extra["cache_hits"] += hits
    timings["queue_s"] = time.perf_counter() - started - timings.get("shards_start_s", 0.0)
    for f in families if estimate is not None else ():  # each family its share, so they add up to the queue's
        f.stats.extra["estimate"] = estimate.as_dict(len(f.todo))


def in_flight(client: Any) -> int:
    """Requests the queue keeps in flight: the client's concurrency on each of its servers."""
    return client.cfg.concurrency * len(client.cfg.base_urls)


def plan_queue(queue: Sequence[tuple[int, Item]], specs: Sequence[TaskSpec], asking: Asking, client: Any,
               price: float | None) -> Estimate:
    """The queue's estimate before its first request: one request an item (queries that copy
    their passage and are asked again aside), prompts rendered for an even sample of the items."""
    from curate.core.estimate import most_tokens, plan, prompt_text, sample
    from curate.generate.examples import example_task, item_variables

    tasks = [example_task(spec, asking.prompt_dirs, asking.max_chars) for spec in specs]
    prompts = [prompt_text(tasks[k].prompt(item_variables(specs[k], item, asking.overrides)).messages)
               for k, item in sample(queue)]
    completion = most_tokens([tasks[k].params.get("max_tokens") for k, _ in queue])
    return plan("generate", prompts, len(queue), completion, in_flight(client), price)


def requests_by_family(tallies: Sequence[list[int]], sent: int, answered: Sequence[int]) -> list[int]:
    """Each family's requests: its tally's, and of the requests the client sent without tallying
    them (a backend a plugin registers), a share by the answers each family got."""
    requests = [t[0] for t in tallies]
    rest = sent - sum(requests)
    if rest > 0 and requests:
        total = sum(answered) or 1
        shares = [rest * a // total for a in answered]
        shares[max(range(len(shares)), key=lambda i: answered[i])] += rest - sum(shares)
        requests = [n + share for n, share in zip(requests, shares)]
    return requests
