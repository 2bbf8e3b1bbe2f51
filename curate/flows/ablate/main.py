"""``curate ablate``: every arm x seed trained and evaluated, resumable, one report.

Layout of ``--out``:

    queries/    the training queries (qrels file)
    generated/ mined/ filtered/ exports/   each stage's run, in a folder named by what made it
    st/         sentence-transformers' mined sets
    runs/KEY/seed-S.json   one finished run (metrics, training numbers, the options it ran with),
                           KEY a hash of the arm's options with every default filled in  <- resume reads these
                           (a run whose export is byte for byte one a finished run of its seed
                           trained on takes that result: ``same_data_as``)
    models/     the model being trained (removed after its evaluation unless keep_models)
    ablate_report.json, ablate.png

A run's result is written only after its evaluation, atomically, so a killed grid
continues with the runs that have no result yet.
"""

from __future__ import annotations

import functools
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curate.flows.ablate import arms as data
from curate.flows.ablate import report as rep
from curate.flows.ablate.grid import PAIRS, Arm, Grid, load_grid
from curate.train.fit import fine_tune
from curate.core.errors import CurateError
from curate.core.executor import Executor, map_unordered
from curate.core.hashing import value_digest
from curate.core.jsonl import atomic_write_json

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
    keep_models: bool = field(default=False, metadata={"help": "Keep every fine-tuned model under OUT/.../models."})
    report_only: bool = field(default=False, metadata={  # gather the finished runs; train nothing
        "flag": "--report", "help": "Only gather the runs finished so far; train nothing."})
    # where the runs train (Ray: several at once, one GPU each)
    executor: Executor | None = field(default=None, metadata={
        "help_vars": {"what": "each arm's training", "unit": "runs"}})
    say: Any = field(default=None, repr=False, metadata={"cli": False})


def _evaluate(grid: Grid, model: str | None) -> dict[str, Any]:
    from curate.evaluate.main import EvalOptions, run_eval

    report = run_eval(EvalOptions(data=grid.eval_data, split=grid.eval_split, model=model, light=grid.light))
    return {"metrics": report["metrics"], "queries": report["queries"], "docs": report["docs"],
            "precision": report["model"]["precision"], "eval_s": report["seconds"]["total"]}


def _rows(grid: Grid, arm: Arm, seed: int, work: Path, qrels: Path | None):
    """The training rows of one arm for one seed, whether they are read in file order, and the
    digest of the export file they come from (None for sentence-transformers' sets)."""
    import datasets

    if arm.kind == "st":
        return data.st_dataset(grid, arm, qrels, work), False, None
    records = data.arm_records(grid, arm, qrels, work)
    folder = data.curate_export(grid, arm, records, seed, work)
    files = data.train_files(folder)
    if not files:
        raise CurateError(f"arm '{arm.name}': the export has no training rows ({folder})")
    return datasets.load_dataset("parquet", data_files=files, split="train"), True, data.data_digest(files)


def _data_of(grid: Grid, work: Path, qrels: Path | None, result: dict[str, Any], path: Path) -> str | None:
    """The digest of the export a finished curate run trained on: recorded, or (a run from before
    it was recorded) read from the export folder its options name, when its files were written
    before the result (a re-filed result, or files written since, may hold other bytes)."""
    recorded = (result.get("training") or {}).get("data_sha256")
    if recorded or result.get("kind") != "curate" or result.get("refiled_from"):
        return recorded
    options = result.get("options") or {}
    try:
        arm = Arm("earlier", mine=dict(options["mine"] or {}), filter=options.get("filter"),
                  export=dict(options["export"]), generate=options.get("generate"), mined=options["mine"] is not None)
        folder = data.export_folder(grid, arm, data.records_path(grid, arm, qrels, work), result["seed"], work)
    except (KeyError, TypeError, ValueError, AttributeError):  # options of an older curate, or no qrels
        return None
    files = data.train_files(folder)
    try:
        if not files or max(Path(f).stat().st_mtime for f in files) > path.stat().st_mtime:
            return None
        return data.data_digest(files)
    except OSError:  # a file the export's report lists is gone
        return None


