"""``curate ablate``: every arm x seed trained and evaluated, resumable, one report.

Each cell (an arm and a seed) is a list of stages (``curate.flows.ablate.arms``), each run by the
one stage runner in ``OUT/<stage>/<fingerprint:12>`` (``curate.core.stage.placed``): ``queries``,
``mine`` / ``generate`` / ``filter``, ``export`` (or ``st``, the baseline's rows), ``fit`` and
``eval``. A stage's folder is named by what it reads and is asked, so arms with equal options,
or whose exports came out byte for byte the same, share their ``fit``; a renamed arm keeps its
results; a killed grid resumes each cell at its first stage not done. Besides the stages:

    llm.sqlite, st-embeddings/   caches (the LLM's answers, the baseline miner's vectors)
    ablate_report.json, ablate.png

A fitted model is removed once scored (``--keep-models`` keeps it); its fit stays done. Results
of grids run before cells were stages are read once more (``curate.flows.ablate.legacy``).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError
from curate.core.executor import Executor, map_unordered
from curate.core.jsonl import atomic_write_json
from curate.core.stage import placed
from curate.flows.ablate import report as rep
from curate.flows.ablate.arms import cell_steps
from curate.flows.ablate.cells import drop_model, result, run_steps, walk
from curate.flows.ablate.grid import Arm, Grid, load_grid
from curate.flows.ablate.legacy import legacy_results

REPORT = "ablate_report.json"
CHART = "ablate.png"


@dataclass
class AblateOptions:
    grid: str = field(metadata={"argument": True, "path": "file"})
    out: str = field(metadata={
        "path": "dir", "help": "Folder for the runs, ablate_report.json and ablate.png (re-run to resume)."})
    data: str | None = field(default=None, metadata={  # override the grid's data (and eval data)
        "path": "dir", "help": "A BEIR folder to train and evaluate on instead of the grid's (its own copy of the "
                               "same collection: `curate data get NAME`)."})
    seeds: tuple[int, ...] = field(default=(), metadata={  # override the grid's seeds
        "flag": "--seed", "help": "Seeds to run instead of the grid's (repeatable)."})
    steps: int | None = field(default=None, metadata={  # override the grid's budget
        "min": 1, "help": "Training steps instead of the grid's budget."})
    # override the grid's number of training queries (0: all)
    queries: int | None = field(default=None, metadata={
        "min": 0,
        "help": "Train on this many of the split's queries (a seeded subset, the same for every arm; 0: all)."})
    max_seq_length: int | None = field(default=None, metadata={  # override the grid's training length
        "min": 8, "help": "Tokens per text while training, instead of the grid's budget."})
    # run only these arms (the report still shows every finished one)
    arms: tuple[str, ...] = field(default=(), metadata={
        "flag": "--arm", "help": "Run only this arm (repeatable); the report shows all finished."})
    light: bool | None = field(default=None, metadata={  # override the grid's evaluation mode
        "flag": "--light/--full",
        "help": "Evaluate on Linq's light set or the full split (default: as the grid says)."})
    keep_models: bool = field(default=False, metadata={"help": "Keep every fine-tuned model (in its fit folder, OUT/fit/*/model)."})
    report_only: bool = field(default=False, metadata={  # gather the finished runs; train nothing
        "flag": "--report", "help": "Only gather the runs finished so far; train nothing."})
    # where the runs train (Ray: several at once, one GPU each)
    executor: Executor | None = field(default=None, metadata={
        "help_vars": {"what": "each arm's training", "unit": "runs"}})
    say: Any = field(default=None, repr=False, metadata={"cli": False})


@contextmanager
def _quiet() -> Iterator[None]:
    """The libraries' progress bars (datasets, sentence-transformers) would bury ablate's own lines;
    the stages ablate runs print no summary (``run_stage(quiet=True)``) and draw no bar (its
    training keeps one). All as they were afterwards: a caller that goes on in the same process
    (``curate.api``, a notebook, the tests) keeps its bars."""
    import os

    from curate.core.progress import quiet_bars

    before, tqdm = quiet_bars(), os.environ.get("TQDM_DISABLE")
    os.environ.setdefault("TQDM_DISABLE", "1")
    try:
        import datasets
    except ImportError:
        datasets = None
    shown = datasets is not None and datasets.is_progress_bar_enabled()
    if shown:
        datasets.disable_progress_bars()
    try:
        yield
    finally:
        quiet_bars(before)
        if tqdm is None:
            os.environ.pop("TQDM_DISABLE", None)
        if shown:
            datasets.enable_progress_bars()


def configured(opts: AblateOptions) -> Grid:
    """The grid file with the command line's overrides."""
    grid = load_grid(opts.grid, opts.data)
    if opts.seeds:
        grid.seeds = list(dict.fromkeys(opts.seeds))
    if opts.steps is not None:
        if opts.steps < 1:
            raise CurateError("--steps must be at least 1")
        grid.budget.steps = opts.steps
    if opts.light is not None:
        grid.light = opts.light
    if grid.light:
        from curate.evaluate.main import resolve_precision

        grid.precision = resolve_precision("auto", light=True, device=None)
    if opts.queries is not None:
        grid.queries = opts.queries or None
    if opts.max_seq_length is not None:
        grid.budget.max_seq_length = opts.max_seq_length
    unknown = [a for a in opts.arms if a not in {arm.name for arm in grid.arms}]
    if unknown:
        raise CurateError(f"--arm {unknown[0]!r} is not in {grid.path} "
                          f"(arms: {', '.join(a.name for a in grid.arms)})")
    return grid


