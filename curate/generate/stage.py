"""``brainstorm`` and ``generate`` as Python calls: specs in, records in OUT, a summary back.

The command line is a thin layer over ``brainstorm_stage`` and ``generate_stage``; a notebook
or a pipeline calls them the same way. Both are stages the runner runs (``curate.core.stage``):
a family's brainstorm run lives in ``OUT/tasks/FAMILY`` (its tasks in ``tasks.jsonl`` there,
which generate reads and a user may edit), and generate makes the tasks it needs that way
before it plans any item. One backend (one embedded server or one set of remote servers)
serves a run. Generate plans each family in turn and then asks for every family's items in
one queue, families interleaved (``curate.generate.queue``; sharded over client processes
with ``--executor ray``, ``curate.generate.shards``). Each family has its progress bar and
printed summary. Both append as they go, so a killed run resumes: they are not staged, but
the folder's lock keeps a second run off the same folder. A complete generate run puts
``generated.jsonl`` in item order (``write_in_item_order``), so the same command gives the same
file whatever order the answers came back in. A run that made no record at all, or whose queue
a failure no retry fixes stopped (``curate.generate.queue``), ends with exit 2 and the reason.
"""

from __future__ import annotations

import asyncio
import gc
import json
import math
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError
from curate.core.executor import Executor
from curate.core.stage import STAGES, FunnelRow, Stage, llm_usage
from curate.generate.brainstorm import TASKS  # a brainstorm run's tasks, which generate reads
from curate.generate.from_corpus import CORPUS  # the passages, which a next stage searches
from curate.llm.options import LLMOptions

GENERATED, FAILED = "generated.jsonl", "failed.jsonl"


@dataclass(kw_only=True)
class StageOptions:
    """What brainstorm and generate share: which families, where, with which model."""

    # families (or spec files); "all" = every family the model writes whole
    tasks: tuple[str, ...] = field(default=(), metadata={
        "flag": "--task", "help": "Task family (short-long, long-short, short-short, long-long, sts, bitext, all) "
                                  "or a spec file; repeatable."})
    out: str = field(metadata={"path": "dir",
                               "help": "Run folder (generated.jsonl, failed.jsonl, tasks/, report.json, run.json)."})
    llm: LLMOptions = field(default_factory=LLMOptions)
    seed: int = field(default=0, metadata={"help": "Seed for every per-item draw."})
    # MinHash Jaccard above which two task descriptions are the same
    dedup_threshold: float = field(default=0.7, metadata={
        "min": 0.0, "max": 1.0, "help": "MinHash Jaccard above which two task descriptions count as the same."})
    tasks_dirs: tuple[str, ...] = field(default=(), metadata={
        "flag": "--tasks-dir", "path": "dir",
        "help": "Extra folder of task specs (YAML), searched before the shipped tasks/."})
    prompts_dirs: tuple[str, ...] = field(default=(), metadata={
        "flag": "--prompts-dir", "path": "dir",
        "help": "Extra folder of Jinja templates, searched before the shipped prompts/."})


@dataclass(kw_only=True)
class BrainstormOptions(StageOptions):
    # a target the run tops its tasks up to: a larger one continues the same run, so it is not
    # part of the run's identity (another model or seed is)
    n: int = field(default=50, metadata={"flag": "--num-tasks", "short": "-n", "min": 1, "fingerprint": False,
                                         "help": "Distinct tasks to have per family."})


def _languages_fingerprint(value: str | None):
    """``--languages`` as a run's fingerprint sees it: the pool it names (an edited file is another run)."""
    from curate.generate.languages import fingerprint_value

    return fingerprint_value(value)