def same_data_run(grid: Grid, work: Path, qrels: Path | None, seed: int, digest: str,
                  training: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """A finished run of this seed that trained on the same bytes the same way (``training``: the
    arm's non-default ``Training`` keys): its model would be this one."""
    for path in sorted((work / "runs").glob(f"*/seed-{seed}.json")):
        try:
            result = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if (result.get("options") or {}).get("train", {}) != (training or {}):
            continue
        if isinstance(result.get("metrics"), dict) and _data_of(grid, work, qrels, result, path) == digest:
            return {**result, "key": path.parent.name}
    return None


def run_one(grid: Grid, arm: Arm, seed: int, work: Path, qrels: Path | None, keep_model: bool) -> dict[str, Any]:
    started = time.perf_counter()
    result: dict[str, Any] = {"arm": arm.name, "kind": arm.kind, "seed": seed}
    if arm.kind == "base":
        result.update(_evaluate(grid, grid.student))
    else:
        rows, in_order, digest = _rows(grid, arm, seed, work, qrels)
        twin = (same_data_run(grid, work, qrels, seed, digest, arm.training.changed())
                if digest and not keep_model else None)
        if twin is not None:  # the same export file, seed and budget: the same training, already done
            result.update({k: twin[k] for k in ("training", "metrics", "queries", "docs", "precision", "eval_s")
                           if k in twin})
            result["training"] = {**result.get("training", {}), "data_sha256": digest}
            result["same_data_as"] = {"arm": twin.get("arm"), "key": twin["key"]}
            result["wall_s"] = round(time.perf_counter() - started, 1)
            return result
        model_dir = work / "models" / f"{arm.name}-seed{seed}"
        shutil.rmtree(model_dir, ignore_errors=True)
        trained = fine_tune(grid.student, rows, grid.budget, seed, in_order, model_dir, arm.training, guide(grid, arm))
        result["training"] = {**trained, **({"data_sha256": digest} if digest else {})}
        result.update(_evaluate(grid, str(model_dir)))
        if not keep_model:
            shutil.rmtree(model_dir, ignore_errors=True)
    result["wall_s"] = round(time.perf_counter() - started, 1)
    return result


def guide(grid: Grid, arm: Arm) -> str | None:
    """The teacher a masked loss consults: the arm's first mining teacher, else the grid's student
    (mining's own default teacher is the bundled MiniLM, the default student too)."""
    teachers = list(arm.mine.get("teachers") or ())
    return teachers[0] if teachers else grid.student


def resolved(arm: Arm) -> dict[str, Any]:
    """What an arm really runs, every default filled in from the stages' options (its ``train``
    only where it differs from the default, so arms from before it keep their keys)."""
    train = arm.training.changed() if arm.kind != "base" else {}
    return {**_made(arm), **({"train": train} if train else {})}


def _made(arm: Arm) -> dict[str, Any]:
    """What makes an arm's rows, every default filled in from the stages' options."""
    from dataclasses import asdict

    from curate.export.main import ExportOptions
    from curate.mine.main import MineOptions

    if arm.kind == "base":
        return {"kind": "base"}
    if arm.kind == "st":
        return {"kind": "st", "st": {"positives": "all", "rows": "one", **arm.st}}
    skip = {"out", "inputs", "executor"}  # where work runs never changes what it makes
    mine = {k: v for k, v in asdict(MineOptions(out="", **arm.mine)).items() if k not in skip}
    export = {k: v for k, v in asdict(ExportOptions(inputs=(), out="", **arm.export)).items() if k not in skip}
    source = {} if arm.generate is None else {"generate": arm.generate}  # from the corpus, not the split's queries
    recipe = None if arm.filter is None else data.recipe_key(arm.filter)  # what it does, not its name
    return {"kind": "curate", **source, "mine": mine if arm.mined else None, "filter": recipe, "export": export}


def _with_new_defaults(old: Any, defaults: Any) -> Any:
    """``old`` options with every key it lacks taken from ``defaults`` (nested mappings too)."""
    if not isinstance(old, dict) or not isinstance(defaults, dict):
        return old
    return {**{k: v for k, v in defaults.items() if k not in old},
            **{k: _with_new_defaults(v, defaults.get(k)) for k, v in old.items()}}


def _effective(options: Any) -> Any:
    """Options as the export reads them: under a level curriculum (mgh, fixed:N, ...) an unset
    ``negatives_per_row``, and ``auto``, have always meant one negative a row, so the spellings
    are one run."""
    export = options.get("export") if isinstance(options, dict) else None
    if not isinstance(export, dict) or export.get("negatives_per_row") not in (None, "auto"):
        return options
    if str(export.get("curriculum", "none")) in ("none", "ordered"):
        return options
    return {**options, "export": {**export, "negatives_per_row": 1}}


def refile_older_results(work: Path, wanted: dict[str, dict[str, Any]],
                         defaults: dict[str, Any] | None = None) -> int:
    """A result made before an option existed was made with that option's default (options are
    added with the old behaviour as their default): file it under today's key too. A result whose
    recorded options differ in any value it has is not touched. Returns how many were re-filed."""
    from curate.core.jsonl import atomic_write_json

    def stored(v):  # as results store them: lists, not tuples
        return json.loads(json.dumps(v, default=str))

    wanted = {k: stored(v) for k, v in wanted.items()}
    defaults = stored(defaults if defaults is not None else resolved(Arm("defaults")))
    moved = 0
    for path in sorted((work / "runs").glob("*/seed-*.json")):
        try:
            result = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        old = result.get("options")
        for key, now in wanted.items():
            if old == now or _with_new_defaults(_effective(old), defaults) != _effective(now):
                continue
            target = work / "runs" / key / path.name
            if not target.exists():
                atomic_write_json(target, {**result, "options": now, "refiled_from": path.parent.name})
                moved += 1
    return moved


def _result_path(work: Path, key: str, seed: int) -> Path:
    """Results are filed by what the arm runs, not by its name: arms that come to the same options
    share them, and a result never outlives a change of the arm's options or of curate's defaults."""
    return work / "runs" / key / f"seed-{seed}.json"


def _finished(work: Path, grid: Grid, keys: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    from curate.evaluate.store import read_json

    out: dict[str, list[dict[str, Any]]] = {}
    for arm in grid.arms:
        seeds = grid.seeds[:1] if arm.kind == "base" else grid.seeds
        found = [read_json(_result_path(work, keys[arm.name], s)) for s in seeds]
        out[arm.name] = [{**r, "arm": arm.name} for r in found if r and isinstance(r.get("metrics"), dict)]
    return out


def _budget_key(grid: Grid) -> dict[str, Any]:
    """What makes finished runs comparable: a result made under another budget is not reused."""
    from dataclasses import asdict

    held_back = {"shown_positives": grid.shown_positives} if grid.shown_positives else {}  # older keys unchanged
    held_back.update({"holdout": grid.holdout} if grid.holdout else {})
    return {"budget": asdict(grid.budget), "student": grid.student, "queries": grid.queries, **held_back,
            "data": grid.data, "split": grid.split, "eval": [grid.eval_data, grid.eval_split, grid.light]}


def _quiet() -> None:
    """The libraries' progress bars (datasets, sentence-transformers) would bury ablate's own lines;
    the stages ablate runs print no summary (``run_stage(quiet=True)``) and draw no bar (its
    training keeps one)."""
    import os

    from curate.core.progress import quiet_bars

    quiet_bars()
    os.environ.setdefault("TQDM_DISABLE", "1")
    try:
        import datasets

        datasets.disable_progress_bars()
    except ImportError:
        pass


def run_ablate(opts: AblateOptions) -> dict[str, Any]:
    say = opts.say or (lambda msg: None)
    _quiet()
    grid = load_grid(opts.grid, opts.data)
    if opts.seeds:
        grid.seeds = list(dict.fromkeys(opts.seeds))
    if opts.steps is not None:
        if opts.steps < 1:
            raise CurateError("--steps must be at least 1")
        grid.budget.steps = opts.steps
    if opts.light is not None:
        grid.light = opts.light
    if opts.queries is not None:
        grid.queries = opts.queries or None
    if opts.max_seq_length is not None:
        grid.budget.max_seq_length = opts.max_seq_length
    unknown = [a for a in opts.arms if a not in {arm.name for arm in grid.arms}]
    if unknown:
        raise CurateError(f"--arm {unknown[0]!r} is not in {grid.path} "
                          f"(arms: {', '.join(a.name for a in grid.arms)})")
    work = Path(opts.out) / f"grid-{value_digest(_budget_key(grid), length=data.KEY)}"
    work.mkdir(parents=True, exist_ok=True)
    if grid.holdout:  # evaluate on the split's held-out queries only
        grid.eval_data = data.holdout_data(grid, work)
    # corpus arms read no query of the split: a grid of only those needs no training qrels
    needs_queries = any(a.kind == "st" or (a.kind == "curate" and (a.generate is None or a.generate["queries"] == PAIRS))
                        for a in grid.arms)
    qrels = data.training_qrels(grid, work) if needs_queries else None

    keys = {arm.name: value_digest(resolved(arm), length=data.KEY) for arm in grid.arms}
    refile_older_results(work, {keys[a.name]: resolved(a) for a in grid.arms})
    # seed by seed, so that a grid stopped half-way has its arms at the same number of seeds
    todo: dict[tuple[str, int], list[Arm]] = {}
    for s in grid.seeds:
        for arm in grid.arms:
            if (opts.arms and arm.name not in opts.arms) or (arm.kind == "base" and s != grid.seeds[0]):
                continue
            if not opts.report_only and not _result_path(work, keys[arm.name], s).is_file():
                todo.setdefault((keys[arm.name], s), []).append(arm)
    say(f"{len(todo)} run(s) to do in {work}")
    runs = [(arms, seed, key) for (key, seed), arms in todo.items()]
    job = functools.partial(_run_cell, grid, work, qrels, opts.keep_models)
    executor = opts.executor or Executor()

    def file(run, result):  # each run filed as it finishes: a stopped grid keeps it
        arms, seed, key = run
        atomic_write_json(_result_path(work, key, seed), result)
        say(f"  {', '.join(a.name for a in arms)} seed {seed}: ndcg@10 {result['metrics']['ndcg@10']:.4f} "
            f"({result['wall_s']:.0f} s)")

    # the untrained model is only evaluated: it stays here, as does everything without Ray
    on_ray = [executor.kind == "ray" and arms[0].kind != "base" for arms, _, _ in runs]
    sent = [run for run, away in zip(runs, on_ray) if away]
    for n, (run, away) in enumerate(zip(runs, on_ray), 1):
        if not away:
            arms, seed, _ = run
            say(f"[{n}/{len(runs)}] arm{'s' if len(arms) > 1 else ''} {', '.join(a.name for a in arms)}, seed {seed}")
            file(run, job(run))
    if sent:
        _prepare(grid, [(arms[0], seed) for arms, seed, _ in sent], work, qrels)
        say(f"training {len(sent)} run(s) on Ray workers, {executor.workers} at a time")
        for i, result in map_unordered(job, sent, executor):
            file(sent[i], result)
    return write_report(grid, work, Path(opts.out))


def _run_cell(grid: Grid, work: Path, qrels: Path | None, keep_model: bool, run) -> dict[str, Any]:
    """One arm x seed, trained and evaluated (in this process or on a Ray worker)."""
    arms, seed, _ = run
    _quiet()
    return {**run_one(grid, arms[0], seed, work, qrels, keep_model), "options": resolved(arms[0])}


def _prepare(grid: Grid, runs: list[tuple[Arm, int]], work: Path, qrels: Path | None) -> None:
    """What the runs share, made here before their training goes to workers: mined sets,
    exports, sentence-transformers' sets and the light evaluation set are each made once, so
    two workers never make the same one at once."""
    for arm, seed in runs:
        _rows(grid, arm, seed, work, qrels)
    if grid.light:
        from curate.evaluate.main import EvalOptions, prepare_light_set

        prepare_light_set(EvalOptions(data=grid.eval_data, split=grid.eval_split, light=True))


def write_report(grid: Grid, work: Path, out: Path) -> dict[str, Any]:
    from dataclasses import asdict

    keys = {arm.name: value_digest(resolved(arm), length=data.KEY) for arm in grid.arms}
    results = _finished(work, grid, keys)
    rows = rep.summarise(results, grid.baselines)
    done = [r for r in rows if r["kind"] == "st" and r["mean"] is not None]
    best = max(done, key=lambda r: r["mean"])["arm"] if done else None
    title = (f"{Path(grid.data).name} {grid.split} -> {Path(grid.eval_data).name} {grid.eval_split}"
             f"{' (light)' if grid.light else ''}: {grid.budget.steps} steps x {grid.budget.batch_size}, "
             f"{len(grid.seeds)} seed(s)")
    chart = rep.write_chart(rows, out / CHART, title)
    report = {"grid": str(grid.path), "title": title, "work": str(work), **_budget_key(grid),
              "seeds": grid.seeds, "metric": rep.METRIC, "best_baseline": best,
              "arms": {a.name: {**asdict(a), "key": keys[a.name],
                                "same_as": [b.name for b in grid.arms if b is not a and keys[b.name] == keys[a.name]]}
                       for a in grid.arms},
              "summary": rows, "runs": results,
              "chart": chart.name if chart else None}
    atomic_write_json(out / REPORT, report)
    return report


def ablate_main(opts: AblateOptions) -> dict[str, Any]:
    from curate.core.progress import console

    opts.say = opts.say or (lambda msg: console.print(f"curate ablate: {msg}"))
    report = run_ablate(opts)
    rep.print_table(report["summary"], report["best_baseline"])
    console.print(f"wrote {Path(opts.out) / REPORT}" + (f" and {Path(opts.out) / CHART}" if report["chart"] else ""))
    from curate.report import write_report as write_page

    console.print(f"report: {write_page(opts.out)}", soft_wrap=True)  # the table and plot as one page
    return report
