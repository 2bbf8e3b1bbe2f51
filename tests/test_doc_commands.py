"""Every ``curate`` command the docs show is one curate takes.

The parse check reads every fenced block of the README and of docs/ and hands each ``curate ...``
line to the real command line's parser (nothing runs): a renamed option, a removed command or a
value of the wrong type in the docs fails here, with the page and the line. The README's tour is
run line by line, as written, by tests/test_tour.py.
"""

from __future__ import annotations

import functools
import re
import shlex
from pathlib import Path

import click
import pytest

from curate.cli import cli
from tests.helpers import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```", re.S | re.M)
SHELL = {"", "bash", "sh", "shell", "console"}
# folders of the checkout: a path in them that the docs name must be there (the parse runs in the checkout)
SHIPPED = {"data", "bench", "filters", "tasks", "prompts", "docs", "curate", "tests"}


def doc_commands(page: Path) -> list[tuple[int, str]]:
    """(line number, command) for every ``curate`` line of ``page``'s shell blocks, continuation
    lines joined and the trailing comment cut."""
    text = page.read_text(encoding="utf-8")
    out = []
    for block in FENCE.finditer(text):
        if block.group(1) not in SHELL:
            continue
        first = text.count("\n", 0, block.start(2)) + 1
        lines = block.group(2).splitlines()
        i = 0
        while i < len(lines):
            start, line = first + i, lines[i]
            while line.rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line.rstrip()[:-1].rstrip() + " " + lines[i].strip()
            i += 1
            line = re.sub(r"\s+#\s.*$", "", line).strip()
            if line.startswith("curate "):
                out.append((start, line))
    return out


def _plugin_commands() -> set[str]:
    """Commands the docs' plugin examples add (``curate sample``): not there until installed."""
    names = set()
    for pyproject in (REPO / "docs" / "examples" / "plugins").glob("*/pyproject.toml"):
        text = pyproject.read_text(encoding="utf-8")
        block = re.search(r'\[project\.entry-points\."curate\.stages"\]\n(.*?)(\n\[|\Z)', text, re.S)
        names |= {ln.split("=")[0].strip() for ln in block.group(1).splitlines() if "=" in ln} if block else set()
    return names


def parse(command: str) -> None:
    """Hand ``command`` to curate's parser, subcommands included, in the checkout (where the
    docs' relative paths of shipped files point); raises what click raises."""
    import os

    here = os.getcwd()
    os.chdir(REPO)
    try:
        _parse(command)
    finally:
        os.chdir(here)


def _parse(command: str) -> None:
    ctx = cli.make_context("curate", shlex.split(command)[1:])
    group = cli
    while True:  # a group keeps the subcommand apart from its arguments (click's protected args)
        args = [*getattr(ctx, "_protected_args", []), *ctx.args]
        if not args:
            return
        name, cmd, rest = group.resolve_command(ctx, args)
        ctx = cmd.make_context(name, rest, parent=ctx)
        if not isinstance(cmd, click.Group):
            return
        group = cmd


def test_every_curate_command_in_the_docs_parses():
    plugins = _plugin_commands()
    seen, wrong = 0, []
    for page in PAGES:
        for line, command in doc_commands(page):
            if "..." in command or " [" in command or shlex.split(command)[1] in plugins:
                continue  # an elided line, a synopsis ([--option VALUE]), a plugin's own command
            seen += 1
            try:
                parse(command)
            except click.ClickException as e:
                missing = re.search(r"Path '([^']+)' does not exist", e.format_message())
                if missing and Path(missing.group(1)).parts[0] not in SHIPPED:
                    continue  # the reader's own file (my_docs/, pairs.jsonl): not there here
                wrong.append(f"{page.relative_to(REPO)}:{line}: {command}\n    {e.format_message()}")
    assert not wrong, "\n".join(wrong)
    assert seen > 40, "the docs' commands were found"


def test_a_misspelt_option_in_a_page_would_be_caught(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("text\n\n```\ncurate mine --data d --splitt train \\\n    --out o   # a comment\n```\n",
                    encoding="utf-8")
    ((line, command),) = doc_commands(page)
    assert (line, command) == (4, "curate mine --data d --splitt train --out o")
    with pytest.raises(click.NoSuchOption, match="--splitt"):
        parse(command)


def test_the_command_line_reference_is_written_from_the_declarations():
    """docs/cli.md is what `python -m curate.cli.reference` writes from the options' declarations
    (the ones --help shows): a changed flag, default or help text must be written there too."""
    from curate.cli.reference import markdown

    page = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    assert page == markdown(), "docs/cli.md is out of date: python -m curate.cli.reference > docs/cli.md"


