"""``curate train RUN``: fine-tune a model on the run's export, evaluated before and after
(``curate.train.main.STAGE``, run by ``curate.core.stage.run_stage``)."""

from __future__ import annotations

import click

from curate.cli.options import Command, from_options, options_from


@click.command(cls=Command)
@options_from("curate.train.main:TrainOptions")
def train(**kw) -> None:
    """Fine-tune a model on RUN's export and score it before and after (NDCG@10, Recall@100, MRR@10).

    RUN is a pipeline run folder (its export/) or an export folder; the model goes to RUN/train/model.
    """
    from curate.core.stage import run_stage
    from curate.train.main import STAGE, TrainOptions

    run_stage(STAGE, from_options(TrainOptions, kw), resume=True)