@dataclass(kw_only=True)
class GenerateOptions(StageOptions):
    # examples per family (default 100; with pairs: one per pair; with corpus: passages sampled)
    n: int | None = field(default=None, metadata={
        "flag": "--num-examples", "short": "-n", "min": 1,
        "help": "Examples to generate per family  [default: 100; with --from-pairs: one per pair; "
                "with --from-corpus: one per passage, N passages sampled with --seed]."})
    per_task: int = field(default=4, metadata={
        "min": 1, "help": "Examples per task: ceil(n / per-task) tasks are brainstormed."})
    tasks_file: str | None = field(default=None, metadata={
        "path": "file", "exists": True,
        "help": "Use these tasks (JSONL of {\"task\": ...}) instead of brainstorming."})
    pins: dict[str, Any] = field(default_factory=dict, metadata={
        "flag": "--set", "metavar": "NAME=VALUE", "help": "Pin a placeholder for every item, e.g. --set num_words=50."})
    max_chars: int | None = field(default=None, metadata={
        "min": 20, "help": "Cap every text of the answer at this many characters (quick runs, token budgets)."})
    retry_failed: bool = field(default=False, metadata={  # resumes the same run: not part of its fingerprint
        "fingerprint": False, "help": "Try items that failed in an earlier run again."})
    # real (query, positive) pairs: a JSONL file or a BEIR folder
    pairs: str | None = field(default=None, metadata={
        "flag": "--from-pairs", "path": "any", "exists": True,
        "help": "Real (query, positive) pairs (JSONL of {\"query\", \"positive\"}, or a BEIR folder): "
                "ask only for 4 graded negatives per pair; implies --task from-pairs."})
    split: str = field(default="train", metadata={"help": "Qrels split of a BEIR folder given to --from-pairs."})
    copy_retries: int = field(default=0, metadata={  # 0: 2 trained no better on SciFact and NQ-UTD
        "min": 0, "max": 10,
        "help": "With --from-corpus: ask again, with another seed, up to N times when the model's query copies "
                "its passage (half or more of its word 4-grams in the passage or its title); the least copying "
                "answer is kept  [default: 0, the first answer; the filter's copy guard drops copies]."})
    # the user's documents: the model writes a query per sampled passage
    corpus: str | None = field(default=None, metadata={
        "flag": "--from-corpus", "path": "any", "exists": True,
        "help": "Your documents (a BEIR folder, a corpus JSONL, or a folder of .txt/.md/.html): the model "
                "writes a query for each sampled passage, the passage is the positive; writes "
                "OUT/corpus.jsonl; implies --task from-corpus."})
    # items from an input source a plugin registers (curate.generate.source), as NAME=PATH
    source: str | None = field(default=None, metadata={
        "flag": "--from", "metavar": "NAME=PATH", "fingerprint_as": lambda v: v and v.partition("=")[0],
        "help": "Items from an input source a plugin registers (curate.generate_sources): its name and the "
                "file or folder it reads; --from pairs=FILE and --from corpus=DOCS are --from-pairs and "
                "--from-corpus."})
    # client processes the one queue of requests is sharded over (with --base-url servers)
    executor: Executor = field(default_factory=Executor, metadata={
        "help_vars": {"what": "the queue of requests (on Ray: one client process a worker, each with its share "
                              "of the --base-url servers)", "unit": "shards"}})
    # per item, a language drawn from a pool (curate.generate.languages); None: each spec's own
    languages: str | None = field(default=None, metadata={
        # "if-set": a run without it keeps the fingerprint it had before the option existed, so
        # a folder begun then still resumes
        "metavar": "LANGS", "fingerprint_as": _languages_fingerprint, "fingerprint": "if-set",
        "help": "Draw each item's language from a weighted pool (data/languages.tsv: 93 languages, larger ones "
                "drawn more often): codes or names such as en,de,ja (the pool's weights), 'all', or a file of "
                "CODE<TAB>WEIGHT lines. Only families whose spec has a 'languages' key take part (all but sts and "
                "from-pairs); bitext draws two different ones  [default: each spec's own language]."})


def families(names: Sequence[str], tasks_dirs: Sequence[str]) -> list[str]:
    from curate.llm.taskspec import list_families, load_spec

    if "all" in names:  # every family the model writes whole; not those that need given inputs
        dirs = tuple(Path(d) for d in tasks_dirs)
        return [f for f in list_families(dirs) if not load_spec(f, dirs).inputs]
    return list(names)


