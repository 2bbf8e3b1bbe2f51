"""Generate's one queue of requests: the items of every family asked for in one stream (the run
that fills it and chooses where it runs is ``curate.generate.families``).

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

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError
from curate.core.estimate import Estimate, Pace
from curate.core.progress import RunStats
from curate.generate.examples import (Asking, Item, answer_to_record, ask_item, count_copy, example_task,
                                      item_variables)
from curate.llm.taskspec import TaskSpec


@dataclass
class QueueWork:
    """What one queue asks: its (family index, item) entries, each family's spec as its items are
    asked, how they are asked, the ids to ask afresh (their cached answers were why they failed)
    and the run folder."""

    entries: Sequence[tuple[int, Item]]
    specs: Sequence[TaskSpec]
    asking: Asking
    retried: set[str]
    out_dir: Path


@dataclass
class Sink:
    """Where a queue's answers go: records and failures appended to two files, and each family's
    numbers (``stats``; ``tallies``: [requests sent, cache hits])."""

    records: Path
    failures: Path
    stats: Sequence[RunStats]
    tallies: Sequence[list[int]]


async def run_queue(work: QueueWork, client: Any, sink: Sink, on_done: Callable[[int], None] | None = None,
                    pace: Pace | None = None) -> str | None:
    """Ask for every queued item, at most the client's concurrency per server at once, appending
    each record (or failure) to the ``sink``'s files as it comes, each family's numbers to its
    stats and tallies; ``on_done(family)`` after each; ``pace`` times the answers
    (``curate.core.estimate``). Returns the first failure's reason (None: none failed).

    An answer that failed for a reason no retry fixes (``Answer.fatal``: a refused key, a host
    that does not resolve, a server that answered nothing) stops the queue: that item and the
    rest are left to do, not failed, so the same command resumes them once it is fixed, and the
    run ends with the reason as a ``CurateError``."""
    from contextlib import aclosing

    from curate.core.asyncrun import bounded
    from curate.core.jsonl import JsonlAppender
    from curate.llm.batch import PENDING
    from curate.llm.client import TALLY

    specs, asking = work.specs, work.asking
    tasks = [example_task(spec, asking.prompt_dirs, asking.max_chars) for spec in specs]

    async def ask(entry: tuple[int, Item]):
        k, item = entry
        TALLY.set(sink.tallies[k])  # this item's task only: its requests and cache hits count for its family
        return await ask_item(specs[k], tasks[k], item, client, asking, item.id in work.retried)

    limit = in_flight(client)
    first: str | None = None
    finished, stop = 0, None
    with JsonlAppender(sink.records) as good, JsonlAppender(sink.failures) as bad:
        async with aclosing(bounded(work.entries, ask, limit)) as answers:  # closing it cancels those in flight
            async for (k, item), (result, meta) in answers:
                spec, s, answer = specs[k], sink.stats[k], result.answer
                if answer.reason == PENDING:  # a batch run's pass: the next batch answers it, the next pass writes it
                    continue
                if answer.fatal:
                    stop = getattr(client, "fatal", None) or result.reason
                    break
                finished += 1
                s.add(result.ok, answer.prompt_tokens, answer.completion_tokens, result.reason, answer.cached)
                if pace is not None:
                    pace.answered(1, answer.prompt_tokens + answer.completion_tokens)
                if "copy" in meta:
                    count_copy(s, meta["copy"])
                if result.ok:
                    good.write(answer_to_record(spec, item, result.value, meta).to_dict())
                else:
                    first = first or result.reason
                    bad.write({
                        "id": item.id, "task_type": spec.family, "task": item.task.task,
                        "reason": result.reason, "attempts": answer.attempts, "history": answer.history,
                        "raw": answer.raw, "meta": meta,
                    })
                if on_done is not None:
                    on_done(k)
    if stop is not None:
        raise CurateError(stopped_line(stop, len(work.entries) - finished))
    return first


def stopped_line(why: str, left: int) -> str:
    """The one line a queue stopped by a failure no retry fixes ends with."""
    items = "item is" if left == 1 else "items are"
    return (f"generate stopped: {why}. {left} {items} left to do (nothing was written for them): fix it and run "
            "the same command again to resume")


def in_flight(client: Any) -> int:
    """Requests the queue keeps in flight: the client's concurrency on each of its servers."""
    return client.cfg.concurrency * len(client.cfg.base_urls)


def plan_queue(queue: Sequence[tuple[int, Item]], specs: Sequence[TaskSpec], asking: Asking, client: Any,
               price: float | None) -> Estimate:
    """The queue's estimate before its first request: one request an item (queries that copy
    their passage and are asked again aside), prompts rendered for an even sample of the items."""
    from curate.core.estimate import most_tokens, plan, prompt_text, sample

    tasks = [example_task(spec, asking.prompt_dirs, asking.max_chars) for spec in specs]
    prompts = [prompt_text(tasks[k].prompt(item_variables(specs[k], item, asking.overrides)).messages)
               for k, item in sample(queue)]
    asked = [task.request(client)[1].get("max_tokens") for task in tasks]  # once a family, not once an item
    completion = most_tokens([asked[k] for k, _ in queue])
    from curate.core.hashing import value_digest

    cfg = client.cfg  # the servers' pace is kept by model, servers and slots, hashed (a URL may hold a secret)
    hosts = [re.sub(r"^(\w+://(127\.0\.0\.1|localhost)):\d+", r"\1", u) for u in cfg.base_urls]  # a local port changes
    key = value_digest(["generate", cfg.model, hosts, in_flight(client)])
    return plan("generate", prompts, len(queue), completion, in_flight(client), price, key=key,
                batch=cfg.batch.mode if cfg.batch else None)


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
