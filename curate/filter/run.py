"""Run a recipe over records: each step in turn, with counts in, kept and dropped by reason.

Outputs are written whole under temporary names and renamed, so a crash never leaves a
half-written ``filtered.jsonl``; re-running repeats the steps, and the embedding cache
makes the teacher's second pass encode nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curate.core.executor import Executor, map_shards, merge_notes, split
from curate.core.progress import note
from curate.core.runner import REJECTED, Drop, Run
from curate.filter.base import STEPS, FilterContext
from curate.filter.recipe import Recipe
from curate.core.jsonl import atomic_write_jsonl
from curate.core.records import Record

FILTERED = "filtered.jsonl"
# a step still running after this many seconds is named on the console (its own bars, encoding or
# judging, show its progress from there): a long filter is never silent, a quick one says nothing
ANNOUNCE_AFTER = 5.0


def run_steps(records: list[Record], recipe: Recipe, ctx: FilterContext,
              executor: Executor = Executor()) -> tuple[list[Record], list[dict[str, Any]]]:
    """Apply the recipe's steps in order; return the kept records and one report row per step.

    In one process all steps run in one event loop, so LLM clients (and an embedded server)
    opened by one judge step serve the next ones too and are closed once, at the end. With a
    sharding executor, each run of consecutive ``map`` steps goes to the workers as contiguous
    shards (each opens its own clients) and the results are joined in order: the same records,
    rejections and counts as one process gives; ``global`` steps run here."""
    rows: list[dict[str, Any]] = []
    total = len(recipe.steps)
    for kind, steps in _segments(recipe.steps, executor):
        first = len(rows) + 1
        if kind == "map":
            note(f"filter: steps {first}-{first + len(steps) - 1} of {total} ({', '.join(c.name for c in steps)}) "
                 f"on {executor.shards} shards, {len(records):,} records")
            records, seg_rows = _sharded(records, steps, ctx, executor)
        else:
            def say(i: int, step: str, n: int, first: int = first) -> None:
                note(f"filter: step {first + i} of {total}, {step}, on {n:,} records (running for {ANNOUNCE_AFTER:.0f} s)")

            records, seg_rows = asyncio.run(_run_steps(records, steps, ctx, say=say))
        rows += seg_rows
    return records, rows


def _segments(steps: list, executor: Executor) -> list[tuple[str, list]]:
    """Consecutive steps grouped by how they run: ``map`` (sharded) or ``global`` (here)."""
    out: list[tuple[str, list]] = []
    for cfg in steps:
        kind = STEPS.get(cfg.name).kind if executor.shards > 1 else "global"
        if out and out[-1][0] == kind:
            out[-1][1].append(cfg)
        else:
            out.append((kind, [cfg]))
    return out


async def _run_steps(records: list[Record], steps: list, ctx: FilterContext, fns: tuple = (),
                     say: Callable[[int, str, int], None] | None = None) -> tuple[list[Record], list[dict[str, Any]]]:
    rows = []
    async with contextlib.AsyncExitStack() as stack:
        ctx.clients = {}
        ctx.stack = stack
        for i, cfg in enumerate(steps):
            fn = fns[i] if fns else STEPS.get(cfg.name).fn
            timer = threading.Timer(ANNOUNCE_AFTER, say, (i, cfg.name, len(records))) if say is not None else None
            if timer is not None:  # a step still running after a few seconds says which it is
                timer.daemon = True
                timer.start()
            try:
                records, row = await _one_step(records, cfg, ctx, fn)
            finally:
                if timer is not None:
                    timer.cancel()
            rows.append(row)
    ctx.stack, ctx.clients = None, {}
    return records, rows


@dataclass(frozen=True)
class _Shard:
    """What a worker needs to run map steps over its shard: the steps with their functions (so a
    worker needs no registry), where the run writes and how to open LLM clients."""

    steps: list
    fns: tuple
    out_dir: Path
    llm_factory: Any
    prompt_dirs: tuple[str, ...] = ()
    price: float | None = None

    def __call__(self, records: list[Record]) -> tuple[list[Record], list[Drop], list[dict[str, Any]]]:
        ctx = FilterContext(out_dir=self.out_dir, llm_factory=self.llm_factory, prompt_dirs=self.prompt_dirs,
                            price=self.price)
        kept, rows = asyncio.run(_run_steps(records, self.steps, ctx, self.fns))
        return kept, ctx.rejections, rows


def _sharded(records: list[Record], steps: list, ctx: FilterContext, executor: Executor
             ) -> tuple[list[Record], list[dict[str, Any]]]:
    shard = _Shard(steps, tuple(STEPS.get(cfg.name).fn for cfg in steps), ctx.out_dir, ctx.llm_factory,
                   ctx.prompt_dirs, ctx.price)
    results = map_shards(shard, split(records, executor.shards), executor)
    kept = [r for shard_kept, _, _ in results for r in shard_kept]
    rows = []
    for i, cfg in enumerate(steps):
        # rejections step by step, shards in order: the order one process writes them in
        ctx.rejections += [rej for _, rejections, _ in results for rej in rejections if rej.step == cfg.name]
        parts = [shard_rows[i] for _, _, shard_rows in results]
        row = {"step": cfg.name, "params": cfg.params}
        for key in ("records_in", "records_kept", "records_dropped", "negatives_in", "negatives_kept",
                    "negatives_dropped"):
            row[key] = (dict(sum((Counter(p[key]) for p in parts), Counter())) if key.endswith("dropped")
                        else sum(p[key] for p in parts))
        row["seconds"] = max(p["seconds"] for p in parts)  # the slowest shard: the step's wall time
        notes = merge_notes([p.get("notes", {}) for p in parts])
        if notes:
            ctx.notes[cfg.name] = notes
            row["notes"] = notes
        row["shards"] = len(results)
        rows.append(row)
    return kept, rows


async def _one_step(records: list[Record], cfg, ctx: FilterContext, fn) -> tuple[list[Record], dict[str, Any]]:
    ctx.step_name = cfg.name
    before = len(ctx.rejections)
    n_in, negs_in = len(records), sum(len(r.negatives) for r in records)
    started = time.perf_counter()
    result = fn(records, cfg.params, ctx)
    if inspect.isawaitable(result):
        result = await result
    records = list(result)
    new = ctx.rejections[before:]
    return records, {
        "step": cfg.name,
        "params": cfg.params,
        "records_in": n_in,
        "records_kept": len(records),
        "records_dropped": dict(Counter(r.reason for r in new if r.target == "record")),
        "negatives_in": negs_in,
        "negatives_kept": sum(len(r.negatives) for r in records),
        "negatives_dropped": dict(Counter(r.reason for r in new if r.target == "negative")),
        "seconds": round(time.perf_counter() - started, 2),
        **({"notes": ctx.notes[cfg.name]} if cfg.name in ctx.notes else {}),
    }


def write_outputs(run: Run, kept: list[Record], ctx: FilterContext) -> None:
    """The kept records, every drop through the run's one drop log (an empty one when nothing
    was dropped: the report names it); the runner writes the report."""
    atomic_write_jsonl(run.dir / FILTERED, (r.to_dict() for r in kept))
    for drop in ctx.rejections:
        run.drop(drop)
    if not ctx.rejections:
        atomic_write_jsonl(run.dir / REJECTED, [])
