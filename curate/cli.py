"""The ``curate`` command line: one command per stage."""

from __future__ import annotations

import asyncio
import functools
import math
import os
import sys
from pathlib import Path
from typing import Any

import click
import yaml

from curate import __version__
from curate.errors import CurateError


def _llm_options(fn):
    """Options every LLM-driven command shares (one definition, so they never drift apart)."""
    options = [
        click.option("--base-url", "base_urls", multiple=True, metavar="URL",
                     help="OpenAI-compatible server (vLLM, ...); repeat to spread requests over several. "
                          "Default: $OPENAI_BASE_URL, else the embedded CPU model."),
        click.option("--model", default=None, help="Model name the server serves (required with --base-url)."),
        click.option("--api-key", default=None, envvar="OPENAI_API_KEY", show_envvar=True,
                     help="API key for the server; read from the environment, never logged."),
        click.option("--model-path", type=click.Path(dir_okay=False), default=None,
                     help="Serve this GGUF file on the CPU instead of the bundled model."),
        click.option("--concurrency", type=click.IntRange(1), default=None,
                     help="Requests in flight per server (default: 256 for servers, the slot count embedded)."),
        click.option("--parallel", type=click.IntRange(1), default=4, show_default=True,
                     help="Slots of the embedded server (sequences decoded together)."),
        click.option("--timeout", type=click.FloatRange(0.1), default=600.0, show_default=True,
                     help="Seconds before a request counts as timed out."),
        click.option("--max-retries", type=click.IntRange(0), default=6, show_default=True,
                     help="Retries of a request after 429/5xx/timeouts/dropped connections."),
        click.option("--max-reasks", type=click.IntRange(0), default=2, show_default=True,
                     help="New asks after an answer that is not valid JSON, fails the schema, or is cut off."),
        click.option("--backoff-base", type=click.FloatRange(0.0), default=1.0, show_default=True,
                     help="First retry delay in seconds (doubles each retry, with jitter)."),
        click.option("--cache", "cache_path", type=click.Path(dir_okay=False), default=None,
                     help="Request cache file (default: OUT/.cache/llm.sqlite)."),
        click.option("--seed", type=int, default=0, show_default=True, help="Seed for every per-item draw."),
        click.option("--prompts-dir", "prompts_dirs", multiple=True, type=click.Path(file_okay=False),
                     help="Extra folder of Jinja templates, searched before the shipped prompts/."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _family_options(fn):
    """Which families, where to write, and when two tasks count as the same."""
    fn = click.option("--tasks-dir", "tasks_dirs", multiple=True, type=click.Path(file_okay=False),
                      help="Extra folder of task specs (YAML), searched before the shipped tasks/.")(fn)
    fn = click.option("--dedup-threshold", type=click.FloatRange(0.0, 1.0), default=0.7, show_default=True,
                      help="MinHash Jaccard above which two task descriptions count as the same.")(fn)
    fn = click.option("--out", type=click.Path(file_okay=False), required=True,
                      help="Run folder (generated.jsonl, failed.jsonl, tasks/, summary.json).")(fn)
    return click.option("--task", "task_names", multiple=True, required=True,
                        help="Task family (short-long, long-short, short-short, long-long, sts, bitext, all) "
                             "or a spec file; repeatable.")(fn)


def _llm_opts(kw: dict[str, Any]):
    from curate.llm.backend import LLMOptions

    return LLMOptions(
        base_urls=kw["base_urls"], model=kw["model"], api_key=kw["api_key"], model_path=kw["model_path"],
        concurrency=kw["concurrency"], timeout=kw["timeout"], max_retries=kw["max_retries"],
        max_reasks=kw["max_reasks"], backoff_base=kw["backoff_base"], cache=kw["cache_path"],
        parallel=kw["parallel"],
    )


def _parse_overrides(pairs: tuple[str, ...]) -> dict[str, Any]:
    out = {}
    for pair in pairs:
        if "=" not in pair:
            raise CurateError(f"--set expects NAME=VALUE, got {pair!r}")
        name, value = pair.split("=", 1)
        out[name.strip()] = yaml.safe_load(value) if value.strip() else ""
    return out


def _families(names: tuple[str, ...], tasks_dirs) -> list[str]:
    from curate.taskspec import list_families

    if "all" in names:
        return list_families(tuple(Path(d) for d in tasks_dirs))
    return list(names)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="curate")
def cli() -> None:
    """Turn LLMs and real retrieval datasets into training data for text-embedding models.

    Stages: brainstorm/generate (LLM triplets with graded negatives), filter, mine, export.
    """


@cli.command()
@click.option("-n", "--num-tasks", "n", type=click.IntRange(1), default=50, show_default=True,
              help="Distinct tasks to have per family.")
@_family_options
@_llm_options
def brainstorm(task_names, n, out, dedup_threshold, **kw) -> None:
    """Brainstorm distinct task descriptions into OUT/tasks/FAMILY.jsonl (inspect or edit them there)."""
    from curate.generate.brainstorm import brainstorm as run_brainstorm
    from curate.generate.brainstorm import tasks_path

    async def one(spec, client, stats, progress):
        tasks = await run_brainstorm(spec, n, client, Path(out), kw["seed"], stats, kw["prompts_dirs"],
                                     dedup_threshold, progress)
        if spec.brainstorm is None:
            _write_fixed(spec, tasks, Path(out))
        click.echo(f"{spec.family}: {len(tasks)} tasks in {tasks_path(Path(out), spec.family)}")

    _run_stage("brainstorm", task_names, out, kw, one)


@cli.command()
@click.option("-n", "--num-examples", "n", type=click.IntRange(1), default=100, show_default=True,
              help="Examples to generate per family.")
@click.option("--per-task", type=click.IntRange(1), default=4, show_default=True,
              help="Examples per task: ceil(n / per-task) tasks are brainstormed.")
@click.option("--tasks-file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Use these tasks (JSONL of {\"task\": ...}) instead of brainstorming.")
@click.option("--set", "overrides", multiple=True, metavar="NAME=VALUE",
              help="Pin a placeholder for every item, e.g. --set num_words=50.")
@click.option("--max-chars", type=click.IntRange(20), default=None,
              help="Cap every text of the answer at this many characters (quick runs, token budgets).")
@click.option("--retry-failed", is_flag=True, help="Try items that failed in an earlier run again.")
@_family_options
@_llm_options
def generate(task_names, n, out, per_task, tasks_file, overrides, max_chars, retry_failed, dedup_threshold, **kw) -> None:
    """Generate (query, positive, 4 graded negatives) records into OUT/generated.jsonl.

    Negatives come hardest first (level 1) to easiest (level 4). Re-running the same command
    resumes: finished items are not redone and cached requests are not sent again.
    """
    from curate.generate.brainstorm import brainstorm as run_brainstorm
    from curate.generate.brainstorm import load_tasks
    from curate.generate.examples import generate as run_generate
    from curate.progress import RunStats

    pins = _parse_overrides(overrides)
    if tasks_file and len(task_names) > 1:
        raise CurateError("--tasks-file goes with a single --task")
    given = load_tasks(Path(tasks_file)) if tasks_file else None  # checked before any server starts
    if given == []:
        raise CurateError(f"{tasks_file}: no tasks")

    async def one(spec, client, stats, progress):
        if given:
            tasks = load_tasks(Path(tasks_file), spec.family)
        else:
            bstats = RunStats(stage="brainstorm")
            tasks = await run_brainstorm(spec, math.ceil(n / per_task), client, Path(out), kw["seed"], bstats,
                                         kw["prompts_dirs"], dedup_threshold, progress)
            stats.extra["brainstorm"] = bstats.as_dict()
            if not tasks:
                raise CurateError(f"{spec.family}: brainstorming gave no usable task (see {out}/logs)")
        stats.extra["tasks_used"] = len(tasks)
        await run_generate(spec, tasks, n, client, Path(out), kw["seed"], stats, pins, kw["prompts_dirs"],
                           retry_failed, progress, max_chars)

    _run_stage("generate", task_names, out, kw, one)


def _write_fixed(spec, tasks, out: Path) -> None:
    from curate.generate.brainstorm import tasks_path
    from curate.jsonl import atomic_write_jsonl

    atomic_write_jsonl(tasks_path(out, spec.family), [t.to_dict() for t in tasks])


def _run_stage(stage: str, task_names, out: str, kw: dict[str, Any], one) -> None:
    """Load the specs, start the backend, run ``one`` per family, write and print the summary."""
    from curate.jsonl import atomic_write_json
    from curate.llm.backend import llm_backend
    from curate.llm.client import LLMClient
    from curate.progress import RunStats, console, print_summary, progress_bar
    from curate.taskspec import load_spec

    tasks_dirs = tuple(Path(d) for d in kw["tasks_dirs"])
    specs = [load_spec(name, tasks_dirs) for name in _families(task_names, kw["tasks_dirs"])]
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    summaries: dict[str, Any] = {}

    async def main(cfg, cache) -> None:
        client = LLMClient(cfg, cache)
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

    with llm_backend(_llm_opts(kw), out_dir) as (cfg, cache):
        console.print(f"[dim]{stage}: model {cfg.model} at {', '.join(cfg.base_urls)}[/dim]")
        asyncio.run(main(cfg, cache))
    combined = _combine(summaries)
    atomic_write_json(out_dir / ("summary.json" if stage == "generate" else f"{stage}_summary.json"), combined)


def _combine(summaries: dict[str, Any]) -> dict[str, Any]:
    """One summary for the run: totals over families, and each family's own numbers."""
    counts: dict[str, int] = {}
    reasons: dict[str, int] = {}
    for s in summaries.values():
        for k, v in s["counts"].items():
            counts[k] = counts.get(k, 0) + v
        for k, v in s["failure_reasons"].items():
            reasons[k] = reasons.get(k, 0) + v
    return {"counts": counts, "failure_reasons": reasons, "families": summaries}


@cli.command(name="filter")
@click.option("--in", "in_path", type=click.Path(dir_okay=False), required=True, help="Records to filter (JSONL).")
@click.option("--out", type=click.Path(file_okay=False), required=True,
              help="Folder for filtered.jsonl, rejected.jsonl, filter_report.json and plots.")
@click.option("--recipe", default="default", show_default=True,
              help="A shipped recipe name (default, strict) or a recipe YAML file.")
@click.option("--teacher", default=None, help="Teacher embedding model (sentence-transformers name or path); "
                                               "default: the recipe's, else the bundled all-MiniLM-L6-v2.")
@click.option("--query-prompt", default=None, help="Prefix for queries given to the teacher (e.g. 'query: ').")
@click.option("--doc-prompt", default=None, help="Prefix for documents given to the teacher (e.g. 'passage: ').")
@click.option("--corpus", "corpus_path", type=click.Path(dir_okay=False), default=None,
              help="Real documents (JSONL with 'text', BEIR corpus.jsonl works) added to the teacher's ranking pool.")
@_llm_options
def filter_cmd(in_path, out, recipe, teacher, query_prompt, doc_prompt, corpus_path, **kw) -> None:
    """Drop faulty records and negatives; every drop goes to rejected.jsonl with its step and reason.

    Judges (refute/answerability steps) use the LLM options below; by default the embedded model.
    """
    from curate.filter.main import filter_main

    filter_main(Path(in_path), Path(out), recipe, teacher, query_prompt, doc_prompt,
                Path(corpus_path) if corpus_path else None, _llm_opts(kw))


@cli.command()
@click.option("--model", required=True, help="Hugging Face model name or local path for vLLM.")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--max-num-seqs", type=click.IntRange(1), default=256, show_default=True,
              help="Sequences vLLM decodes at once; match curate's --concurrency.")
