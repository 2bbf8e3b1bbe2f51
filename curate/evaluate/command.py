"""The ``curate eval`` click command (registered in ``curate.cli``); the work is in ``main``."""

from __future__ import annotations

import click

from curate.executor_options import teacher_url_option


@click.command(name="eval")
@click.option("--model", default=None,
              help="Embedding model: sentence-transformers name or local folder (default: the bundled MiniLM).")
@click.option("--data", type=click.Path(), required=True,
              help="BEIR folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv.")
@click.option("--split", default="test", show_default=True, help="Qrels split to evaluate.")
@click.option("--light", is_flag=True,
              help="Evaluate on the light set (teacher's top-50 union, 20% of queries) and report the gap to full.")
@click.option("--light-teacher", default=None,
              help="Model that builds the light set (default: the bundled MiniLM).")
@click.option("--light-depth", type=click.IntRange(1), default=50, show_default=True,
              help="Teacher's top-N documents per sampled query kept in the light corpus.")
@click.option("--light-fraction", type=click.FloatRange(0, 1, min_open=True), default=0.2, show_default=True,
              help="Share of the queries the light set samples.")
@click.option("--light-seed", type=int, default=0, show_default=True, help="Seed of the query sample.")
@click.option("--light-set", type=click.Path(dir_okay=False), default=None,
              help="Light set file: read when it exists, else built and written there (default: the cache).")
@click.option("--precision", type=click.Choice(["auto", "fp32", "int8", "fp16", "bf16"]), default="auto",
              show_default=True,
              help="auto: fp32 for a full run; for --light fp16 on a GPU, on a CPU bf16 where native, else int8.")
@click.option("--batch-size", type=click.IntRange(1), default=64, show_default=True)
@click.option("--device", default=None, help="torch device (default: CUDA when available, else CPU).")
@click.option("--query-prompt", default=None, help="Prefix for queries (default: the model's own, if any).")
@click.option("--doc-prompt", default=None, help="Prefix for documents (default: the model's own, if any).")
@click.option("--max-seq-length", type=click.IntRange(1), default=None, help="Truncate inputs to N tokens.")
@click.option("--compare-full", is_flag=True,
              help="With --light: also run (or take from the results cache) the full fp32 evaluation.")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Write the report here (JSON).")
@click.option("--per-query", is_flag=True, help="Put every query's metric values in the --out report.")
@teacher_url_option
def eval_command(**kw) -> None:
    """Score an embedding model on a BEIR folder: NDCG@10, Recall@100, MRR@10.

    Embeddings go through the curate cache; a local model folder is fingerprinted, so a
    retrained checkpoint is never served its old vectors.
    """
    from curate.evaluate.main import EvalOptions, run_eval
    from curate.evaluate.report import print_report

    report = run_eval(EvalOptions(**kw), say=lambda msg: click.echo(f"curate eval: {msg}", err=True))
    print_report(report)
