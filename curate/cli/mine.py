"""``curate mine``: hard negatives for queries with known positives (``curate.mine.main.STAGE``, run by ``curate.core.stage.run_stage``).

Its options are ``MineOptions``'s fields: the search settings (``SearchSettings``), the preset's
knobs (``curate.negatives.knobs.Knobs``, whose renamed knobs stay as hidden options) and the
inputs and outputs."""

from __future__ import annotations

import click

from curate.cli.options import Command, from_options, options_from
from curate.cli.teacher import teacher_servers


@click.command(cls=Command)
@options_from("curate.mine.options:MineOptions", exclude=("plots",))
@teacher_servers
def mine(**kw) -> None:
    """Mine hard negatives for queries with known positives (NV-Retriever's positive-aware methods).

    Thresholds use each query's lowest positive score; positives are never mined.
    """
    from curate.core.stage import run_stage
    from curate.mine.main import STAGE, MineOptions

    run_stage(STAGE, from_options(MineOptions, kw))