def brainstorm_stage(opts: StageOptions, n: int = 50) -> dict[str, Any]:
    """Brainstorm ``n`` distinct task descriptions per family for the generate folder ``opts.out``:
    one brainstorm run a family, in ``OUT/tasks/FAMILY`` (``family_run``)."""
    from curate.core.stage import run_stage

    reports = {}
    for family in families(opts.tasks, opts.tasks_dirs):
        report, _ = run_stage(BRAINSTORM, family_run(opts, family, n))
        reports[family] = report["families"][family]
    return combine(reports)


def family_run(opts: StageOptions, family: str, n: int) -> BrainstormOptions:
    """The options of ``family``'s brainstorm run for the generate folder ``opts.out``: a folder of
    its own there (``OUT/tasks/FAMILY``) and the generate folder's request cache, so answers are
    shared with generate whichever of the two asked first."""
    from curate.generate.brainstorm import tasks_folder

    shared = {f.name: getattr(opts, f.name) for f in fields(StageOptions)}
    return BrainstormOptions(**{**shared, "tasks": (family,), "out": str(tasks_folder(opts.out, family)),
                                "llm": opts.llm.cache_in(opts.out), "n": n})


def brainstorm_run(opts: BrainstormOptions, run) -> dict[str, Any]:
    """One family's brainstorm run in its folder: its tasks topped up to ``n`` (the ones there
    count, edited or not); a family with fixed tasks gets them written out, so generate and the
    user read one file either way."""
    from curate.core.jsonl import atomic_write_jsonl
    from curate.generate.brainstorm import brainstorm

    path = Path(opts.out) / TASKS
    _adopt_older_file(path, opts.tasks[0])

    async def one(spec, client, stats, progress):
        tasks = await brainstorm(spec, opts.n, client, path, opts.seed, stats, opts.prompts_dirs, opts.dedup_threshold,
                                 progress)
        if spec.brainstorm is None:
            atomic_write_jsonl(path, [t.to_dict() for t in tasks])
        stats.extra["tasks"] = len(tasks)

    return run_llm_stage("brainstorm", opts, one, run=run)


def _adopt_older_file(path: Path, family: str) -> None:
    """One release's reader: a folder begun before brainstorm was a stage keeps a family's tasks in
    ``OUT/tasks/FAMILY.jsonl``; they move into the family's run folder, edits and all."""
    older = path.parent.parent / f"{family}.jsonl"
    if older.is_file() and not path.exists():
        from curate.core.progress import console

        path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(older, path)
        console.print(f"brainstorm: {older} moved to {path}", soft_wrap=True, markup=False, highlight=False)


def check_brainstorm(opts: BrainstormOptions) -> None:
    """One family a run, with a spec that loads."""
    from curate.llm.taskspec import load_spec

    if len(opts.tasks) != 1 or "all" in opts.tasks:
        raise CurateError(f"a brainstorm run is one family's, not {', '.join(opts.tasks) or 'none'} "
                          "(curate brainstorm runs one a family)")
    load_spec(opts.tasks[0], tuple(Path(d) for d in opts.tasks_dirs))


def brainstorm_files(opts: BrainstormOptions) -> list[Path]:
    """What shapes a family's tasks besides the options: its spec, the brainstorm template (and
    its includes) and the banks it draws topics from; part of the run's identity."""
    from curate.llm.taskspec import bank_path, load_spec
    from curate.llm.templates import template_files

    try:
        spec = load_spec(opts.tasks[0], tuple(Path(d) for d in opts.tasks_dirs))
    except (CurateError, IndexError):
        return []  # the stage's check says what is wrong
    step = spec.brainstorm
    files = [spec.path]
    if step is not None:
        files += [*template_files([step.template], opts.prompts_dirs), *(bank_path(b) for b in step.banks.values())]
    return list(dict.fromkeys(f for f in files if f.exists()))


def _brainstorm_summary(report: dict[str, Any], folder: Path) -> list[str]:
    return [f"{family}: {s.get('tasks', 0)} tasks in {folder / TASKS}" for family, s in report["families"].items()]


