"""Command-line options generated from dataclass fields (curate.cli.options): each option is
declared once, as a field, and the command builds the dataclass back from what was parsed."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any, Literal

import click
import pytest
from click.testing import CliRunner

from curate.cli import cli
from curate.cli.options import Command, from_options, options_from
from curate.core.errors import CurateError
from tests.helpers import REPO


@dataclass
class Inner:
    depth: int = field(default=3, metadata={"min": 1, "help": "How deep ({what})."})
    label: str | None = field(default=None, metadata={"flag": "--inner-label", "envvar": "CURATE_TEST_LABEL"})


@dataclass(kw_only=True)
class Outer:
    out: str = field(metadata={"path": "dir", "help": "Where."})
    n: int = field(default=10, metadata={"short": "-n", "flag": "--num", "min": 1, "max": 20})
    ratio: float = field(default=0.5, metadata={"min": 0.0, "min_open": True, "max": 1.0})
    mode: Literal["fast", "slow"] = "fast"
    tags: tuple[str, ...] = field(default=(), metadata={"flag": "--tag"})
    pins: dict[str, Any] = field(default_factory=dict, metadata={"flag": "--set"})
    verbose: bool = False
    plots: bool = True
    light: bool | None = field(default=None, metadata={"flag": "--light/--full"})
    width: int | None = field(default=None, metadata={"min": 1})
    old_width: int | None = field(default=None, metadata={"min": 1, "deprecated": "width"})
    hook: Any = field(default=None, metadata={"cli": False})
    inner: Inner = field(default_factory=Inner, metadata={"help_vars": {"what": "the search"}})


def _command(**options):
    seen = {}

    @click.command(cls=Command)
    @options_from(Outer, **options)
    def run(**kw):
        seen["opts"] = from_options(Outer, kw)

    return run, seen


def _invoke(*args, **options):
    command, seen = _command(**options)
    result = CliRunner().invoke(command, list(args))
    return result, seen.get("opts")


def test_every_field_becomes_its_option_and_comes_back():
    result, opts = _invoke("--out", "o", "-n", "3", "--ratio", "1", "--mode", "slow", "--tag", "a", "--tag", "b",
                           "--set", "k=5", "--set", "s=x y", "--verbose", "--no-plots", "--full", "--width", "7",
                           "--depth", "2", "--inner-label", "L")
    assert result.exit_code == 0, result.output
    assert opts == Outer(out="o", n=3, ratio=1.0, mode="slow", tags=("a", "b"), pins={"k": 5, "s": "x y"},
                         verbose=True, plots=False, light=False, width=7, inner=Inner(depth=2, label="L"))


def test_defaults_are_the_fields():
    result, opts = _invoke("--out", "o")
    assert result.exit_code == 0, result.output
    assert opts == Outer(out="o")


@pytest.mark.parametrize("args, needle", [
    ([], "Missing option '--out'"),
    (["--out", "o", "-n", "0"], "Invalid value for '-n' / '--num'"),
    (["--out", "o", "--ratio", "0"], "0<x<=1.0"),
    (["--out", "o", "--mode", "medium"], "'medium' is not one of 'fast', 'slow'"),
    (["--out", "o", "--depth", "0"], "Invalid value for '--depth'"),
    (["--out", "o", "--hook", "x"], "No such option"),
])
def test_types_ranges_and_choices_come_from_the_declaration(args, needle):
    result, _ = _invoke(*args)
    assert result.exit_code == 2
    assert needle in result.output


def test_help_lists_help_defaults_ranges_and_envvars():
    command, _ = _command()
    text = CliRunner().invoke(command, ["--help"], terminal_width=200).output
    assert "-n, --num INTEGER RANGE" in text and "[default: 10; 1<=x<=20]" in text
    assert "--plots / --no-plots" in text and "--light / --full" in text
    assert "How deep (the search)." in text
    assert "env var: CURATE_TEST_LABEL" in text
    assert "--old-width" not in text and "--hook" not in text


def test_envvar_is_read():
    command, seen = _command()
    result = CliRunner().invoke(command, ["--out", "o"], env={"CURATE_TEST_LABEL": "from-env"})
    assert result.exit_code == 0, result.output
    assert seen["opts"].inner.label == "from-env"


def test_a_deprecated_field_is_a_hidden_alias_that_says_so_once():
    command, seen = _command()
    result = CliRunner().invoke(command, ["--out", "o", "--old-width", "4"])
    assert result.exit_code == 0, result.output
    assert seen["opts"].old_width == 4
    assert result.output.splitlines() == ["curate: --old-width is deprecated: use --width"]  # stderr: all there is
    quiet = CliRunner().invoke(command, ["--out", "o", "--width", "4"])
    assert quiet.output == ""


def test_exclude_rename_required():
    result, opts = _invoke("--out", "o", "--count", "2", "--tag", "t", exclude=("plots",), rename={"n": "--count"},
                           required=("tags",))
    assert result.exit_code == 0, result.output
    assert opts.n == 2 and opts.plots is True
    result, _ = _invoke("--out", "o", required=("tags",))
    assert result.exit_code == 2 and "Missing option '--tag'" in result.output
    result, _ = _invoke("--out", "o", "--no-plots", exclude=("plots",))
    assert result.exit_code == 2


def test_a_bad_pair_is_one_line_naming_the_flag():
    result, _ = _invoke("--out", "o", "--set", "oops")
    assert isinstance(result.exception, CurateError)
    assert str(result.exception) == "--set expects NAME=VALUE, got 'oops'"


@pytest.mark.parametrize("command", sorted(cli.commands))
def test_every_command_builds_its_options_and_help(command):
    result = CliRunner().invoke(cli, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output and "--help" in result.output


def test_listing_the_commands_imports_no_stage():
    code = ("import sys; from curate.cli import cli; "
            "print(sorted(m for m in sys.modules if m.startswith('curate.') and not m.startswith('curate.cli')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert out.strip() == "['curate.core', 'curate.core.errors']"


def test_no_command_has_two_options_with_one_name():
    """Click hands every option of one name the same parsed value: `pipeline --base-url X` once
    set the teacher's server to X, because --teacher-base-url's field had --base-url's name."""
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        names = [p.name for p in command.get_params(click.Context(command))]
        assert len(names) == len(set(names)), (name, sorted(n for n in names if names.count(n) > 1))


def test_the_llm_server_and_the_teachers_server_stay_apart(monkeypatch):
    import os

    import curate.flows.pipeline as pipeline
    from curate.embed.kinds.api import BASE_URL_ENV

    seen = {}
    monkeypatch.setenv(BASE_URL_ENV, "")  # restored (unset) afterwards; the option sets it in os.environ
    monkeypatch.setattr(pipeline, "run_pipeline", lambda opts: seen.update(llm=opts.llm.base_urls,
                                                                           teacher=os.environ.get(BASE_URL_ENV)))
    result = CliRunner().invoke(cli, ["pipeline", "docs", "--out", "o", "--base-url", "http://llm:1/v1",
                                      "--teacher-base-url", "http://teacher:2/v1"])
    assert result.exit_code == 0, result.output
    assert seen == {"llm": ("http://llm:1/v1",), "teacher": "http://teacher:2/v1"}
