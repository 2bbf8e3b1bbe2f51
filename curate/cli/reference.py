"""The command-line reference page (docs/cli.md), written from the commands themselves.

Every option's flag, default and help text is declared once, on its stage's options dataclass
(``curate.cli.options``); ``--help`` shows them, and this module writes the same declarations as
one Markdown table per command, so the manual's reference cannot drift from the code. The
pages of the manual explain; this one lists. A test checks that the committed page is what this
module writes now.

    python -m curate.cli.reference > docs/cli.md
"""

from __future__ import annotations

import click

HEADER = """# Command-line reference

Every command and option, with its default, as `curate COMMAND --help` shows it. This page is
written from the same declarations as `--help` (`python -m curate.cli.reference > docs/cli.md`),
and a test fails when it is out of date. The pages under *Stages* explain what the options do.
"""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


_UNSET = getattr(click.core, "UNSET", object())  # click 8.2+: an option given no default


def _default(param: click.Parameter) -> str:
    default = param.default
    if param.required:
        return "required"
    if default is _UNSET and isinstance(param, click.Option) and param.is_flag and not param.secondary_opts:
        return "off"  # a plain switch
    if default is None or default is _UNSET or default == () or callable(default):
        return ""
    if isinstance(param, click.Option) and param.is_flag:
        return "on" if default else "off"
    if isinstance(default, (list, tuple)):
        default = " ".join(map(str, default))
    return f"`{default}`"


def _flags(param: click.Parameter) -> str:
    if isinstance(param, click.Argument):
        return f"`{param.human_readable_name}`"
    opts = [*param.opts, *param.secondary_opts]
    value = "" if getattr(param, "is_flag", False) else f" {param.make_metavar(click.Context(click.Command('x')))}"
    return ", ".join(f"`{o}`" for o in opts[:1]) + value.replace("|", "\\|") + "".join(
        f", `{o}`" for o in opts[1:])


def command_table(name: str, cmd: click.Command) -> list[str]:
    help_text = (cmd.help or "").split("\n\n")[0]
    out = [f"## curate {name}", "", _cell(help_text), ""]
    params = [p for p in cmd.params if not getattr(p, "hidden", False) and p.name != "help"]
    if params:
        out += ["| option | default | what |", "| --- | --- | --- |"]
        for p in params:
            out.append(f"| {_flags(p)} | {_default(p)} | {_cell(getattr(p, 'help', None) or '')} |")
        out.append("")
    return out


def markdown() -> str:
    from curate.cli import cli

    ctx = click.Context(cli)
    lines = [HEADER]
    for name in cli.list_commands(ctx):
        cmd = cli.get_command(ctx, name)
        if cmd is None or name not in cli.commands:  # a plugin's command: not part of curate's reference
            continue
        if isinstance(cmd, click.Group):
            for sub in cmd.list_commands(ctx):
                lines += command_table(f"{name} {sub}", cmd.get_command(ctx, sub))
        else:
            lines += command_table(name, cmd)
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