def _brainstorm_for(opts: GenerateOptions, names: Sequence[str]) -> dict[str, Any]:
    """The tasks each brainstormed family needs (``ceil(n / per_task)``), made before any item is
    planned: a family's brainstorm run (``family_run``) is done earlier when it finished with the
    same fingerprint and its file holds enough tasks, else it runs (it tops the file up, or
    starts afresh for another model or seed). What each run that ran reported, by family."""
    from curate.core.stage import is_done, run_stage
    from curate.generate.brainstorm import load_tasks
    from curate.llm.taskspec import load_spec

    need = math.ceil((opts.n or 100) / opts.per_task)
    dirs = tuple(Path(d) for d in opts.tasks_dirs)
    ran: dict[str, Any] = {}
    for family in families(names, opts.tasks_dirs):
        if load_spec(family, dirs).brainstorm is None:
            continue  # its tasks are the spec's own
        bopts = family_run(opts, family, need)
        path = Path(bopts.out) / TASKS
        if path.is_file() and len(load_tasks(path)) >= need and is_done(BRAINSTORM, bopts):
            continue
        report, _ = run_stage(BRAINSTORM, bopts)
        ran[family] = report["families"][family]
    return ran


def _families_and_source(opts: GenerateOptions) -> tuple[tuple[str, ...], tuple[Any, str] | None]:
    """The families asked for, and the input source with the path it reads (None: brainstormed
    tasks, the model writes every text)."""
    from curate.generate.source import SOURCES, parse_from

    names = tuple(opts.tasks)
    given = [flag for flag, v in (("--from-pairs", opts.pairs), ("--from-corpus", opts.corpus), ("--from", opts.source))
             if v]
    if len(given) > 1:
        raise CurateError(f"give one of {', '.join(given)}, not several")
    if not names and not given:
        raise CurateError("give --task (or --from-pairs FILE, or --from-corpus DOCS)")
    if opts.tasks_file and len(names) > 1:
        raise CurateError("--tasks-file goes with a single --task")
    if not given:
        return names, None
    if opts.source:
        name, path = parse_from(opts.source)
        source = SOURCES.get(name, where="--from")
    else:
        source, path = (SOURCES.get("pairs"), opts.pairs) if opts.pairs else (SOURCES.get("corpus"), opts.corpus)
    names = names or (source.family,)
    if len(names) > 1 or "all" in names:
        raise CurateError(f"{source.flag} goes with a single --task (default: {source.family})")
    return names, (source, path)


def check(opts: GenerateOptions) -> None:
    """The options, the specs and the tasks file, before any server starts."""
    from curate.generate.brainstorm import load_tasks
    from curate.generate.languages import parse_languages

    names, source = _families_and_source(opts)
    if opts.tasks_file and load_tasks(Path(opts.tasks_file)) == []:
        raise CurateError(f"{opts.tasks_file}: no tasks")
    _check_inputs(names, opts.tasks_dirs, source)
    parse_languages(opts.languages)


