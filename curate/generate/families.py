"""Generate's run over every family: its items planned, then one queue, here or sharded.

Each family is planned first (its items, each with its stable id and seed,
``curate.generate.examples``); ``prepare`` folds in what a killed run left and sets what is
still to do; ``interleave`` puts every family's items in one queue, in turns; ``run_families``
asks for them in this process (``curate.generate.queue.run_queue``) or over several client
processes (``--executor ray``, ``curate.generate.shards``). This module sits above both, so
neither imports the other's caller.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curate.core.estimate import Pace
from curate.core.progress import RunStats
from curate.generate.examples import FAILED, GENERATED, Item, asked_spec, drop_failed, finished_ids
from curate.generate.queue import Asking, QueueWork, Sink, plan_queue, requests_by_family, run_queue
from curate.generate.shards import merge_parts, run_sharded
from curate.llm.batch import plan_of
from curate.llm.taskspec import TaskSpec

__all__ = ["Asking", "Family", "in_batches", "interleave", "prepare", "run_families"]


@dataclass
class Family:
    """One family's part of the run: its spec, its items in plan order, and its numbers."""

    spec: TaskSpec
    items: list[Item]
    stats: RunStats
    todo: list[Item] = field(default_factory=list)  # the items no earlier run finished


def interleave(families: Sequence[Family]) -> list[tuple[int, Item]]:
    """(family index, item) for every item still to do: round by round, one item of each family
    a round, each family's in plan order."""
    longest = max((len(f.todo) for f in families), default=0)
    return [(k, f.todo[i]) for i in range(longest) for k, f in enumerate(families) if i < len(f.todo)]


def prepare(families: Sequence[Family], out_dir: Path, retry_failed: bool) -> set[str]:
    """Fold in what shards of a killed run left, forget earlier failures with ``retry_failed``,
    and set each family's items still to do; returns the ids to ask afresh (their cached answers
    were why they failed)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    merge_parts(out_dir)
    ids = {it.id for f in families for it in f.items}
    retried = drop_failed(out_dir, ids) if retry_failed else set()
    done = finished_ids(out_dir)
    for f in families:
        f.todo = [it for it in f.items if it.id not in done]
        f.stats.total = len(f.items)
        f.stats.resumed = len(f.items) - len(f.todo)
    return retried


async def run_families(families: Sequence[Family], client: Any, out_dir: Path, asking: Asking,
                       retry_failed: bool = False, progress=None, executor=None, cache_path: Path | None = None,
                       timings: dict[str, float] | None = None) -> str | None:
    """Every family's unfinished items in one queue, interleaved (``interleave``): here, or with
    an ``executor`` of several shards on that many client processes (``curate.generate.shards``).
    Each family's ``stats`` gain its counts, requests and cache hits; ``timings`` the queue's.
    Returns the first failure's reason when this process saw one (the shards keep theirs)."""
    out_dir = Path(out_dir)
    specs = [asked_spec(f.spec, f.items) for f in families]
    retried = prepare(families, out_dir, retry_failed)
    queue = interleave(families)
    bars = [progress.add_task(f"generate {f.spec.family}", total=len(f.items), completed=f.stats.resumed,
                              stats=f.stats) if progress is not None else None for f in families]
    left = [len(f.todo) for f in families]
    timings = timings if timings is not None else {}
    batched = plan_of(client) is not None  # --batch: the plan the client was opened with
    for f in families:
        f.stats.extra.setdefault("cache_hits", 0)
        if not batched:  # the bar shows how many the client sends at once (a plugin backend may not say)
            f.stats.in_flight = getattr(client, "in_flight_limit", None)
        if not f.todo:
            f.stats.ended = time.perf_counter()

    estimate = plan_queue(queue, specs, asking, client, families[0].stats.price) if queue else None
    pace = Pace(estimate) if estimate is not None else None
    # a batch run asks from here: its requests go out as one file, whatever the client processes
    sharded = executor is not None and executor.shards > 1 and len(queue) > 1 and not batched

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
    work = QueueWork(queue, specs, asking, retried, out_dir)
    first = None
    if sharded:
        run_sharded(families, work, client.cfg, cache_path, executor, advance, timings)
    else:
        tallies = [[0, 0] for _ in families]
        sent_before = client.requests_sent
        sink = Sink(out_dir / GENERATED, out_dir / FAILED, [f.stats for f in families], tallies)
        if not batched:
            first = await run_queue(work, client, sink, advance, pace)
        else:
            batches = await in_batches(families, work, client, sink, advance, out_dir)
            for f in families:
                f.stats.extra["batches"] = batches
        answered = [f.stats.ok + f.stats.failed for f in families]  # this run's answers
        for f, n, (_, hits) in zip(families, requests_by_family(tallies, client.requests_sent - sent_before, answered),
                                   tallies):
            f.stats.requests += n
            f.stats.extra["cache_hits"] += hits
        if pace is not None:  # the servers' wave time, for the next run's estimate
            pace.finish(sum(answered) - sum(hits for _, hits in tallies))
    timings["queue_s"] = time.perf_counter() - started - timings.get("shards_start_s", 0.0)
    for f in families if estimate is not None else ():  # each family its share, so they add up to the queue's
        f.stats.extra["estimate"] = estimate.as_dict(len(f.todo))
    return first


async def in_batches(families: Sequence[Family], work: QueueWork, client: Any, sink: Sink, advance,
                     out_dir: Path) -> dict[str, Any]:
    """The queue asked in batches (``--batch``, ``curate.llm.batch``): a pass over the items still
    to do collects the requests with no answer yet, one batch answers them, and the next pass
    writes the records; the batches' files and ids live in ``OUT/batch/generate`` (``OUT/batch``
    before, moved there by the first run that resumes it)."""
    from dataclasses import replace

    from curate.core.progress import note
    from curate.llm.batch import ask_in_batches

    resumed = [f.stats.resumed for f in families]  # done before this run (a pass's prepare counts its own)

    async def one_pass() -> None:
        prepare(families, out_dir, False)  # what the last pass wrote is done
        for f, n in zip(families, resumed):
            f.stats.resumed = n
        await run_queue(replace(work, entries=interleave(families)), client, sink, advance)

    # an item takes a batch for its first ask, one for each re-ask and each copy retry, and one
    # more for a line its batch failed or left unanswered (expired)
    rounds = 2 + client.cfg.max_reasks + work.asking.copy_retries
    return await ask_in_batches(client, "generate", one_pass, rounds, note, was=out_dir / "batch")
