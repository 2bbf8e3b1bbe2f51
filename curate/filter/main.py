"""``curate filter``: read records, run the recipe, write outputs, report and plots."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
import os
import time
from pathlib import Path
from typing import Any

from rich.table import Table

from curate.datasets.corpus import read_corpus
from curate.core.errors import CurateError
from curate.core.executor import Executor
from curate.filter.base import FilterContext
from curate.filter.recipe import load_recipe, shipped_recipes
from curate.core.stage import REPORT, STAGES, FunnelRow, Stage, llm_usage
from curate.filter.run import FILTERED, REJECTED, run_steps, write_outputs
from curate.llm.options import LLMOptions
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
        from curate.llm.backend import llm_client

        return llm_client(opts, out_dir)

    return open_judge


@dataclass(kw_only=True)
class FilterOptions:
    inp: str = field(metadata={"flag": "--in", "path": "file", "help": "Records to filter (JSONL)."})
    out: str = field(metadata={"path": "dir",
                               "help": "Folder for filtered.jsonl, rejected.jsonl, report.json, run.json and plots."})
    recipe: str = field(default="default", metadata={  # a shipped recipe name or a recipe YAML file
        "help": f"A shipped recipe ({', '.join(shipped_recipes())}) or a recipe YAML file."})
    teacher: str | None = field(default=None, metadata={  # overrides the recipe's teacher model
        "help": "Teacher embedding model (sentence-transformers name or path, or openai:MODEL served at "
                "--teacher-base-url); default: the recipe's, else the bundled all-MiniLM-L6-v2."})
    query_prompt: str | None = field(default=None, metadata={
        "help": "Prefix for queries given to the teacher (e.g. 'query: ')."})
    doc_prompt: str | None = field(default=None, metadata={
        "help": "Prefix for documents given to the teacher (e.g. 'passage: ')."})
    corpus: str | None = field(default=None, metadata={  # real documents added to the teacher's ranking pool
        "path": "file",
        "help": "Real documents (JSONL with 'text', BEIR corpus.jsonl works) added to the teacher's ranking pool."})
    llm: LLMOptions = field(default_factory=LLMOptions)  # the judges' backend
    # Offered like every LLM command's options, but unused: a filter's draws follow its recipe
    # (the steps' own ``seed``), so it changes no run.
    seed: int = field(default=0, metadata={"fingerprint": False, "help": "Seed for every per-item draw."})
    prompts_dirs: tuple[str, ...] = field(default=(), metadata={
        "flag": "--prompts-dir", "path": "dir",
        "help": "Extra folder of Jinja templates for the judge steps, searched after a step's own prompt_dirs "
                "and before the shipped prompts/."})
    executor: Executor = field(default_factory=Executor, metadata={  # where per-record (map) steps run
        "help_vars": {"what": "the per-record steps (heuristics, judges, sts_gap) and the teacher's encoding",
                      "unit": "shards"}})
    plots: bool = True  # the teacher-score plots (when a step scored the records)


def check(opts: FilterOptions) -> None:
    """The recipe loads and has what its steps need, before any step runs or any model loads."""
    from curate.filter.base import STEPS

    from curate.embed.teacher import check_teachers

    for step in load_recipe(opts.recipe).steps:
        if not opts.corpus and STEPS.get(step.name).needs_corpus:
            raise CurateError(STEPS.get(step.name).needs_corpus)
    check_teachers([opts.teacher] if opts.teacher else [])


def filter_stage(opts: FilterOptions, run) -> dict[str, Any]:
    """Run the recipe over the records into ``run``'s folder, return the report."""
    in_path, out_dir = Path(opts.inp), Path(opts.out)
    started = time.perf_counter()
    recipe = load_recipe(opts.recipe)
    records = read_records(in_path)
    if not records:
        raise CurateError(f"{in_path}: no records")
    run.params["steps"] = [{"step": c.name, **c.params} for c in recipe.steps]  # what the recipe resolved to
    return _filter(opts, records, run, recipe, started)


def run_filter(opts: FilterOptions) -> dict[str, Any]:
    """Filter through the stage runner (as ``curate filter`` does, printing nothing); the report."""
    from curate.core.stage import run_stage

    return run_stage(STAGE, opts, quiet=True)[0]


