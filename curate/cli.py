"""The ``curate`` command line: one command per stage."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Any

import click
import yaml

from curate import __version__
from curate.core.errors import CurateError
from curate.executor_options import executor_from, executor_options, teacher_url_option
from curate.negatives.knobs import Ceiling


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


def _family_options(fn=None, *, task_required: bool = True):
    """Which families, where to write, and when two tasks count as the same."""
    if fn is None:
        return functools.partial(_family_options, task_required=task_required)
    fn = click.option("--tasks-dir", "tasks_dirs", multiple=True, type=click.Path(file_okay=False),
                      help="Extra folder of task specs (YAML), searched before the shipped tasks/.")(fn)
    fn = click.option("--dedup-threshold", type=click.FloatRange(0.0, 1.0), default=0.7, show_default=True,
                      help="MinHash Jaccard above which two task descriptions count as the same.")(fn)
    fn = click.option("--out", type=click.Path(file_okay=False), required=True,
                      help="Run folder (generated.jsonl, failed.jsonl, tasks/, summary.json).")(fn)
    return click.option("--task", "task_names", multiple=True, required=task_required,
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
    from curate.generate.stage import brainstorm_stage

    brainstorm_stage(_stage_options(task_names, out, dedup_threshold, kw), n)


@cli.command()
@click.option("-n", "--num-examples", "n", type=click.IntRange(1), default=None,
              help="Examples to generate per family  [default: 100; with --from-pairs: one per pair; "
                   "with --from-corpus: one per passage, N passages sampled with --seed].")
@click.option("--per-task", type=click.IntRange(1), default=4, show_default=True,
              help="Examples per task: ceil(n / per-task) tasks are brainstormed.")
@click.option("--tasks-file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Use these tasks (JSONL of {\"task\": ...}) instead of brainstorming.")
@click.option("--set", "overrides", multiple=True, metavar="NAME=VALUE",
              help="Pin a placeholder for every item, e.g. --set num_words=50.")
@click.option("--max-chars", type=click.IntRange(20), default=None,
              help="Cap every text of the answer at this many characters (quick runs, token budgets).")
@click.option("--retry-failed", is_flag=True, help="Try items that failed in an earlier run again.")
@click.option("--from-pairs", "pairs_path", type=click.Path(exists=True), default=None,
              help="Real (query, positive) pairs (JSONL of {\"query\", \"positive\"}, or a BEIR folder): "
                   "ask only for 4 graded negatives per pair; implies --task from-pairs.")
@click.option("--split", default="train", show_default=True, help="Qrels split of a BEIR folder given to --from-pairs.")
@click.option("--from-corpus", "corpus_path", type=click.Path(exists=True), default=None,
              help="Your documents (a BEIR folder, a corpus JSONL, or a folder of .txt/.md/.html): the model "
                   "writes a query for each sampled passage, the passage is the positive; writes "
                   "OUT/corpus.jsonl; implies --task from-corpus.")
@_family_options(task_required=False)
@_llm_options
def generate(task_names, n, out, per_task, tasks_file, overrides, max_chars, retry_failed, pairs_path, split,
             corpus_path, dedup_threshold, **kw) -> None:
    """Generate (query, positive, 4 graded negatives) records into OUT/generated.jsonl.

    Negatives come hardest first (level 1) to easiest (level 4). Re-running the same command
    resumes: finished items are not redone and cached requests are not sent again.
    With --from-pairs the query and positive are real ones, kept verbatim. With --from-corpus
    the positive is a passage of your documents, kept verbatim, and the model writes the query.
    """
    from curate.generate.stage import GenerateOptions, generate_stage

    if not task_names and not pairs_path and not corpus_path:
        raise click.UsageError("Missing option '--task' (or give --from-pairs FILE or --from-corpus DOCS).")
    base = _stage_options(task_names, out, dedup_threshold, kw)
    generate_stage(GenerateOptions(**vars(base), n=n, per_task=per_task, tasks_file=tasks_file,
                                   pins=_parse_overrides(overrides), max_chars=max_chars, retry_failed=retry_failed,
                                   pairs=pairs_path, split=split, corpus=corpus_path))


def _stage_options(task_names, out: str, dedup_threshold: float, kw: dict[str, Any]):
    from curate.generate.stage import StageOptions

    return StageOptions(tasks=tuple(task_names), out=out, llm=_llm_opts(kw), seed=kw["seed"],
                        dedup_threshold=dedup_threshold, tasks_dirs=tuple(kw["tasks_dirs"]),
                        prompts_dirs=tuple(kw["prompts_dirs"]))


@cli.command(name="filter")
@click.option("--in", "in_path", type=click.Path(dir_okay=False), required=True, help="Records to filter (JSONL).")
@click.option("--out", type=click.Path(file_okay=False), required=True,
              help="Folder for filtered.jsonl, rejected.jsonl, filter_report.json and plots.")
@click.option("--recipe", default="default", show_default=True,
              help="A shipped recipe name (default, strict) or a recipe YAML file.")
@click.option("--teacher", default=None, help="Teacher embedding model (sentence-transformers name or path, or openai:MODEL "
                                               "served at --teacher-base-url); default: the recipe's, else the "
                                               "bundled all-MiniLM-L6-v2.")
@click.option("--query-prompt", default=None, help="Prefix for queries given to the teacher (e.g. 'query: ').")
@click.option("--doc-prompt", default=None, help="Prefix for documents given to the teacher (e.g. 'passage: ').")
@click.option("--corpus", "corpus_path", type=click.Path(dir_okay=False), default=None,
              help="Real documents (JSONL with 'text', BEIR corpus.jsonl works) added to the teacher's ranking pool.")
@executor_options("the per-record steps (heuristics, judges, sts_gap) and the teacher's encoding")
@_llm_options
@teacher_url_option
def filter_cmd(in_path, out, recipe, teacher, query_prompt, doc_prompt, corpus_path, **kw) -> None:
    """Drop faulty records and negatives; every drop goes to rejected.jsonl with its step and reason.

    Judges (refute/answerability steps) use the LLM options below; by default the embedded model.
    """
    from curate.filter.main import FilterOptions, filter_main

    executor = executor_from(kw)
    filter_main(FilterOptions(inp=in_path, out=out, recipe=recipe, teacher=teacher, query_prompt=query_prompt,
                              doc_prompt=doc_prompt, corpus=corpus_path, llm=_llm_opts(kw), executor=executor))


def R(name: str, schema: type | None = None) -> click.ParamType:
    """A number option's type: the range declared on the field ``name`` of ``schema`` (default:
    ``MineOptions``), the one that recipes, grids and ``Method.make`` check too (a method may
    narrow it further)."""
    import typing

    from curate.core.params import field_range
    from curate.mine.options import MineOptions

    schema = schema or MineOptions
    meta = field_range(schema, name)
    hint = typing.get_type_hints(schema)[name]
    kind = click.IntRange if int in (typing.get_args(hint) or (hint,)) else click.FloatRange
    return kind(meta.get("min"), meta.get("max"), min_open=bool(meta.get("min_open")),
                max_open=bool(meta.get("max_open")))


@cli.command()
@click.option("--kind", type=click.Choice(["classification", "clustering", "sts"]), required=True,
              help="What the input holds: labelled examples (a cluster id is a label) or scored sentence pairs.")
@click.option("--in", "in_path", type=click.Path(dir_okay=False), required=True,
              help="JSONL: {\"text\", \"label\"} lines, or {\"sentence1\", \"sentence2\", \"score\"} for sts.")
@click.option("--out", type=click.Path(file_okay=False), required=True,
              help="Folder for converted.jsonl and convert_summary.json.")
@click.option("--teacher", is_flag=False, flag_value="bundled", default=None, metavar="[MODEL]",
              help="Pick the hardest negatives with this teacher (bare --teacher: the bundled all-MiniLM-L6-v2). "
                   "Default: random for classification/clustering, the bundled teacher for sts.")
@click.option("--random-negatives", is_flag=True, help="Draw negatives at random, sts included.")
@click.option("--task-text", default=None, help="The task instruction every record gets (default: one per kind).")
@click.option("--negatives", "n_negatives", type=click.IntRange(1), default=4, show_default=True,
              help="Negatives per record.")
@click.option("--min-score", type=float, default=4.0, show_default=True,
              help="sts: pairs scoring at least this become records (in the data's own units).")
@click.option("--scale-max", type=click.FloatRange(0, min_open=True), default=5.0, show_default=True,
              help="sts: the top of the data's score scale (scores must lie in [0, this]).")
@click.option("--max-ratio", type=R("percent", Ceiling), default=0.95, show_default=True,
              help="sts with a teacher: skip negatives the teacher scores above this fraction of the positive.")
@click.option("--corpus", "corpus_path", type=click.Path(dir_okay=False), default=None,
              help="sts: draw negatives from these texts (JSONL with 'text') instead of the input's sentences.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for every per-example draw.")
@teacher_url_option
def convert(kind, in_path, out, teacher, random_negatives, task_text, n_negatives, min_score, scale_max,
            max_ratio, corpus_path, seed) -> None:
    """Turn classification, clustering or STS data into records (NV-Embed's example-based labels).

    Classification/clustering: each example is a query, another example with its label the
    positive, examples of other labels the negatives. STS: each pair scoring at least
    --min-score gives two records (both directions) with negatives mined from the other
    sentences, never the partner.
    """
    from curate.convert.main import CONVERTED, ConvertOptions, convert_main

    summary = convert_main(ConvertOptions(kind=kind, inp=in_path, out=out, teacher=teacher,
                                          random_negatives=random_negatives, task=task_text, negatives=n_negatives,
                                          seed=seed, min_score=min_score, scale_max=scale_max, max_ratio=max_ratio,
                                          corpus=corpus_path))
    click.echo(f"{kind}: {summary['records']} records in {Path(out) / CONVERTED}")


def D(name: str):
    """``curate mine``'s default for an option: the one written in ``MineOptions``."""
    from curate.mine.options import MineOptions

    return MineOptions.__dataclass_fields__[name].default


@cli.command()
@click.option("--data", type=click.Path(file_okay=False), default=None,
              help="BEIR folder (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv).")
@click.option("--split", default=D("split"), show_default=True, help="Qrels split of --data.")
@click.option("--qrels", default=None,
              help="Qrels file to use with --data instead of qrels/SPLIT.tsv.")
@click.option("--min-relevance", type=int, default=D("min_relevance"), show_default=True,
              help="Qrels relevance that makes a document a positive.")
@click.option("--pairs", type=click.Path(dir_okay=False), default=None,
              help='JSONL of {"query": ..., "positive": text or [texts]}; same query text = one query.')
@click.option("--in", "records", type=click.Path(dir_okay=False), default=None,
              help="curate records: mined negatives are added to the ones they have.")
@click.option("--hf", default=None, help="Hugging Face dataset: hub name, save_to_disk folder or local data file.")
@click.option("--hf-split", default=D("hf_split"), show_default=True)
@click.option("--hf-config", default=None, help="Dataset configuration name.")
@click.option("--query-column", default=None, help="Query column of --hf (default: the first).")
@click.option("--positive-column", default=None, help="Positive column of --hf, text or list (default: the second).")
@click.option("--id-column", default=None, help="Query id column of --hf (for --check-qrels).")
@click.option("--corpus", type=click.Path(dir_okay=False), default=None,
              help="Documents to mine from (JSONL with 'text'; BEIR corpus.jsonl works). Default: the positives.")
@click.option("--out", type=click.Path(file_okay=False), required=True,
              help="Folder for mined.jsonl, mine_report.json and plots.")
@click.option("--teacher", "teachers", multiple=True,
              help="Embedding model (sentence-transformers name or path, or openai:MODEL served at "
                   "--teacher-base-url); repeat for an ensemble. Default: the bundled all-MiniLM-L6-v2.")
@click.option("--query-prompt", default=None, help="Prefix for queries given to the teacher(s).")
@click.option("--doc-prompt", default=None, help="Prefix for documents given to the teacher(s).")
@click.option("--batch-size", type=R("batch_size"), default=D("batch_size"), show_default=True)
@click.option("--ensemble", type=click.Choice(["intra", "cross"]), default=None,
              help="Combine several teachers: intra = one negative per teacher in turn; cross = one teacher per query.")
@click.option("--ensemble-dedup/--no-ensemble-dedup", default=D("ensemble_dedup"), show_default=True,
              help="intra: skip a document another teacher already gave.")
@click.option("--cross-assign", type=click.Choice(["hash", "roundrobin"]), default=D("cross_assign"), show_default=True)
@click.option("--cross-encoder", default=None, help="Rescore candidates with this CrossEncoder before thresholds.")
@click.option("--method", default=D("method"), show_default=True,
              help="Mining preset: naive, shift, window, abs, marginpos, percpos, or one from --preset-module.")
@click.option("--preset-module", "preset_modules", multiple=True, type=click.Path(dir_okay=False),
              help="Python file of @preset functions (curate.negatives.presets) to add mining methods.")
@click.option("--margin", type=R("margin"), default=None,
              help="percpos: share of the positive score, in (0, 1] (default 0.95); marginpos: gap (default 0.05).")
@click.option("--max-score", type=float, default=None, help="abs: highest negative score (default 0.7).")
@click.option("--shift", type=R("shift"), default=None, help="shift: candidates skipped (default 10).")
@click.option("--rank-min", type=R("rank_min"), default=None,
              help="window: first rank (default 30; at most --rank-max).")
@click.option("--rank-max", type=R("rank_max"), default=None, help="window: last rank (default 100).")
@click.option("--min-score", type=float, default=None, help="Floor: candidates scoring below it are never mined.")
@click.option("-k", "--num-negatives", "k", type=R("k"), default=D("k"), show_default=True)
@click.option("--sample", type=click.Choice(["top", "uniform", "softmax", "top1+"]), default=D("sample"),
              show_default=True, help="How the k negatives are chosen among the valid candidates.")
@click.option("--pool", type=R("pool"), default=D("pool"), show_default=True,
              help="Sampling pool: the first N valid candidates.")
@click.option("--temperature", type=R("temperature"), default=D("temperature"), show_default=True,
              help="softmax / top1+ temperature.")
@click.option("--seed", type=int, default=D("seed"), show_default=True, help="Seed of the per-query generators.")
@click.option("--depth", type=R("depth"), default=D("depth"), show_default=True,
              help="Candidates retrieved first; queries short of valid ones are searched deeper.")
@click.option("--max-depth", type=R("max_depth"), default=None, help="Deepest search (default: the whole corpus).")
@click.option("--index", "index_kind", type=click.Choice(["flat", "ivf", "hnsw"]), default=D("index"), show_default=True,
              help="FAISS index: flat is exact; ivf and hnsw are approximate, for large corpora.")
@click.option("--nprobe", type=R("nprobe"), default=D("nprobe"), show_default=True, help="ivf: lists visited.")
@click.option("--ef-search", type=R("ef_search"), default=D("ef_search"), show_default=True, help="hnsw: efSearch.")
@click.option("--task-text", default=D("task_text"), show_default=True,
              help="Task instruction of new records.")
@click.option("--levels/--no-levels", default=D("levels"), show_default=True,
              help="Give mined negatives levels 1-4 by position (hardest first).")
@click.option("--min-negatives", type=R("min_negatives"), default=None,
              help="Write only queries with at least this many mined negatives (default 1; 0 with --in).")
@click.option("--positive-choice", type=click.Choice(["first", "teacher"]), default=D("positive_choice"), show_default=True,
              help="The record's positive among a query's equally relevant ones: the first listed, or the one "
                   "the teacher scores highest.")
@click.option("--anchor", type=click.Choice(["lowest", "record"]), default=D("anchor"), show_default=True,
              help="The positive score percpos/marginpos thresholds use: the query's lowest labelled positive, "
                   "or the record's own positive.")
@click.option("--positive-top", type=R("positive_top"), default=D("positive_top"), show_default=True,
              help="Drop queries whose own positive the teacher ranks below this rank (Linq's teacher filter; "
                   "0: no gate).")
@click.option("--check-qrels", default=None,
              help="BEIR qrels the miner did not see: report the share of negatives they call relevant.")
@click.option("--limit", type=R("limit"), default=None, help="Mine only the first N queries.")
@executor_options("the teachers' encoding and the search (one shard of the corpus a worker)")
@teacher_url_option
def mine(**kw) -> None:
    """Mine hard negatives for queries with known positives (NV-Retriever's positive-aware methods).

    Thresholds use each query's lowest positive score; positives are never mined.
    """
    from curate.mine.main import MineOptions, mine_main

    kw["index"] = kw.pop("index_kind")
    kw["executor"] = executor_from(kw)
    mine_main(MineOptions(**kw))


@cli.command()
@click.argument("docs", type=click.Path())
@click.option("--out", type=click.Path(file_okay=False), required=True,
              help="Run folder: generate/, filter/, mine/, relabel/, export/ and pipeline.json (re-run to resume).")
@click.option("-n", "--num-examples", "n", type=click.IntRange(1), default=200, show_default=True,
              help="Passages sampled with --seed, one query each (a few hundred suit the bundled CPU model: "
                   "minutes to an hour; a server takes thousands).")
@click.option("--task", default="from-corpus", show_default=True,
              help="The query-writing spec: from-corpus (one passage a query), from-corpus-multihop (a query "
                   "over 2-3 related passages, each a positive) or a spec file with inputs: [positive].")
@click.option("--recipe", default="from-corpus", show_default=True,
              help="Filter recipe: a shipped name or a recipe YAML file.")
@click.option("--relabel/--no-relabel", default=False, show_default=True,
              help="Have an LLM judge relabel the mined negatives before export (off: the bundled model "
                   "is too weak a judge; use a real one behind --base-url).")
@click.option("--teacher", default=None,
              help="Teacher embedding model for filter and mine  [default: the recipe's, else the bundled "
                   "all-MiniLM-L6-v2].")
@click.option("--format", "formats", multiple=True, default=("sentence-transformers",), show_default=True,
              help="Export format, as curate export takes it (hf, sentence-transformers, ..., all); repeatable.")
@click.option("--license", default=None, metavar="ID",
              help="The export card's licence, a Hub id such as cc-by-4.0: the one your documents are under.")
@click.option("--plots/--no-plots", default=True, show_default=True, help="Write filter's and mine's plots.")
@_llm_options
@teacher_url_option
def pipeline(docs, out, n, task, recipe, relabel, teacher, formats, license, plots, **kw) -> None:
    """From documents alone to training data: generate --from-corpus, filter, mine, [relabel,] export.

    DOCS is a BEIR folder, a corpus JSONL, a folder of .txt/.md/.html files or one such file.
    Each stage writes its own sub-folder of OUT; re-running the same command resumes, skipping
    the stages done earlier, and answers the LLM sent before come from OUT/.cache/llm.sqlite.
    Ends with the funnel (what each stage kept, and why it dropped the rest), also in
    OUT/pipeline.json.
    """
    from curate.pipeline import PipelineOptions, run_pipeline

    run_pipeline(PipelineOptions(docs=docs, out=out, n=n, seed=kw["seed"], llm=_llm_opts(kw), task=task, recipe=recipe,
                                 relabel=relabel, teacher=teacher, formats=tuple(formats), license=license,
                                 plots=plots,
                                 prompts_dirs=tuple(kw["prompts_dirs"])))


@cli.command()
@click.option("--model", default=None,
              help="Hugging Face model name or folder, or a GGUF file (converted once). Default: the bundled model.")
@click.option("--vllm-python", type=click.Path(dir_okay=False), default=None, envvar="CURATE_VLLM_PYTHON",
              show_envvar=True, help="Python of the environment vLLM is installed in  [default: this one, "
                                     "else ./.venv-vllm from `make vllm`].")
@click.option("--port", type=click.IntRange(1, 65535), default=8000, show_default=True)
@click.option("--max-num-seqs", type=click.IntRange(1), default=256, show_default=True,
              help="Sequences vLLM decodes at once; match curate's --concurrency.")
@click.option("--tensor-parallel-size", "tp", type=click.IntRange(1), default=1, show_default=True)
@click.option("--max-model-len", type=click.IntRange(256), default=None,
              help="Context length cap (saves KV memory)  [default: the model's; 4096 on the CPU build].")
@click.option("--start-timeout", type=click.FloatRange(1), default=1800.0, show_default=True)
@click.option("--embed", is_flag=True,
              help="Serve an embedding model (/v1/embeddings) for --teacher openai:NAME; with no --model, the "
                   "bundled all-MiniLM-L6-v2.")
@click.option("--replicas", type=click.IntRange(1), default=1, show_default=True,
              help="Servers to run as Ray actors (one GPU each with --gpus-per-replica 1); their URLs go to "
                   "--urls-file, which --base-url and --teacher-base-url take; a replica that dies is restarted.")
@click.option("--urls-file", type=click.Path(dir_okay=False), default="replicas.txt", show_default=True,
              help="Where --replicas writes the servers' URLs, one a line.")
@click.option("--server-command", default=None, metavar="TEMPLATE",
              help="Each replica runs this OpenAI-compatible server instead of vLLM; {host} and {port} are its own, "
                   "{python} this Python.")
@click.option("--ray-address", default=None, help="A Ray cluster to start the replicas on ('auto': this machine's).")
@click.option("--gpus-per-replica", type=click.FloatRange(0.0), default=0.0, show_default=True)
@click.argument("vllm_args", nargs=-1, type=click.UNPROCESSED)
def serve(model, vllm_python, port, max_num_seqs, tp, max_model_len, start_timeout, embed, replicas, urls_file,
          server_command, ray_address, gpus_per_replica, vllm_args) -> None:
    """Start a vLLM server on 127.0.0.1 tuned for batch generation (or, with --embed, an
    embedding model for the teacher); Ctrl-C stops it.

    Works with vLLM's GPU build (needs an NVIDIA GPU) and its CPU build (`make vllm`).
    Extra arguments after `--` go to vLLM unchanged.
    """
    from curate.llm.serve import serve as run_serve

    run_serve(model, port, max_num_seqs, tp, max_model_len, tuple(vllm_args), start_timeout, vllm_python, embed,
              replicas, urls_file, server_command, ray_address, gpus_per_replica)


from curate.ablate.command import ablate  # noqa: E402  (each stage's command lives with it)
from curate.evaluate.command import eval_command  # noqa: E402
from curate.export.command import export  # noqa: E402

cli.add_command(export)
cli.add_command(eval_command)
cli.add_command(ablate)


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
