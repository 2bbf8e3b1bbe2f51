"""``curate report``: one HTML page of a run's data (``curate.report``)."""

from __future__ import annotations

import click

from curate.cli.options import Command, from_options, options_from


@click.command(name="report", cls=Command)
@options_from("curate.report.main:ReportOptions")
def report(**kw) -> None:
    """Write RUN/report.html: the funnel, time and cost, score charts and a record browser.

    RUN is a pipeline run, one stage's folder (generate, filter, mine, convert, export) or an ablate run.
    The page opens from disk in any browser; nothing is fetched from a network.
    """
    from curate.report.main import ReportOptions, run_report

    path = run_report(from_options(ReportOptions, kw))
    click.echo(f"report: {path}")
