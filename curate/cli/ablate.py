"""``curate ablate``: train and compare the arms of a grid (``curate.flows.ablate.main.ablate_main``)."""

from __future__ import annotations

import click

from curate.cli.options import Command, from_options, options_from
from curate.cli.teacher import teacher_servers


@click.command(cls=Command)
@options_from("curate.flows.ablate.main:AblateOptions")
@teacher_servers
def ablate(**kw) -> None:
    """Train the student on every arm of GRID, several seeds each, and compare them.

    Arms are curate recipes (mine / filter / export options), sentence-transformers'
    mine_hard_negatives (kind: st) and the untrained student (kind: base).  Prints mean ± std
    of NDCG@10 per arm and the difference to base and to the best baseline.

    With --executor ray the runs train on Ray workers, several at once (--gpus-per-worker 1 on a
    GPU cluster); their data is made here first, and OUT must be a folder every worker can read.
    """
    from curate.flows.ablate.main import AblateOptions, ablate_main

    ablate_main(from_options(AblateOptions, kw))
