"""``brainstorm`` and ``generate`` as Python calls: specs in, records in OUT, a summary back.

The command line is a thin layer over ``brainstorm_stage`` and ``generate_stage``; a notebook
or a pipeline calls them the same way. Each family runs in turn on one backend (one embedded
server or one set of remote servers for the whole run), with a progress bar and a printed
summary; ``OUT/summary.json`` (generate) or ``OUT/brainstorm_summary.json`` and ``run.json``
are written at the end. The run appends as it goes, so a killed run resumes: it is not staged,
but the run folder's lock keeps a second run off the same ``out``.
"""

from __future__ import annotations

import asyncio
import gc
import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError
from curate.llm.backend import LLMOptions


@dataclass(kw_only=True)
class StageOptions:
    """What brainstorm and generate share: which families, where, with which model."""

    tasks: tuple[str, ...] = ()  # families (or spec files); "all" = every family the model writes whole
    out: str
    llm: LLMOptions = field(default_factory=LLMOptions)
    seed: int = 0
    dedup_threshold: float = 0.7  # MinHash Jaccard above which two task descriptions are the same
    tasks_dirs: tuple[str, ...] = ()
    prompts_dirs: tuple[str, ...] = ()


@dataclass(kw_only=True)
class GenerateOptions(StageOptions):
    n: int | None = None  # examples per family (default 100; with pairs: one per pair; with corpus: passages sampled)
    per_task: int = 4
    tasks_file: str | None = None
    pins: dict[str, Any] = field(default_factory=dict)
    max_chars: int | None = None
    retry_failed: bool = False
    pairs: str | None = None  # real (query, positive) pairs: a JSONL file or a BEIR folder
    split: str = "train"
    corpus: str | None = None  # the user's documents: the model writes a query per sampled passage


def families(names: Sequence[str], tasks_dirs: Sequence[str]) -> list[str]:
    from curate.taskspec import list_families, load_spec

    if "all" in names:  # every family the model writes whole; not those that need given inputs
        dirs = tuple(Path(d) for d in tasks_dirs)
        return [f for f in list_families(dirs) if not load_spec(f, dirs).inputs]
    return list(names)


def brainstorm_stage(opts: StageOptions, n: int = 50) -> dict[str, Any]:
    """Brainstorm ``n`` distinct task descriptions per family into ``OUT/tasks/FAMILY.jsonl``."""
    from curate.core.jsonl import atomic_write_jsonl
    from curate.generate.brainstorm import brainstorm, tasks_path
    from curate.progress import console

    out = Path(opts.out)

    async def one(spec, client, stats, progress):
        tasks = await brainstorm(spec, n, client, out, opts.seed, stats, opts.prompts_dirs, opts.dedup_threshold,
                                 progress)
        if spec.brainstorm is None:
            atomic_write_jsonl(tasks_path(out, spec.family), [t.to_dict() for t in tasks])
        console.print(f"{spec.family}: {len(tasks)} tasks in {tasks_path(out, spec.family)}")

    return run_llm_stage("brainstorm", opts, one, {"n": n})


def generate_stage(opts: GenerateOptions) -> dict[str, Any]:
    """Generate (query, positive, graded negatives) records into ``OUT/generated.jsonl``."""
    from curate.generate.brainstorm import brainstorm, fixed_tasks, load_tasks
    from curate.generate.examples import generate
    from curate.progress import RunStats

    names = tuple(opts.tasks)
    if opts.pairs and opts.corpus:
        raise CurateError("give --from-pairs or --from-corpus, not both")
    if not names and not opts.pairs and not opts.corpus:
        raise CurateError("give --task (or --from-pairs FILE, or --from-corpus DOCS)")
    if opts.tasks_file and len(names) > 1:
        raise CurateError("--tasks-file goes with a single --task")
    given = load_tasks(Path(opts.tasks_file)) if opts.tasks_file else None  # checked before any server starts
    if given == []:
        raise CurateError(f"{opts.tasks_file}: no tasks")
    source = "pairs" if opts.pairs else "corpus" if opts.corpus else None
    if source:
        from curate.generate import from_corpus, from_pairs

        flag, default = (("--from-pairs", from_pairs.FAMILY) if source == "pairs"
                         else ("--from-corpus", from_corpus.FAMILY))
        names = names or (default,)
        if len(names) > 1 or "all" in names:
            raise CurateError(f"{flag} goes with a single --task (default: {default})")
    _check_inputs(names, opts.tasks_dirs, source)
    out = Path(opts.out)
    pairs = docs = None
    if opts.pairs:  # read and checked before any server starts
        pairs = from_pairs.read_pairs(opts.pairs, opts.split)
    if opts.corpus:
        from curate.datasets.documents import read_documents

        docs = read_documents(opts.corpus)
        docs.check_target(out / from_corpus.CORPUS)

    async def one(spec, client, stats, progress):
        if pairs is not None or docs is not None:
            tasks = load_tasks(Path(opts.tasks_file), spec.family) if given else fixed_tasks(spec)
            stats.extra["tasks_used"] = len(tasks)
            if pairs is not None:
                items = from_pairs.pair_items(spec, pairs, tasks, opts.seed, stats, opts.pins, opts.max_chars,
                                              limit=opts.n)
            else:
                docs.write_corpus(out / from_corpus.CORPUS)  # the corpus filter --corpus and mine --corpus take
                stats.extra["passages"] = len(docs.passages)
                items = from_corpus.corpus_items(spec, docs, opts.n, tasks, opts.seed, stats, opts.pins,
                                                 opts.max_chars)
            await generate(spec, [], len(items), client, out, opts.seed, stats, opts.pins, opts.prompts_dirs,
                           opts.retry_failed, progress, opts.max_chars, items=items)
            return
        if given:
            tasks = load_tasks(Path(opts.tasks_file), spec.family)
        else:
            bstats = RunStats(stage="brainstorm")
            tasks = await brainstorm(spec, math.ceil((opts.n or 100) / opts.per_task), client, out, opts.seed,
                                     bstats, opts.prompts_dirs, opts.dedup_threshold, progress)
            stats.extra["brainstorm"] = bstats.as_dict()
            if not tasks:
                raise CurateError(f"{spec.family}: brainstorming gave no usable task (see {out}/logs)")
        stats.extra["tasks_used"] = len(tasks)
        await generate(spec, tasks, opts.n or 100, client, out, opts.seed, stats, opts.pins, opts.prompts_dirs,
                       opts.retry_failed, progress, opts.max_chars)

    extra = {k: v for k, v in asdict(opts).items() if k not in asdict(StageOptions(out=""))}
    summary = run_llm_stage("generate", opts, one, extra, names)
    if docs is not None:
        from curate.progress import console

        console.print(f"passages corpus (for filter --corpus and mine --corpus): {out / from_corpus.CORPUS}")
    return summary


