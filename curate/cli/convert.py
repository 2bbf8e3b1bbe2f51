"""``curate convert``: labelled or scored data into records (``curate.convert.main.STAGE``, run by ``curate.core.stage.run_stage``)."""

from __future__ import annotations

import click

from curate.cli.options import Command, from_options, options_from
from curate.cli.teacher import teacher_servers


@click.command(cls=Command)
@options_from("curate.convert.main:ConvertOptions")
@teacher_servers
def convert(**kw) -> None:
    """Turn classification, clustering or STS data into records (NV-Embed's example-based labels).

    Classification/clustering: each example is a query, another example with its label the
    positive, examples of other labels the negatives. STS: each pair scoring at least
    --min-score gives two records (both directions) with negatives mined from the other
    sentences, never the partner.
    """
    from curate.core.stage import run_stage
    from curate.convert.main import STAGE, ConvertOptions

    run_stage(STAGE, from_options(ConvertOptions, kw))  # prints "KIND: N records in OUT/converted.jsonl"
