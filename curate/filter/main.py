"""``curate filter``: read records, run the recipe, write outputs, report and plots."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
import os
import time
from pathlib import Path
from typing import Any

from rich.table import Table

from curate.corpus import read_corpus
from curate.core.errors import CurateError
from curate.core.executor import Executor
from curate.core.runner import open_run
from curate.filter.base import FilterContext
from curate.filter.recipe import load_recipe
from curate.filter.run import FILTERED, REJECTED, REPORT, run_steps, write_outputs
from curate.llm.backend import LLMOptions, llm_client
from curate.progress import console
from curate.core.records import Record, first_of_each_id, read_records

DUPLICATE_ID = "duplicate-id"  # a record id seen before: the first copy is the one filtered


def _teacher_factory(cfg: dict[str, Any], executor: Executor | None = None):
    def build():
        from curate.embed.teacher import Teacher

        return Teacher(model=cfg.get("model"), query_prompt=cfg.get("query_prompt"), doc_prompt=cfg.get("doc_prompt"),
                       executor=executor)

    return build


def _judge_factory(base: LLMOptions, out_dir: Path):
    """Judges run on the run's backend unless their config names another server and model."""

    def open_judge(judge: dict[str, Any] | None = None):
        opts = base
        if judge:
            urls = judge.get("base_url") or judge.get("base_urls") or ()
            urls = (urls,) if isinstance(urls, str) else tuple(urls)
            key_env = judge.get("api_key_env")
            opts = dataclasses.replace(
                base,
                base_urls=urls or base.base_urls,
                model=judge.get("model") or base.model,
                model_path=judge.get("model_path") or base.model_path,
                api_key=os.environ.get(key_env) if key_env else base.api_key,
            )
        return llm_client(opts, out_dir)

    return open_judge


@dataclass(kw_only=True)
class FilterOptions:
    inp: str  # records (JSONL)
    out: str
    recipe: str = "default"  # a shipped recipe name or a recipe YAML file
    teacher: str | None = None  # overrides the recipe's teacher model
    query_prompt: str | None = None
    doc_prompt: str | None = None
    corpus: str | None = None  # real documents added to the teacher's ranking pool
    llm: LLMOptions = field(default_factory=LLMOptions)  # the judges' backend
    executor: Executor = field(default_factory=Executor)  # where per-record (map) steps run
    plots: bool = True  # the teacher-score plots (when a step scored the records)


def filter_main(opts: FilterOptions, quiet: bool = False) -> dict[str, Any]:
    """Run the recipe over the records, write the outputs, print and return the report."""
    in_path, out_dir, recipe_name = Path(opts.inp), Path(opts.out), opts.recipe
    teacher, query_prompt, doc_prompt, llm_opts = opts.teacher, opts.query_prompt, opts.doc_prompt, opts.llm
    corpus_path = Path(opts.corpus) if opts.corpus else None
    started = time.perf_counter()
    recipe = load_recipe(recipe_name)
    if corpus_path is None and any(step.name == "round_trip" for step in recipe.steps):
        from curate.filter.round_trip import NO_CORPUS

        raise CurateError(NO_CORPUS)  # before any step runs or any model loads
    records = read_records(in_path)
    if not records:
        raise CurateError(f"{in_path}: no records")
    params = {"recipe": recipe.name, "steps": [{"step": c.name, **c.params} for c in recipe.steps],
              "teacher": teacher, "query_prompt": query_prompt, "doc_prompt": doc_prompt,
              "executor": {"kind": opts.executor.kind, "shards": opts.executor.shards}}
    with open_run("filter", out_dir, params, [in_path, recipe.path, corpus_path],
                  writes=(FILTERED, REJECTED, REPORT)) as run:
        report = _filter(records, in_path, out_dir, run, recipe, teacher, query_prompt, doc_prompt, corpus_path,
                         llm_opts, started, opts.executor, opts.plots)
    if not quiet:
        _print_report(report, out_dir)
    return report