def _filter(opts: FilterOptions, records: list[Record], run, recipe, started: float) -> dict[str, Any]:
    """The recipe's steps over ``records`` (read from ``opts.inp``), the outputs written, the report."""
    in_path, out_dir, executor = Path(opts.inp), Path(opts.out), opts.executor
    corpus = [text for _, text in read_corpus(Path(opts.corpus))] if opts.corpus else []
    teacher_cfg = dict(recipe.teacher)
    for key, value in (("model", opts.teacher), ("query_prompt", opts.query_prompt), ("doc_prompt", opts.doc_prompt)):
        if value is not None:
            teacher_cfg[key] = value
    llm_opts = opts.llm
    price = llm_opts.price_per_1k_tokens if llm_opts.price_per_1k_tokens is not None else recipe.price_per_1k_tokens
    ctx = FilterContext(out_dir=out_dir, executor=executor, teacher_factory=_teacher_factory(teacher_cfg, executor),
                        llm_factory=_judge_factory(llm_opts, out_dir), corpus=corpus,
                        prompt_dirs=tuple(opts.prompts_dirs), price=price)
    unique, dup_row = _first_copies(records, ctx)
    kept, rows = run_steps(unique, recipe, ctx, executor)
    rows = dup_row + rows
    if ctx.made_teacher is not None:
        ctx.made_teacher.close()  # free any encoding workers
    written = []
    if opts.plots and any(r.teacher is not None for r in unique):
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
    write_outputs(run, kept, ctx)
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
    t = ctx.made_teacher
    if t is None:
        return None
    return {"model": getattr(t, "model_id", cfg.get("model")), "encoded": getattr(t, "encoded", None),
            "cache_hits": getattr(t, "cache_hits", None)}


def summary(report: dict[str, Any], out_dir: Path) -> list[Any]:
    """What a run kept and dropped, step by step: a table, the teacher's line, where it wrote."""
    table = Table(title=f"filter ({report['recipe']['name']}): {report['records_kept']}/{report['records_in']} records, "
                        f"{report['negatives_kept']}/{report['negatives_in']} negatives kept", title_justify="left")
    for col in ("step", "records in", "kept", "records dropped", "negatives dropped", "s"):
        table.add_column(col, overflow="fold", no_wrap=col not in ("records dropped", "negatives dropped"))
    for row in report["steps"]:
        fmt = lambda d: "\n".join(f"{k}: {v}" for k, v in d.items()) or "-"  # noqa: E731
        table.add_row(row["step"], str(row["records_in"]), str(row["records_kept"]), fmt(row["records_dropped"]),
                      fmt(row["negatives_dropped"]), f"{row['seconds']:.1f}")
    lines: list[Any] = [table]
    t = report["teacher"]
    if t:
        lines.append(f"teacher {t['model']}: {t['encoded']} texts encoded, {t['cache_hits']} from cache")
    return [*lines, f"wrote {out_dir / FILTERED}, {out_dir / REJECTED}, {out_dir / REPORT}"]


EXCERPT = 60  # characters of a dropped query shown in the funnel


