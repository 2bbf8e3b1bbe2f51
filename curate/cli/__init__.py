"""The ``curate`` command line: one module per command, each a thin layer over its stage.

A command's options are its stage's options dataclass, field by field
(``curate.cli.options``): the flags, types, defaults, ranges and help texts are declared
there, once, and the command builds the dataclass back from what was parsed. Listing the
commands (``curate --help``) imports no stage: a command's options are built when that
command runs or shows its help.
"""

from __future__ import annotations

import os
import sys

import click

from curate import __version__
from curate.cli.ablate import ablate
from curate.cli.brainstorm import brainstorm
from curate.cli.convert import convert
from curate.cli.data import data
from curate.cli.eval import eval_command
from curate.cli.export import export
from curate.cli.filter import filter_cmd
from curate.cli.generate import generate
from curate.cli.mine import mine
from curate.cli.options import Command
from curate.cli.pipeline import pipeline
from curate.cli.report import report
from curate.cli.serve import serve
from curate.cli.train import train
from curate.core.errors import CurateError


class Curate(click.Group):
    """The shipped commands, then a command for every stage a plugin registers under the
    ``curate.stages`` entry-point group (``curate NAME``, its options from the stage's options
    dataclass, run by ``run_stage``). Listing them reads the entry points' names only: a plugin's
    module is imported when its command is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_plugin_stages()})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        command = super().get_command(ctx, name)
        if command is None and name in _plugin_stages():
            from curate.core.stage import STAGES

            command = stage_command(name, STAGES.get(name))
        return command


def _plugin_stages() -> set[str]:
    from importlib.metadata import entry_points

    return {ep.name for ep in entry_points(group="curate.stages")}


def stage_command(name: str, stage) -> click.Command:
    """``curate NAME`` for a registered stage: one option per field of its options dataclass."""
    from curate.cli.options import from_options, options_from

    def run(**kw) -> None:
        from curate.core.stage import run_stage

        run_stage(stage, from_options(stage.options, kw))

    doc = (stage.run.__doc__ or f"Run the {name} stage (a plugin's).").strip()
    return click.command(name, cls=Command, help=doc)(options_from(stage.options)(run))


@click.group(cls=Curate, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="curate")
def cli() -> None:
    """Turn LLMs and real retrieval datasets into training data for text-embedding models.

    \b
    Start here:  curate pipeline DOCS --out RUN   (your documents in, training data out)
    Then:        curate report RUN                (one HTML page: funnel, charts, records)
                 curate train RUN                 (a model fine-tuned on it, scored before and after)
    Stages one by one: brainstorm/generate, filter, mine, export; convert, eval, ablate, serve.
    Public collections the docs use:  curate data get scifact
    Docs: docs/index.md in the source, or `curate COMMAND --help`.
    """


cli.command_class = Command  # a command added with @cli.command() builds its options lazily too
for command in (brainstorm, generate, filter_cmd, mine, export, convert, eval_command, ablate, pipeline, report, serve,
                train, data):
    cli.add_command(command)


def main() -> None:
    """Entry point: user errors become one line on stderr, never a traceback."""
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("curate: interrupted; re-run the same command to resume", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except CurateError as e:
        click.echo(f"curate: error: {e}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("curate: interrupted; re-run the same command to resume", err=True)
        sys.exit(130)
    except Exception as e:  # a bug: say so in one line; CURATE_DEBUG=1 shows the traceback
        if os.environ.get("CURATE_DEBUG"):
            raise
        click.echo(f"curate: internal error: {type(e).__name__}: {e} (set CURATE_DEBUG=1 for details)", err=True)
        sys.exit(3)