def generate_stage(opts: GenerateOptions, run) -> dict[str, Any]:
    """Generate (query, positive, graded negatives) records into ``OUT/generated.jsonl``."""
    from curate.generate.brainstorm import fixed_tasks, load_tasks, tasks_path
    from curate.generate.examples import plan_items
    from curate.generate.families import Asking, Family, run_families

    names, source = _families_and_source(opts)
    given = load_tasks(Path(opts.tasks_file)) if opts.tasks_file else None
    if opts.languages:
        _note_languages_ignored(names, opts.tasks_dirs)
    out = Path(opts.out)
    data = source[0].read(source[1], opts) if source else None  # read and checked before any server starts
    from curate.generate.examples import Planning
    from curate.generate.languages import parse_languages

    # how every family's items are planned (a pool read once; n None: all a source gives, else 100)
    planning = Planning(opts.n, opts.seed, dict(opts.pins), opts.max_chars, parse_languages(opts.languages))
    planned: list[str] = []  # every item's id, families in turn, each family's items in plan order
    brainstormed = _brainstorm_for(opts, names) if source is None and given is None else {}

    async def one(spec, client, stats, progress):
        if source is not None:
            tasks = load_tasks(Path(opts.tasks_file), spec.family) if given else fixed_tasks(spec)
            stats.extra["tasks_used"] = len(tasks)
            items = source[0].items(spec, data, tasks, planning, stats, out)
        else:
            if given:
                tasks = load_tasks(Path(opts.tasks_file), spec.family)
            elif spec.brainstorm is None:
                tasks = fixed_tasks(spec)
            else:
                path = tasks_path(out, spec.family)
                tasks = load_tasks(path, spec.family) if path.is_file() else []
                if spec.family in brainstormed:
                    stats.extra["brainstorm"] = brainstormed[spec.family]
                if not tasks:
                    raise CurateError(f"{spec.family}: brainstorming gave no usable task (see {path.parent}/logs)")
            stats.extra["tasks_used"] = len(tasks)
            items = plan_items(spec, tasks, planning)
        planned.extend(it.id for it in items)  # planned here, so the finished file can be put in this order
        return Family(spec, items, stats)  # asked for with every other family's, in one queue

    executor = _client_processes(opts)
    asking = Asking(dict(opts.pins), tuple(opts.prompts_dirs), opts.max_chars, opts.copy_retries)

    first_failure: list[str | None] = [None]

    async def queue(planned_families, client, cache, progress, timings):
        first_failure[0] = await run_families(planned_families, client, out, asking, opts.retry_failed, progress,
                                              executor, cache.path, timings)

    run.params["executor"] = {"kind": executor.kind, "shards": executor.shards}  # what it resolved to
    report = run_llm_stage("generate", opts, one, names, finish=lambda: write_in_item_order(out / GENERATED, planned),
                           queue=queue, run=run)
    _fail_if_nothing_made(report, out, first_failure[0])
    return report


def _fail_if_nothing_made(report: dict[str, Any], out: Path, first: str | None) -> None:
    """A run whose every item failed, with no record in the folder from before either, ends with
    exit 2 and the first reason on one line: a bad key or a dead server must not look like a
    finished run (the failures stay in failed.jsonl; --retry-failed asks them again). Some
    records and some failures is a finished run with its counts, as always."""
    counts = report.get("counts", {})
    failed = counts.get("failed", 0)
    if not failed or counts.get("ok", 0) or _has_records(out / GENERATED):
        return
    if first is None:  # asked from shard processes: the file has it
        from curate.core.jsonl import read_jsonl

        first = next((obj.get("reason") for _, obj in read_jsonl(out / FAILED) if isinstance(obj, dict)), None)
    items = "its item" if failed == 1 else f"all {failed} items"
    why = " ".join(str(first or "unknown").split())  # one line, whatever the reason held
    raise CurateError(f"generate: no record was made: {items} failed (see {out / FAILED}); first reason: {why}")


def _has_records(path: Path) -> bool:
    """Whether the records file holds at least one line."""
    if not path.is_file():
        return False
    with path.open("rb") as fh:
        return any(line.strip() for line in fh)


def _client_processes(opts: GenerateOptions) -> Executor:
    """The executor the queue runs on: ``--executor ray`` shards it over client processes, each
    with its share of the --base-url servers; the embedded model is one local server, which one
    process keeps busy, so it is asked from here (with a note)."""
    import importlib.util

    executor = opts.executor
    if executor.shards > 1 and not opts.llm.base_urls and not os.environ.get("OPENAI_BASE_URL"):
        from curate.core.progress import console

        console.print(f"[dim]generate: --executor ray shards the requests over --base-url servers; the embedded "
                      f"model is one local server, asked from one process (not {executor.shards})[/dim]")
        return Executor()
    if executor.shards > 1 and importlib.util.find_spec("ray") is None:  # said before any brainstorming
        raise CurateError("--executor ray needs Ray: pip install 'curate[ray]'")
    return executor


