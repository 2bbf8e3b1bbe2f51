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
    module is imported when its command is asked for (its help, a run, or ``curate --help``'s
    one-line summaries). A plugin that cannot be a command (broken, a name already taken, options
    no command can have) is listed as unavailable with one warning line; running it is its one
    error line; the other commands work."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_plugin_stages()})

    def resolve_command(self, ctx: click.Context, args: list[str]):
        if args:  # the command being run says its plugin's fault as its error, not as a warning too
            ctx.meta[_RUNNING] = args[0]
        return super().resolve_command(ctx, args)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        command = super().get_command(ctx, name)
        if name not in _plugin_stages():
            return command
        from curate.core.registry import warn_left_out
        from curate.core.stage import STAGES

        running = ctx.meta.get(_RUNNING) == name
        if running:
            STAGES.hush(name)
        try:
            return plugin_command(name, command, ctx.help_option_names)
        except CurateError as e:
            if not running:
                warn_left_out(str(e))
            return _Unavailable(name, str(e))


_RUNNING = "curate.running"  # ctx.meta key: the name of the command this invocation runs


def _plugin_stages() -> set[str]:
    from importlib.metadata import entry_points

    return {ep.name for ep in entry_points(group="curate.stages")}


def plugin_command(name: str, shipped: click.Command | None, help_names: list[str]) -> click.Command:
    """The command of the stage plugin ``name``, checked as far as can be before it runs: loaded,
    its name its own (not a shipped command's), its options a dataclass whose defaults fit their
    types and whose flags clash with no other; any fault is one line naming it and its package."""
    from curate.core.params import check_schema
    from curate.core.stage import STAGES, Stage

    fault = STAGES.fault(name)
    if fault:
        raise CurateError(fault)
    stage, package = STAGES.get(name), STAGES.origin(name)
    if package == "curate" and shipped is not None:  # an entry point naming curate's own stage
        return shipped
    where = f"stage plugin {name!r} (package {package})"
    if shipped is not None:
        raise CurateError(f"{where} takes the name of curate's own command {name!r} (package curate); "
                          "a name can be taken once (rename the plugin's)")
    if not isinstance(stage, Stage):
        raise CurateError(f"{where}: registered {type(stage).__name__} {stage!r}, not a curate.core.stage.Stage")
    check_schema(where, stage.options)
    command = stage_command(name, stage, package)
    try:
        params = command.params  # the options are built here: a field no option can be is said now
    except (TypeError, ValueError) as e:
        raise CurateError(f"{where}: its options cannot be command-line options: {e}") from None
    _check_flags(where, params, help_names)
    return command


def _check_flags(where: str, params: list[click.Parameter], help_names: list[str]) -> None:
    """No two options on one flag: a field's flag that is ``--help`` (or ``-h``) would run the stage
    where help was asked for, and one flag on two fields would hide one of them."""
    taken = {flag: "click's own help option" for flag in help_names}
    for param in params:
        if not isinstance(param, click.Option):
            continue
        for flag in (*param.opts, *param.secondary_opts):
            if flag in taken:
                raise CurateError(f"{where}: the option of field {param.name!r} would be {flag}, which is "
                                  f"{taken[flag]}; rename the field or give it another 'flag' in its metadata")
            taken[flag] = f"field {param.name!r}'s option"


class _Unavailable(click.Command):
    """A plugin stage that cannot be a command: listed as unavailable, and running it (or asking
    for its help) is its one error line."""

    def __init__(self, name: str, why: str):
        super().__init__(name, help=why, short_help="(unavailable: a faulty plugin, see the warning)",
                         add_help_option=False)
        self.why = why

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        raise CurateError(self.why)


def stage_command(name: str, stage, package: str = "a plugin") -> click.Command:
    """``curate NAME`` for a registered stage: one option per field of its options dataclass."""
    from curate.cli.options import from_options, options_from

    def run(**kw) -> None:
        from curate.core.stage import run_stage

        run_stage(_no_exit(stage, package), from_options(stage.options, kw))

    doc = (stage.run.__doc__ or f"Run the {name} stage (a plugin's).").strip()
    return click.command(name, cls=Command, help=doc)(options_from(stage.options)(run))


def _no_exit(stage, package: str):
    """``stage`` with each of its functions guarded: a plugin calling ``sys.exit`` in its run (or
    check, summary...) would end curate quietly, with its exit status and nothing written; it is
    one error line naming the stage and its package instead (the runner keeps nothing of the run)."""
    import dataclasses

    guarded = {f.name: _guard(getattr(stage, f.name), stage.name, package) for f in dataclasses.fields(stage)
               if f.name != "options" and callable(getattr(stage, f.name))}
    return dataclasses.replace(stage, **guarded)


def _guard(fn, name: str, package: str):
    import functools

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except SystemExit as e:
            code = 0 if e.code is None else e.code
            said = "" if isinstance(code, int) else f" ({' '.join(str(code).split())})"
            raise CurateError(f"stage {name} (package {package}) exited with code {code if not said else 1}{said}; "
                              "a stage returns its report or raises, it must not call sys.exit") from None

    return call


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