def _seeds(grid: Grid, arm: Arm) -> list[int]:
    return grid.seeds[:1] if arm.kind == "base" else grid.seeds  # the untrained model is scored once


@dataclass
class Job:
    """Cells whose trained (or scored) stage is one folder: one training for all of them."""

    arms: list[Arm]
    seed: int


def _jobs(grid: Grid, out: Path, opts: AblateOptions, legacy: dict[tuple[str, int], Any]) -> list[Job]:
    """The cells still to train, their data made here first (mined sets, exports, the baseline's
    rows: each once, so two workers never make the same one), grouped by their ``fit`` folder.
    Seed by seed, so a grid stopped half-way has its arms at the same number of seeds."""
    jobs: dict[str, Job] = {}
    for seed in grid.seeds:
        for arm in grid.arms:
            if (opts.arms and arm.name not in opts.arms) or seed not in _seeds(grid, arm) \
                    or (arm.name, seed) in legacy:
                continue
            steps = cell_steps(grid, arm, seed, out)
            trained = next((s for s in steps if s.label == "fit"), steps[-1])
            found = run_steps(steps, out, upto=trained.label)
            where = placed(trained.stage, trained.options(found), out).out
            if where in jobs:
                jobs[where].arms.append(arm)
            elif walk(steps, out)[1] is not None:
                jobs[where] = Job([arm], seed)
    return list(jobs.values())


def _run_job(grid: Grid, out: Path, keep_models: bool, job: Job) -> dict[str, Any]:
    """One cell's remaining stages (its fit and eval), here or on a Ray worker."""
    started = time.perf_counter()
    with _quiet():
        found = run_steps(cell_steps(grid, job.arms[0], job.seed, out), out)
    done = result(found)
    if not keep_models:
        drop_model(found)
    return {**done, "wall_s": round(time.perf_counter() - started, 1)}


def run_ablate(opts: AblateOptions) -> dict[str, Any]:
    with _quiet():
        return _ablate(opts)