@click.option("--tensor-parallel-size", "tp", type=click.IntRange(1), default=1, show_default=True)
@click.option("--max-model-len", type=click.IntRange(256), default=None, help="Context length cap (saves KV memory).")
@click.option("--start-timeout", type=click.FloatRange(1), default=1800.0, show_default=True)
@click.argument("vllm_args", nargs=-1, type=click.UNPROCESSED)
def serve(model, port, max_num_seqs, tp, max_model_len, start_timeout, vllm_args) -> None:
    """Start a vLLM server on 127.0.0.1 tuned for batch generation; Ctrl-C stops it.

    Extra arguments after `--` go to `vllm serve` unchanged.
    """
    from curate.llm.serve import serve as run_serve

    run_serve(model, port, max_num_seqs, tp, max_model_len, tuple(vllm_args), start_timeout)


def main() -> None:
    """Entry point: user errors become one line on stderr, never a traceback."""
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("curate: interrupted; re-run the same command to resume", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except CurateError as e:
        click.echo(f"curate: error: {e}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("curate: interrupted; re-run the same command to resume", err=True)
        sys.exit(130)
    except Exception as e:  # a bug: say so in one line; CURATE_DEBUG=1 shows the traceback
        if os.environ.get("CURATE_DEBUG"):
            raise
        click.echo(f"curate: internal error: {type(e).__name__}: {e} (set CURATE_DEBUG=1 for details)", err=True)
        sys.exit(3)
