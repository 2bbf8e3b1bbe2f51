"""Run a recipe over records: each step in turn, with counts in, kept and dropped by reason.

Outputs are written whole under temporary names and renamed, so a crash never leaves a
half-written ``filtered.jsonl``; re-running repeats the steps, and the embedding cache
makes the teacher's second pass encode nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections import Counter
from pathlib import Path
from typing import Any

from curate.filter.base import STEPS, FilterContext
from curate.filter.recipe import Recipe
from curate.core.jsonl import atomic_write_json, atomic_write_jsonl
from curate.core.records import Record

FILTERED = "filtered.jsonl"
REJECTED = "rejected.jsonl"
REPORT = "filter_report.json"


def run_steps(records: list[Record], recipe: Recipe, ctx: FilterContext) -> tuple[list[Record], list[dict[str, Any]]]:
    """Apply the recipe's steps in order; return the kept records and one report row per step.

    All steps run in one event loop, so LLM clients (and an embedded server) opened by one
    judge step serve the next ones too and are closed once, at the end."""
    return asyncio.run(_run_steps(records, recipe, ctx))


async def _run_steps(records: list[Record], recipe: Recipe, ctx: FilterContext
                     ) -> tuple[list[Record], list[dict[str, Any]]]:
    rows = []
    async with contextlib.AsyncExitStack() as stack:
        ctx.clients = {}
        ctx.stack = stack
        for cfg in recipe.steps:
            records, row = await _one_step(records, cfg, ctx)
            rows.append(row)
    ctx.stack, ctx.clients = None, {}
    return records, rows


async def _one_step(records: list[Record], cfg, ctx: FilterContext) -> tuple[list[Record], dict[str, Any]]:
    ctx.step_name = cfg.name
    before = len(ctx.rejections)
    n_in, negs_in = len(records), sum(len(r.negatives) for r in records)
    started = time.perf_counter()
    result = STEPS[cfg.name](records, cfg.params, ctx)
    if inspect.isawaitable(result):
        result = await result
    records = list(result)
    new = ctx.rejections[before:]
    return records, {
        "step": cfg.name,
        "params": cfg.params,
        "records_in": n_in,
        "records_kept": len(records),
        "records_dropped": dict(Counter(r.reason for r in new if r.level is None and r.text is None)),
        "negatives_in": negs_in,
        "negatives_kept": sum(len(r.negatives) for r in records),
        "negatives_dropped": dict(Counter(r.reason for r in new if not (r.level is None and r.text is None))),
        "seconds": round(time.perf_counter() - started, 2),
        **({"notes": ctx.notes[cfg.name]} if cfg.name in ctx.notes else {}),
    }


def write_outputs(out_dir: Path, kept: list[Record], ctx: FilterContext, report: dict[str, Any]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_jsonl(out_dir / FILTERED, (r.to_dict() for r in kept))
    atomic_write_jsonl(out_dir / REJECTED, (r.to_dict() for r in ctx.rejections))
    atomic_write_json(out_dir / REPORT, report)