def _ablate(opts: AblateOptions) -> dict[str, Any]:
    say = opts.say or (lambda msg: None)
    grid = configured(opts)
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    legacy = legacy_results(out, grid)
    jobs = [] if opts.report_only else _jobs(grid, out, opts, legacy)
    say(f"{len(jobs)} run(s) to do in {out}")
    executor = opts.executor or Executor()
    run = functools.partial(_run_job, grid, out, opts.keep_models)

    def said(job: Job, done: dict[str, Any]) -> None:
        say(f"  {', '.join(a.name for a in job.arms)} seed {job.seed}: ndcg@10 {done['metrics']['ndcg@10']:.4f} "
            f"({done['wall_s']:.0f} s)")

    # the untrained model is only scored: it stays here, as does everything without Ray
    away = [job for job in jobs if executor.kind == "ray" and job.arms[0].kind != "base"]
    here = [job for job in jobs if job not in away]
    for n, job in enumerate(here, 1):
        say(f"[{n}/{len(jobs)}] arm{'s' if len(job.arms) > 1 else ''} {', '.join(a.name for a in job.arms)}, "
            f"seed {job.seed}")
        said(job, run(job))
    if away:
        if grid.light:  # one light set, made here, for every worker
            from curate.evaluate.main import EvalOptions, prepare_light_set

            prepare_light_set(EvalOptions(data=grid.eval_data, split=grid.eval_split, light=True))
        say(f"training {len(away)} run(s) on Ray workers, {executor.workers} at a time")
        for i, done in map_unordered(run, away, executor):
            said(away[i], done)
    return write_report(grid, out, legacy)


def finished(grid: Grid, out: Path, legacy: dict[tuple[str, int], Any]) -> dict[str, list[dict[str, Any]]]:
    """Every finished cell's figures by arm (nothing runs): the cell's stages, else an old result."""
    results: dict[str, list[dict[str, Any]]] = {}
    for arm in grid.arms:
        results[arm.name] = []
        for seed in _seeds(grid, arm):
            found, undone = walk(cell_steps(grid, arm, seed, out), out)
            done = (result(found) if undone is None else None) or legacy.get((arm.name, seed))
            if done:
                results[arm.name].append({**done, "arm": arm.name, "kind": arm.kind, "seed": seed})
    return results


def _trained_in(runs: list[dict[str, Any]]) -> str | None:
    """The folder an arm's first seed was trained (or scored) in."""
    stages = (runs[0].get("stages") or {}) if runs else {}
    return stages.get("fit") or stages.get("eval")


def write_report(grid: Grid, out: Path, legacy: dict[tuple[str, int], Any] | None = None) -> dict[str, Any]:
    results = finished(grid, out, legacy_results(out, grid) if legacy is None else legacy)
    rows = rep.summarise(results, grid.baselines)
    done = [r for r in rows if r["kind"] == "st" and r["mean"] is not None]
    best = max(done, key=lambda r: r["mean"])["arm"] if done else None
    title = (f"{Path(grid.data).name} {grid.split} -> {Path(grid.eval_data).name} {grid.eval_split}"
             f"{' (light)' if grid.light else ''}: {grid.budget.steps} steps x {grid.budget.batch_size}, "
             f"{len(grid.seeds)} seed(s)")
    chart = rep.write_chart(rows, out / CHART, title)
    trained = {a.name: _trained_in(results[a.name]) for a in grid.arms}
    report = {"grid": str(grid.path), "title": title, "out": str(out), "budget": asdict(grid.budget),
              "student": grid.student, "queries": grid.queries, "shown_positives": grid.shown_positives,
              "holdout": grid.holdout, "data": grid.data, "split": grid.split,
              "eval": [grid.eval_data, grid.eval_split, grid.light], "seeds": grid.seeds, "metric": rep.METRIC,
              "best_baseline": best,
              "arms": {a.name: {**asdict(a), "same_as": [b.name for b in grid.arms if b is not a and trained[a.name]
                                                         and trained[b.name] == trained[a.name]]}
                       for a in grid.arms},
              "summary": rows, "runs": results, "chart": chart.name if chart else None,
              "precisions": rep.precisions(results)}
    atomic_write_json(out / REPORT, report)
    return report


def ablate_main(opts: AblateOptions) -> dict[str, Any]:
    from curate.core.progress import console

    opts.say = opts.say or (lambda msg: console.print(f"curate ablate: {msg}"))
    report = run_ablate(opts)
    rep.print_table(report["summary"], report["best_baseline"])
    if warning := rep.mixed_precision_warning(report["precisions"]):
        opts.say(warning)
    console.print(f"wrote {Path(opts.out) / REPORT}" + (f" and {Path(opts.out) / CHART}" if report["chart"] else ""))
    from curate.report import write_report as write_page

    console.print(f"report: {write_page(opts.out)}", soft_wrap=True)  # the table and plot as one page
    return report