def _filter(records, in_path: Path, out_dir: Path, run, recipe, teacher, query_prompt, doc_prompt, corpus_path,
            llm_opts: LLMOptions, started: float, executor: Executor, plots: bool = True) -> dict[str, Any]:
    corpus = [text for _, text in read_corpus(corpus_path)] if corpus_path else []
    teacher_cfg = dict(recipe.teacher)
    for key, value in (("model", teacher), ("query_prompt", query_prompt), ("doc_prompt", doc_prompt)):
        if value is not None:
            teacher_cfg[key] = value
    ctx = FilterContext(out_dir=out_dir, executor=executor, teacher_factory=_teacher_factory(teacher_cfg, executor),
                        llm_factory=_judge_factory(llm_opts, out_dir), corpus=corpus)
    unique, dup_row = _first_copies(records, ctx)
    kept, rows = run_steps(unique, recipe, ctx, executor)
    rows = dup_row + rows
    if ctx._teacher is not None:
        ctx._teacher.close()  # free any encoding workers
    written = []
    if plots and any(r.teacher is not None for r in unique):
        from curate.filter.plots import write_plots

        written = [str(out_dir / p.relative_to(run.dir)) for p in write_plots(unique, run.dir)]
    report = {
        "input": str(in_path),
        "recipe": {"name": recipe.name, "path": str(recipe.path)},
        "records_in": len(records),
        "records_kept": len(kept),
        "negatives_in": sum(len(r.negatives) for r in records),
        "negatives_kept": sum(len(r.negatives) for r in kept),
        "teacher": _teacher_stats(ctx, teacher_cfg),
        "steps": rows,
        "plots": written,
        "outputs": {"filtered": FILTERED, "rejected": REJECTED},
        "wall_seconds": round(time.perf_counter() - started, 2),
    }
    write_outputs(run, kept, ctx, report)
    run.counts.update({"records_in": report["records_in"], "records_kept": report["records_kept"],
                       "negatives_in": report["negatives_in"], "negatives_kept": report["negatives_kept"],
                       "dropped": {row["step"]: {**row["records_dropped"], **row["negatives_dropped"]}
                                   for row in report["steps"]}})
    return report


def _first_copies(records: list[Record], ctx: FilterContext) -> tuple[list[Record], list[dict[str, Any]]]:
    """The first record of each id, the others logged in ``rejected.jsonl`` (``duplicate-id``)
    and, when there are any, a report row of their own before the recipe's steps."""
    unique, repeats = first_of_each_id(records)
    if not repeats:
        return unique, []
    first = {r.id: r for r in unique}
    ctx.step_name = DUPLICATE_ID
    for rec in repeats:
        ctx.reject(rec, DUPLICATE_ID, {"same_as_first": rec.to_dict() == first[rec.id].to_dict()})
    negs_in = sum(len(r.negatives) for r in records)
    negs_kept = sum(len(r.negatives) for r in unique)
    return unique, [{"step": DUPLICATE_ID, "params": {}, "records_in": len(records), "records_kept": len(unique),
                     "records_dropped": {DUPLICATE_ID: len(repeats)}, "negatives_in": negs_in,
                     "negatives_kept": negs_kept, "negatives_dropped": {}, "seconds": 0.0}]


def _teacher_stats(ctx: FilterContext, cfg: dict[str, Any]) -> dict[str, Any] | None:
    t = ctx._teacher
    if t is None:
        return None
    return {"model": getattr(t, "model_id", cfg.get("model")), "encoded": getattr(t, "encoded", None),
            "cache_hits": getattr(t, "cache_hits", None)}


def _print_report(report: dict[str, Any], out_dir: Path) -> None:
    table = Table(title=f"filter ({report['recipe']['name']}): {report['records_kept']}/{report['records_in']} records, "
                        f"{report['negatives_kept']}/{report['negatives_in']} negatives kept", title_justify="left")
    for col in ("step", "records in", "kept", "records dropped", "negatives dropped", "s"):
        table.add_column(col, overflow="fold", no_wrap=col not in ("records dropped", "negatives dropped"))
    for row in report["steps"]:
        fmt = lambda d: "\n".join(f"{k}: {v}" for k, v in d.items()) or "-"  # noqa: E731
        table.add_row(row["step"], str(row["records_in"]), str(row["records_kept"]), fmt(row["records_dropped"]),
                      fmt(row["negatives_dropped"]), f"{row['seconds']:.1f}")
    console.print(table)
    t = report["teacher"]
    if t:
        console.print(f"teacher {t['model']}: {t['encoded']} texts encoded, {t['cache_hits']} from cache")
    console.print(f"wrote {out_dir / FILTERED}, {out_dir / REJECTED}, {out_dir / REPORT}")
