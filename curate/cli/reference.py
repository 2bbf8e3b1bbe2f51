"""The command-line reference page (docs/cli.md), written from the commands themselves.

Every option's flag, default and help text is declared once, on its stage's options dataclass
(``curate.cli.options``). This module writes, for each command, one Markdown table of the very
help records ``--help`` prints (placeholders such as ``{formats}`` filled, the ``[default: ...;
env var: ...]`` notes kept), so the manual's reference cannot drift from the terminal's. The
pages of the manual explain; this one lists. Tests check that the committed page is what this
module writes now, and that each row reads as ``curate CMD --help`` does.

    python -m curate.cli.reference > docs/cli.md
"""

from __future__ import annotations

import click

HEADER = """# Command-line reference

Every command and option, with its default, as `curate COMMAND --help` shows it. This page is
written from the same help records as `--help` (`python -m curate.cli.reference > docs/cli.md`),
and a test fails when it is out of date. The pages under *Stages* explain what the options do.
"""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def help_text(param: click.Parameter, ctx: click.Context) -> str:
    """The text ``--help`` prints beside ``param``, from the record click builds for it: the
    placeholders filled the same way and the notes in brackets (default, env var, range,
    required) kept, so the page says what the terminal says. An argument gets no notes from
    click; a required one is marked here as an option would be."""
    record = param.get_help_record(ctx)
    text = record[1] if record else ""
    if isinstance(param, click.Argument) and param.required:
        text = f"{text}  [required]" if text else "[required]"
    return text


def _flags(param: click.Parameter) -> str:
    if isinstance(param, click.Argument):
        return f"`{param.human_readable_name}`"
    opts = [*param.opts, *param.secondary_opts]
    value = "" if getattr(param, "is_flag", False) else f" {param.make_metavar(click.Context(click.Command('x')))}"
    return ", ".join(f"`{o}`" for o in opts[:1]) + value.replace("|", "\\|") + "".join(
        f", `{o}`" for o in opts[1:])


def command_table(path: list[str]) -> list[str]:
    """The section of ``curate PATH...``: its summary line and a row per option shown in --help."""
    ctx = command_context(path)
    cmd = ctx.command
    summary = (cmd.help or "").split("\n\n")[0]
    out = [f"## curate {' '.join(path)}", "", _cell(summary), ""]
    params = [p for p in cmd.params if not getattr(p, "hidden", False) and p.name != "help"]
    if params:
        out += ["| option | what |", "| --- | --- |"]
        out += [f"| {_flags(p)} | {_cell(help_text(p, ctx))} |" for p in params]
        out.append("")
    return out


def command_context(path: list[str]) -> click.Context:
    """The context ``curate PATH... --help`` builds for the command at ``path`` (its parents'
    contexts above it), so a help record reads the same settings there as here."""
    from curate.cli import cli

    ctx = click.Context(cli, info_name="curate")
    for name in path:
        ctx = click.Context(ctx.command.get_command(ctx, name), info_name=name, parent=ctx)
    return ctx


def command_paths() -> list[list[str]]:
    """``[name]`` for each of curate's own commands and ``[group, name]`` for each of a group's,
    in --help's order (a plugin's command is its author's to document, not this page's)."""
    from curate.cli import cli

    ctx = click.Context(cli)
    paths = []
    for name in cli.list_commands(ctx):
        cmd = cli.get_command(ctx, name)
        if cmd is None or name not in cli.commands:
            continue
        subs = cmd.list_commands(ctx) if isinstance(cmd, click.Group) else [None]
        paths += [[name, sub] if sub else [name] for sub in subs]
    return paths


def markdown() -> str:
    lines = [HEADER]
    for path in command_paths():
        lines += command_table(path)
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