TABLE_PAGES = {"mine": "stages/mine.md", "export": "stages/export.md", "pipeline": "stages/pipeline.md"}


@pytest.mark.parametrize("command, page", sorted(TABLE_PAGES.items()))
def test_every_flag_an_option_table_names_is_the_commands(command, page):
    """The stage pages' option tables (first column) name flags the command has."""
    ctx = click.Context(cli)
    cmd = cli.get_command(ctx, command)
    known = {o for p in cmd.params for o in (*p.opts, *getattr(p, "secondary_opts", ()))}
    text = (REPO / "docs" / page).read_text(encoding="utf-8")
    named = {f for row in re.findall(r"^\| (`-[^|]*)\|", text, re.M) for f in re.findall(r"`(-{1,2}[\w-]+)", row)}
    assert named, f"docs/{page} has an option table"
    assert named - known == set(), f"docs/{page} names flags `curate {command}` does not have"


# --- docs/cli.md row by row against --help ------------------------------------------------------

WIDE = 10_000  # a terminal this wide wraps no help text, so a row is one line of --help


@functools.cache
def help_rows(path: tuple[str, ...]) -> dict[str, str]:
    """``curate PATH... --help``'s options, by first flag: the text beside each, as printed."""
    from click.testing import CliRunner

    result = CliRunner().invoke(cli, [*path, "--help"], terminal_width=WIDE, max_content_width=WIDE)
    assert result.exit_code == 0, result.output
    options = result.output.split("\nOptions:\n", 1)[1].split("\n\n", 1)[0]
    rows: dict[str, str] = {}
    flag = None
    for line in options.splitlines():
        if line.startswith("  -"):  # a new option: its flags, two spaces, its help
            spec, _, text = line[2:].partition("  ")
            flag = re.search(r"-{1,2}[\w-]+", spec)[0]
            rows[flag] = text
        elif flag:  # a long spec puts the help on the next line
            rows[flag] += " " + line
    return {f: " ".join(t.split()) for f, t in rows.items()}


def page_rows() -> dict[tuple[str, ...], dict[str, str]]:
    """docs/cli.md's option rows, by command path and first flag: the text of the `what` cell."""
    sections: dict[tuple[str, ...], dict[str, str]] = {}
    rows: dict[str, str] = {}
    for line in (REPO / "docs" / "cli.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("## curate "):
            rows = sections.setdefault(tuple(line.split()[2:]), {})
        elif line.startswith("| `-"):
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            rows[re.search(r"`(-{1,2}[\w-]+)", cells[0])[1]] = cells[-1]
    return sections


def test_every_option_on_the_reference_page_reads_as_its_help():
    """Each option's text on docs/cli.md is what `curate CMD --help` prints beside it (the
    placeholders filled, the [default/env var] notes kept), whitespace aside."""
    from curate.cli.reference import command_paths

    page = page_rows()
    wrong = []
    for path in command_paths():
        shown = help_rows(tuple(path))
        on_page = page.get(tuple(path), {})
        assert on_page.keys() == shown.keys() - {"-h"}, f"curate {' '.join(path)}: options differ"
        wrong += [f"curate {' '.join(path)} {flag}:\n  page: {on_page[flag]}\n  help: {shown[flag]}"
                  for flag in on_page if on_page[flag] != shown[flag]]
    assert not wrong, "\n".join(wrong)


def test_no_placeholder_is_left_on_the_reference_page():
    """A ``{name}`` on docs/cli.md is one --help prints too (a template's own ``{host}``), never a
    placeholder --help fills and the page left as written (``{formats}``, ``{presets}``)."""
    page = page_rows()
    left = []
    for path, rows in page.items():
        shown = " ".join(help_rows(path).values())
        left += [f"curate {' '.join(path)} {flag}: {name}" for flag, text in rows.items()
                 for name in re.findall(r"(?<!\{)\{\w+\}(?!\})", text) if name not in shown]
    assert not left, "placeholders --help fills:\n" + "\n".join(left)


def test_no_option_states_its_default_twice():
    from curate.cli.reference import command_paths

    twice = [f"curate {' '.join(path)} {flag}: {text}" for path in command_paths()
             for flag, text in help_rows(tuple(path)).items() if text.count("[default:") > 1]
    assert not twice, "\n".join(twice)


def test_the_reference_page_keeps_the_env_var_notes():
    api_key = page_rows()[("pipeline",)]["--api-key"]
    assert "[env var: OPENAI_API_KEY]" in api_key