def write_in_item_order(path: Path, ids: Sequence[str]) -> bool:
    """Rewrite the records file with its lines in ``ids``' order; True when it had to move any.

    Generate appends each record as its answer arrives, so a killed run loses nothing and
    resumes, but arrival order is the order answers happened to finish in, which differs from
    run to run. Later steps that keep "the first" of something (minhash's ``keep: first``) and
    every seeded shuffle of the export follow the file's order, so the run is made reproducible
    here, once it is complete: item order, the same for one command in every run. Lines are
    moved as they are (bytes unchanged); one whose id is not planned (left by an earlier run)
    goes after the planned ones, in its old order. Written beside and renamed into place, so a
    kill now leaves the old file or the new one, each whole."""
    from curate.core.jsonl import atomic_write_bytes

    if not path.is_file():
        return False
    rank = {rec_id: n for n, rec_id in enumerate(ids)}
    spans: list[tuple[int, int, int]] = []  # (planned position, byte offset, size): equal ranks keep file order
    offset = 0
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if raw.strip():
                try:
                    rec_id = json.loads(raw).get("id")
                except (ValueError, AttributeError):
                    raise CurateError(f"{path}:{lineno}: not a JSON record") from None
                spans.append((rank.get(rec_id, len(rank)), offset, len(raw)))
            offset += len(raw)
    ordered = sorted(spans)
    if ordered == spans:
        return False

    def lines():
        with path.open("rb") as src:
            for _, start, size in ordered:
                src.seek(start)
                line = src.read(size)
                yield line if line.endswith(b"\n") else line + b"\n"

    atomic_write_bytes(path, lines())
    return True


def _note_languages_ignored(names: Sequence[str], tasks_dirs: Sequence[str]) -> None:
    """One warning line for each family ``--languages`` leaves as it is (its spec has no
    ``languages`` key), so a user does not take its records for multilingual ones."""
    from curate.core.progress import console
    from curate.llm.taskspec import load_spec

    dirs = tuple(Path(d) for d in tasks_dirs)
    for name in families(names, tasks_dirs):
        spec = load_spec(name, dirs)
        if spec.languages is None:
            console.print(f"curate: warning: --languages: {spec.family} does not take part (its spec has no "
                          "'languages' key) and writes in its own language", markup=False, highlight=False,
                          soft_wrap=True)


def _check_inputs(names: Sequence[str], tasks_dirs: Sequence[str], source) -> None:
    """A spec that takes given inputs runs with a source that gives them (``--from-pairs``: query
    and positive; ``--from-corpus``: the positive), and only such a spec does."""
    from curate.llm.taskspec import load_spec

    dirs = tuple(Path(d) for d in tasks_dirs)
    for name in families(names, tasks_dirs):
        spec = load_spec(name, dirs)
        if source is not None:
            source[0].check_spec(spec)
        elif spec.inputs:
            flag = "--from-corpus DOCS" if spec.inputs == ["positive"] else "--from-pairs FILE"
            raise CurateError(f"{spec.family}: each item needs its own {' and '.join(spec.inputs)}; "
                              f"give them with {flag}")


PerFamily = Callable[[Any, Any, Any, Any], Awaitable[Any]]  # (spec, backend, stats, progress)
# (what ``one`` returned for each family, backend, cache, progress, timings): every family's work in one go
Queue = Callable[[list[Any], Any, Any, Any, dict[str, float]], Awaitable[None]]


