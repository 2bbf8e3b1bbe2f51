"""``curate filter``: a recipe of steps over records (``curate.filter.main.STAGE``, run by ``curate.core.stage.run_stage``)."""

from __future__ import annotations

import click

from curate.cli.options import Command, from_options, options_from
from curate.cli.teacher import teacher_servers


@click.command(name="filter", cls=Command)
@options_from("curate.filter.main:FilterOptions", exclude=("plots",))
@teacher_servers
def filter_cmd(**kw) -> None:
    """Drop faulty records and negatives; every drop goes to rejected.jsonl with its step and reason.

    Judges (refute/answerability steps) use the LLM options below; by default the embedded model.
    """
    from curate.core.stage import run_stage
    from curate.filter.main import STAGE, FilterOptions

    run_stage(STAGE, from_options(FilterOptions, kw))