def _check_inputs(names: Sequence[str], tasks_dirs: Sequence[str], source: str | None) -> None:
    """Specs that take given inputs run with --from-pairs (query and positive) or --from-corpus
    (positive), and only they do."""
    from curate.taskspec import load_spec

    dirs = tuple(Path(d) for d in tasks_dirs)
    for name in families(names, tasks_dirs):
        spec = load_spec(name, dirs)
        if source == "pairs" and not {"query", "positive"} <= set(spec.inputs):
            raise CurateError(f"--from-pairs needs a spec whose 'inputs' are query and positive "
                              f"({spec.family} asks the model for them)")
        if source == "corpus":
            from curate.generate.from_corpus import check_spec

            check_spec(spec)
        if source is None and spec.inputs:
            flag = "--from-corpus DOCS" if spec.inputs == ["positive"] else "--from-pairs FILE"
            raise CurateError(f"{spec.family}: each item needs its own {' and '.join(spec.inputs)}; "
                              f"give them with {flag}")


PerFamily = Callable[[Any, Any, Any, Any], Awaitable[None]]  # (spec, backend, stats, progress)


def run_llm_stage(stage: str, opts: StageOptions, one: PerFamily, extra: dict[str, Any],
                  names: Sequence[str] | None = None) -> dict[str, Any]:
    """Load the specs, open the backend, run ``one`` per family, write and print the summary."""
    from curate.core.jsonl import atomic_write_json
    from curate.core.runner import open_run
    from curate.llm.backend import llm_backend, open_backend
    from curate.llm.redact import safe_url
    from curate.progress import RunStats, console, print_summary, progress_bar
    from curate.taskspec import load_spec

    dirs = tuple(Path(d) for d in opts.tasks_dirs)
    specs = [load_spec(name, dirs) for name in families(names or opts.tasks, opts.tasks_dirs)]
    out_dir = Path(opts.out)
    summaries: dict[str, Any] = {}

    async def main(cfg, cache) -> None:
        client = open_backend(cfg, cache)
        try:
            for spec in specs:
                stats = RunStats(stage=stage)
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

    # Modules and specs live for the whole run: keep the collector from rescanning them, and
    # from running every few hundred allocations while thousands of requests are in flight.
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)
    llm = {k: v for k, v in asdict(opts.llm).items() if k != "api_key"}  # the key is never written
    llm["base_urls"] = [safe_url(u) for u in opts.llm.base_urls]
    params = {"tasks": [s.family for s in specs], "seed": opts.seed, "dedup_threshold": opts.dedup_threshold,
              "tasks_dirs": list(opts.tasks_dirs), "prompts_dirs": list(opts.prompts_dirs), "llm": llm, **extra}
    with open_run(stage, out_dir, params, staged=False) as run:
        with llm_backend(opts.llm, out_dir) as (cfg, cache):
            console.print(f"[dim]{stage}: model {cfg.model} at {', '.join(map(safe_url, cfg.base_urls))}[/dim]")
            asyncio.run(main(cfg, cache))
        combined = combine(summaries)
        run.counts.update(combined["counts"])
        atomic_write_json(out_dir / ("summary.json" if stage == "generate" else f"{stage}_summary.json"), combined)
    return combined


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
