"""``curate export``: records to training files (``curate.export.main``)."""

from __future__ import annotations

import click

from curate.cli.options import Command, from_options, options_from


class PerRow(click.ParamType):
    """``--negatives-per-row``: a positive count, ``all`` (None: every negative of the record) or ``auto``."""

    name = "N|all|auto"

    def convert(self, value, param, ctx):
        if value is None or (isinstance(value, str) and value.strip().lower() == "all"):
            return None
        if isinstance(value, str) and value.strip().lower() == "auto":
            return "auto"
        try:
            n = int(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r}: give a count of at least 1, 'all' or 'auto'", param, ctx)
        if n < 1:
            self.fail(f"{value!r}: give a count of at least 1, 'all' or 'auto'", param, ctx)
        return n


@click.command(cls=Command)
@options_from("curate.export.main:ExportOptions", types={"negatives_per_row": PerRow()})
def export(**kw) -> None:
    """Write records as training data: curriculum, batch order, instructions, dev split, formats.

    The order of rows in the files is the training order; keep the trainer from shuffling it.
    """
    from curate.core.stage import run_stage
    from curate.export.main import STAGE, ExportOptions

    run_stage(STAGE, from_options(ExportOptions, kw))
