"""``curate generate``: LLM-written records (``curate.generate.stage.STAGE``, run by ``curate.core.stage.run_stage``)."""

from __future__ import annotations

import click

from curate.cli.options import Command, from_options, options_from


@click.command(cls=Command)
@options_from("curate.generate.stage:GenerateOptions")
def generate(**kw) -> None:
    """Generate (query, positive, 4 graded negatives) records into OUT/generated.jsonl.

    Negatives come hardest first (level 1) to easiest (level 4). Re-running the same command
    resumes: finished items are not redone and cached requests are not sent again.
    With --from-pairs the query and positive are real ones, kept verbatim. With --from-corpus
    the positive is a passage of your documents, kept verbatim, and the model writes the query.
    --from NAME=PATH takes items from an input source a plugin registers.
    """
    from curate.core.stage import run_stage
    from curate.generate.stage import STAGE, GenerateOptions

    if not kw["tasks"] and not kw["pairs"] and not kw["corpus"] and not kw["source"]:
        raise click.UsageError("Missing option '--task' (or give --from-pairs FILE, --from-corpus DOCS or "
                               "--from NAME=PATH).")
    run_stage(STAGE, from_options(GenerateOptions, kw))  # the stage runner prints where the corpus went