def run_llm_stage(stage: str, opts: StageOptions, one: PerFamily, names: Sequence[str] | None = None,
                  finish: Callable[[], Any] | None = None, queue: Queue | None = None, *, run) -> dict[str, Any]:
    """Load the specs, open the backend, run ``one`` per family, print each family's summary and
    return the run's; ``finish``: called once every family is done, before the report (not after
    a failed run). ``run``: the run the stage runner opened (brainstorm's or generate's).

    With ``queue``, ``one`` only plans a family (brainstorming with the backend as it needs) and
    returns its work; once every family is planned, ``queue`` runs all of it at once, adding to
    each family's stats (generate: one queue of requests, families interleaved); one progress
    display shows every family's bars, and each family's summary is printed at the end."""
    from curate.core.jsonl import atomic_write_json
    from curate.llm.backend import open_backend
    from curate.core.progress import RunStats, print_summary, progress_bar
    from curate.llm.taskspec import load_spec

    dirs = tuple(Path(d) for d in opts.tasks_dirs)
    specs = [load_spec(name, dirs) for name in families(names or opts.tasks, opts.tasks_dirs)]
    out_dir = Path(opts.out)
    summaries: dict[str, Any] = {}

    timings: dict[str, float] = {}

    async def main(cfg, cache) -> None:
        client = open_backend(cfg, cache)
        try:
            if queue is not None:
                return await planned_then_queued(cfg, cache, client)
            for spec in specs:
                stats = RunStats(stage=stage, price=opts.llm.price_per_1k_tokens)
                sent_before, hits_before = client.requests_sent, cache.hits
                with progress_bar(stats, stage) as progress:
                    await one(spec, client, stats, progress)
                stats.requests = client.requests_sent - sent_before
                stats.extra["cache_hits"] = cache.hits - hits_before
                stats.extra.update(family=spec.family, model=cfg.model, endpoints=len(cfg.base_urls))
                summaries[spec.family] = stats.as_dict()
                print_summary(stats, f"{stage} {spec.family}")
        finally:
            await client.close()

    async def planned_then_queued(cfg, cache, client) -> None:
        planned, stats_of = [], []
        with progress_bar(None, stage) as progress:
            for spec in specs:
                stats = RunStats(stage=stage, price=opts.llm.price_per_1k_tokens)
                sent_before, hits_before = client.requests_sent, cache.hits
                planned.append(await one(spec, client, stats, progress))
                stats.requests = client.requests_sent - sent_before  # the queue adds its own
                stats.extra["cache_hits"] = cache.hits - hits_before
                stats_of.append(stats)
            await queue(planned, client, cache, progress, timings)
        for spec, stats in zip(specs, stats_of):
            stats.extra.update(family=spec.family, model=cfg.model, endpoints=len(cfg.base_urls))
            summaries[spec.family] = stats.as_dict()
            print_summary(stats, f"{stage} {spec.family}")

    # Modules and specs live for the whole run: keep the collector from rescanning them, and
    # from running every few hundred allocations while thousands of requests are in flight.
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)
    run.params["tasks"] = [s.family for s in specs]  # what "all" resolved to
    combined = _serve_and_ask(stage, opts, main, summaries, finish)
    run.timings.update(timings)
    run.counts.update(combined["counts"])
    return combined


def _serve_and_ask(stage: str, opts: StageOptions, main, summaries, finish) -> dict[str, Any]:
    """Start or reach the backend, ask every family's items (``main``), then ``finish``; the run's summary."""
    from curate.core.progress import console
    from curate.llm.backend import llm_backend
    from curate.core.secrets import safe_url

    with llm_backend(opts.llm, Path(opts.out)) as (cfg, cache):
        where = ("vLLM's offline runner" if cfg.batch is not None and cfg.batch.mode == "vllm"
                 else ", ".join(map(safe_url, cfg.base_urls)))
        console.print(f"[dim]{stage}: model {cfg.model} at {where}[/dim]")
        asyncio.run(main(cfg, cache))
    if finish is not None:
        finish()
    return combine(summaries)


def combine(summaries: dict[str, Any]) -> dict[str, Any]:
    """One summary for the run: totals over families, and each family's own numbers."""
    counts: dict[str, int] = {}
    reasons: dict[str, int] = {}
    for s in summaries.values():
        for k, v in s["counts"].items():
            counts[k] = counts.get(k, 0) + v
        for k, v in s["failure_reasons"].items():
            reasons[k] = reasons.get(k, 0) + v
    return {"counts": counts, "failure_reasons": reasons, "families": summaries}


def summary(report: dict[str, Any], folder: Path) -> list[str]:
    """Each family's numbers were printed as it finished; what is left to say is where the
    passages are, when the queries were written for the user's documents."""
    corpus = folder / CORPUS
    return [f"passages corpus (for filter --corpus and mine --corpus): {corpus}"] if corpus.is_file() else []


