"""``curate eval``: score an embedding model on a BEIR folder (``curate.evaluate.main.run_eval``)."""

from __future__ import annotations

import click

from curate.cli.options import Command, from_options, options_from
from curate.cli.teacher import teacher_servers


@click.command(name="eval", cls=Command)
@options_from("curate.evaluate.main:EvalOptions")
@teacher_servers
def eval_command(**kw) -> None:
    """Score an embedding model on a BEIR folder: NDCG@10, Recall@100, MRR@10.

    Embeddings go through the curate cache; a local model folder is fingerprinted, so a
    retrained checkpoint is never served its old vectors.
    """
    from curate.evaluate.main import EvalOptions, run_eval
    from curate.evaluate.report import print_report

    report = run_eval(from_options(EvalOptions, kw), say=lambda msg: click.echo(f"curate eval: {msg}", err=True))
    print_report(report)