def funnel(report: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Each step's records in and kept, with the first record it dropped (its reason and query);
    a relabel run adds the judge's verdicts."""
    from curate.core.jsonl import read_jsonl

    queries = {obj.get("id"): obj.get("query") for _, obj in read_jsonl(Path(report["input"]))} \
        if Path(report["input"]).is_file() else {}
    examples: dict[str, dict[str, str]] = {}  # step -> the first record it dropped
    if (folder / REJECTED).is_file():
        for _, row in read_jsonl(folder / REJECTED):
            if row.get("target") == "record" and row.get("step") not in examples:
                examples[row["step"]] = {"reason": row.get("reason"), "query": _excerpt(queries.get(row.get("id")))}
                share = (row.get("detail") or {}).get("containment")  # the copy guard's score
                if share is not None:
                    examples[row["step"]]["containment"] = share
    from curate.filter.base import reason_name

    for example in examples.values():
        example["reason"] = reason_name(example["reason"])
    steps = [{"step": s["step"], "records_in": s["records_in"], "records_kept": s["records_kept"],
              "records_dropped": {reason_name(r): n for r, n in s["records_dropped"].items()},
              "example": examples.get(s["step"])} for s in report["steps"]]
    entry = {"records_in": report["records_in"], "records_kept": report["records_kept"], "steps": steps,
             "plots": [str(folder / Path(p).name) for p in report.get("plots", [])]}
    note = next((s.get("notes", {}) for s in report["steps"] if s["step"] == "relabel"), None)
    if note is not None:
        entry.update(relabel=True, records=report["records_kept"], candidates=note.get("candidates", 0),
                     verdicts=note.get("verdicts", {}), records_changed=note.get("records_changed", 0),
                     negatives_in=report["negatives_in"], negatives_kept=report["negatives_kept"])
    return entry


def present(f: dict[str, Any]) -> FunnelRow:
    from collections import Counter

    from rich.markup import escape

    if f.get("relabel"):
        verdicts = ", ".join(f"{k} {v}" for k, v in f["verdicts"].items()) or "none"
        return FunnelRow(
            lines=[("relabel", f"{f['candidates']} negatives judged: {verdicts}; {f['negatives_kept']} of "
                               f"{f['negatives_in']} negatives left, {f['records_changed']} records changed")],
            cells=[("records", "records"), ("negatives in", "negatives_in"), ("negatives kept", "negatives_kept"),
                   ("records changed", "records_changed")],
            dropped=dict(f.get("verdicts") or {}))
    lines = [("filter", f"{f['records_kept']} of {f['records_in']} records kept")]
    for s in f["steps"]:
        dropped = sum(s["records_dropped"].values())
        line = f"  {s['step']}: {s['records_kept']} of {s['records_in']} kept"
        if dropped:
            line += f", {dropped} dropped"
            if len(s["records_dropped"]) > 1:  # several reasons: each one's count, largest first
                counts = sorted(s["records_dropped"].items(), key=lambda kv: -kv[1])
                line += " (" + ", ".join(f"{escape(str(r))} {n}" for r, n in counts) + ")"
            if s["example"]:
                line += f", e.g. {escape(str(s['example']['reason']))}: \"{escape(s['example']['query'])}\""
                if s["example"].get("containment") is not None:
                    line += f" ({s['example']['containment']:.0%} of its word n-grams in its passage)"
        lines.append(("", line))
    dropped: Counter = Counter()
    for s in f["steps"]:
        dropped.update(s["records_dropped"])
    return FunnelRow(lines=lines, cells=[("records in", "records_in"), ("records kept", "records_kept")],
                     dropped=dict(dropped),
                     steps=[(s["step"], s["records_in"], s["records_kept"], s["records_dropped"]) for s in f["steps"]])


def _excerpt(text: str | None) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= EXCERPT else text[:EXCERPT - 3].rstrip() + "..."


def provenance(rep: dict[str, Any]) -> dict[str, Any]:
    """What an export's card records of a filter run: the recipe and what each step dropped."""
    return {
        "recipe": (rep.get("recipe") or {}).get("name"),
        "records_in": rep.get("records_in"), "records_kept": rep.get("records_kept"),
        "negatives_in": rep.get("negatives_in"), "negatives_kept": rep.get("negatives_kept"),
        "steps": [{"step": s.get("step"), "records_dropped": s.get("records_dropped"),
                   "negatives_dropped": s.get("negatives_dropped")} for s in rep.get("steps") or []],
    }


def _recipe_files(opts: FilterOptions) -> list[Path]:
    """The recipe file and the templates its judge steps render: an edited one is filtered again."""
    from curate.filter.base import merge_params
    from curate.filter.recipe import find_recipe
    from curate.llm.templates import template_files

    files = [find_recipe(opts.recipe)]
    try:
        recipe = load_recipe(opts.recipe)
    except CurateError:
        return files  # the stage's check says what is wrong
    for step in recipe.steps:
        params = merge_params(step.name, step.params)
        if isinstance(params.get("template"), str):
            files += template_files([params["template"]], [*(params.get("prompt_dirs") or ()), *opts.prompts_dirs])
    return list(dict.fromkeys(files))


STAGE = Stage("filter", FilterOptions, filter_stage, check=check, reads=("inp", "corpus"), also_reads=_recipe_files,
              writes={"records": FILTERED, "drops": REJECTED}, summary=summary, funnel=funnel,
              present=present, provenance=provenance, usage=lambda report: llm_usage(report, "judge_calls"),
              needs=("query", "positive"))
STAGES.register(STAGE.name, STAGE)
