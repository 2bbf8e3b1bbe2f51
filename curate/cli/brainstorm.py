"""``curate brainstorm``: task descriptions per family (``curate.generate.stage.brainstorm_stage``)."""

from __future__ import annotations

import click

from curate.cli.options import Command, from_options, options_from


@click.command(cls=Command)
@options_from("curate.generate.stage:BrainstormOptions", required=("tasks",))
def brainstorm(**kw) -> None:
    """Brainstorm distinct task descriptions into OUT/tasks/FAMILY/tasks.jsonl (inspect or edit them there)."""
    from curate.generate.stage import StageOptions, brainstorm_stage

    brainstorm_stage(from_options(StageOptions, kw), kw["n"])