def funnel(report: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Passages sampled, queries written, failures by kind (read from the files, so a resumed
    run counts what all its runs wrote)."""
    from collections import Counter

    from curate.core.jsonl import read_jsonl
    from curate.core.progress import reason_kind

    from curate.generate.examples import still_copies

    ok = asked = left = 0
    for _, obj in read_jsonl(folder / GENERATED) if (folder / GENERATED).is_file() else ():
        ok += 1
        copy = (obj.get("meta") or {}).get("copy") if isinstance(obj, dict) else None
        if isinstance(copy, dict):  # the query copied its passage and was asked for again
            asked += 1
            left += still_copies(copy)
    failed = [obj for _, obj in read_jsonl(folder / FAILED)] if (folder / FAILED).is_file() else []
    return {"sampled": report.get("counts", {}).get("requested", ok + len(failed)), "ok": ok, "failed": len(failed),
            "failure_reasons": dict(Counter(reason_kind(f.get("reason")) for f in failed).most_common()),
            "copies_asked_again": asked, "copies_left": left}


def present(g: dict[str, Any]) -> FunnelRow:
    from rich.markup import escape

    why = escape(", ".join(f"{k}: {v}" for k, v in g["failure_reasons"].items()))
    asked, left = g.get("copies_asked_again", 0), g.get("copies_left", 0)
    copies = (f"; {asked} copied their passage and were asked for again, {left} still copy (the filter's "
              "copy guard judges them)") if asked else ""
    return FunnelRow(lines=[("generate", f"{g['sampled']} passages sampled, {g['ok']} queries written, "
                                         f"{g['failed']} failed" + (f" ({why})" if why else "") + copies)],
                     cells=[("passages sampled", "sampled"), ("records written", "ok"), ("failed", "failed")],
                     dropped=dict(g.get("failure_reasons") or {}))


def spec_files(opts: GenerateOptions) -> list[Path]:
    """Every file that shapes the records besides the inputs: each family's spec, the templates
    its steps render (includes too) and the word banks it draws from. Part of the run's identity,
    so an edited prompt or spec is a new run, never "done earlier"."""
    from curate.llm.taskspec import bank_path, load_spec
    from curate.llm.templates import template_files

    try:
        names, source = _families_and_source(opts)
        dirs = tuple(Path(d) for d in opts.tasks_dirs)
        specs = [load_spec(name, dirs) for name in families(names, opts.tasks_dirs)]
    except CurateError:
        return []  # the stage's check says what is wrong
    files: list[Path] = []
    for spec in specs:
        steps = [step for step in (spec.generate, spec.brainstorm) if step is not None]
        files += [spec.path, *template_files([step.template for step in steps], opts.prompts_dirs)]
        files += [bank_path(bank) for step in steps for bank in step.banks.values()]
    if opts.source and source is not None:  # what a plugin's source reads (--from NAME=PATH)
        files.append(Path(source[1]))
    return list(dict.fromkeys(f for f in files if f.exists()))


def _usage(report: dict[str, Any]) -> dict[str, Any]:
    """Generate's LLM calls: every family's, and those of the brainstorm runs it ran for them."""
    families_ = list(report.get("families", {}).values())
    return llm_usage([*families_, *(f["brainstorm"] for f in families_ if isinstance(f.get("brainstorm"), dict))],
                     "requests_sent")


STAGE = Stage("generate", GenerateOptions, generate_stage, check=check, also_reads=spec_files,
              reads=("tasks_file", "pairs", "corpus"),
              writes={"records": GENERATED, "drops": FAILED, "corpus": CORPUS}, appends=True,
              summary=summary, funnel=funnel, present=present, adds=("query", "positive"), usage=_usage)
STAGES.register(STAGE.name, STAGE)

BRAINSTORM = Stage("brainstorm", BrainstormOptions, brainstorm_run, check=check_brainstorm,
                   also_reads=brainstorm_files, writes={"records": TASKS}, appends=True,
                   summary=_brainstorm_summary,
                   usage=lambda report: llm_usage(report.get("families", report), "requests_sent"))
STAGES.register(BRAINSTORM.name, BRAINSTORM)
