"""Plugins that clash or misbehave, run through the real CLI: each fault is one line naming the
plugin and its package (its distribution's name; ``curate`` for a shipped entry), and a faulty
stage plugin costs only its own command.

Each plugin is a module of its own with a ``NAME.dist-info`` beside it, on the PYTHONPATH of a
``python -m curate`` subprocess, as ``tests/extend/test_plugins.py`` lays them out; the
distribution's name has dashes where the module's has underscores, so a message that names the
package can be told from one that names the module.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.extend.test_plugins import _plugin, install, records  # noqa: F401 (fixtures)
from tests.helpers import assert_one_line_error, run_curate

STAGE = '''"""A stage of a test's own."""
from dataclasses import dataclass, field
from curate.core.stage import STAGES, Stage


@dataclass
class Opts:
    out: str = field(metadata={{"help": "Run folder."}})
    {field}


def run(opts, run):
    """Write one note."""
    {body}
    (run.dir / "note.txt").write_text("ran")
    return {{"ran": 1}}


{register}
'''


def plugin(site: Path, dist: str, group: str, entries: dict[str, str], source: str,
           module: str | None = None) -> dict[str, str]:
    """A distribution ``dist`` of one module in ``site`` (tests/extend/test_plugins.py lays it out)."""
    return _plugin(site, dist, group, entries, module, source)


def stage_plugin(site: Path, dist: str, name: str, *, field: str = "n: int = 3", body: str = "pass",
                 as_object: bool = False) -> dict[str, str]:
    """A stage plugin called ``name``: its module registers it, or (``as_object``) its entry point
    names the ``Stage`` itself."""
    module = dist.replace("-", "_")
    made = f'Stage("{name}", Opts, run)'
    source = STAGE.format(field=field, body=body,
                          register=f"STAGE = {made}" if as_object else f'STAGES.register("{name}", {made})')
    return plugin(site, dist, "curate.stages", {name: f"{module}:STAGE" if as_object else module}, source)


# --------------------------------------------------------------------------- names taken twice


@pytest.mark.parametrize("name", ["mine", "export"])
def test_a_stage_plugin_on_a_shipped_stage_name_is_refused_naming_both_packages(tmp_path, name):
    env = stage_plugin(tmp_path / "site", "rival-stage", name)
    proc = run_curate(name, "--out", str(tmp_path / "o"), env=env)
    assert_one_line_error(proc, f"stage {name!r} is registered twice", "(package curate)",
                          "rival_stage.run (package rival-stage)")
    assert not (tmp_path / "o").exists()
    listed = run_curate("--help", env=env)  # the other commands still work, with the clash said once
    assert listed.returncode == 0 and "report" in listed.stdout
    warning = [line for line in listed.stderr.splitlines() if line.strip()]
    assert len(warning) == 1 and "curate: warning:" in warning[0] and "(package rival-stage)" in warning[0]


@pytest.mark.parametrize("as_object", [False, True], ids=["modules-register", "entry-points-name-objects"])
def test_two_distributions_with_one_stage_name_are_refused_naming_both(tmp_path, as_object):
    site = tmp_path / "site"
    stage_plugin(site, "twin-one", "twin", body="print('one')", as_object=as_object)
    env = stage_plugin(site, "twin-two", "twin", body="print('two')", as_object=as_object)
    proc = run_curate("twin", "--out", str(tmp_path / "o"), env=env)
    assert_one_line_error(proc, "stage 'twin' is registered twice", "(package twin-one)", "(package twin-two)")
    assert not (tmp_path / "o").exists(), "neither of them ran"


STEP = '''from dataclasses import dataclass
from curate.filter.base import Step


@dataclass
class Params:
    pass


def {fn}(records, params, ctx):
    return records[:1]


STEP = Step({fn}, Params, kind="map")
'''


@pytest.mark.parametrize("taken", ["shout", "heuristics"])
def test_two_filter_step_plugins_under_one_name_are_refused_naming_both(tmp_path, records, taken):  # noqa: F811
    """Entry points naming the steps themselves: the second one is not silently dropped."""
    site = tmp_path / "site"
    if taken == "shout":
        plugin(site, "shout-one", "curate.filter_steps", {"shout": "shout_one:STEP"}, STEP.format(fn="first"))
    env = plugin(site, "shout-two", "curate.filter_steps", {taken: "shout_two:STEP"}, STEP.format(fn="second"))
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"steps:\n  - {taken}: {{}}\n", encoding="utf-8")
    proc = run_curate("filter", "--in", str(records), "--out", str(tmp_path / "f"), "--recipe", str(recipe), env=env)
    first = "(package shout-one)" if taken == "shout" else "(package curate)"
    assert_one_line_error(proc, f"filter step {taken!r} is registered twice", first,
                          "shout_two.second (package shout-two)")
    assert not (tmp_path / "f").exists()


# --------------------------------------------------------------------------- a stage that exits


@pytest.mark.parametrize("code", [0, 3])
def test_a_stage_plugin_calling_sys_exit_is_one_line_and_a_failure(tmp_path, code):
    env = stage_plugin(tmp_path / "site", "quitter-stage", "quit", body=f"import sys; sys.exit({code})")
    proc = run_curate("quit", "--out", str(tmp_path / "o"), env=env)
    assert_one_line_error(proc, f"stage quit (package quitter-stage) exited with code {code}")
    assert proc.returncode == 2
    assert not (tmp_path / "o" / "note.txt").exists() and not (tmp_path / "o" / "report.json").exists()


# --------------------------------------------------------------------------- options no command can have


@pytest.mark.parametrize("field, says", [
    ('n: int = "x"', ["the default of field 'n'", "expected a whole number, got 'x'"]),
    ("ok: bool = 1", ["the default of field 'ok'", "expected true or false"]),
    ("k: int = field(default=0, metadata={'min': 1})", ["the default of field 'k'", "must be at least 1"]),
])
def test_an_options_default_of_the_wrong_type_is_one_line_naming_the_field(tmp_path, field, says):
    env = stage_plugin(tmp_path / "site", "typo-stage", "typo", field=field)
    proc = run_curate("typo", "--out", str(tmp_path / "o"), env=env)
    assert_one_line_error(proc, "stage plugin 'typo' (package typo-stage)", *says)
    assert "internal error" not in proc.stderr and not (tmp_path / "o").exists()


def test_options_that_are_not_a_dataclass_are_one_line_naming_the_plugin(tmp_path):
    env = stage_plugin(tmp_path / "site", "plain-stage", "plain")
    module = tmp_path / "site" / "plain_stage.py"
    module.write_text(module.read_text(encoding="utf-8").replace("@dataclass\n", "", 1), encoding="utf-8")
    for args in (("plain", "--out", str(tmp_path / "o")), ("plain", "--help")):
        proc = run_curate(*args, env=env)
        assert_one_line_error(proc, "stage plugin 'plain' (package plain-stage)", "not a dataclass")
        assert "internal error" not in proc.stderr


@pytest.mark.parametrize("field, flag", [("help: bool = False", "--help"),
                                         ("hint: bool = field(default=False, metadata={'short': '-h'})", "-h"),
                                         ("a: int = field(default=1, metadata={'flag': '--out'})", "--out")])
def test_an_option_on_a_flag_already_taken_is_refused(tmp_path, field, flag):
    """A field whose flag is ``--help`` would run the stage where its help was asked for."""
    env = stage_plugin(tmp_path / "site", "helpful-stage", "helpful", field=field)
    out = tmp_path / "o"
    for args in (("--out", str(out), "--help"), ("--out", str(out))):
        proc = run_curate("helpful", *args, env=env)
        assert_one_line_error(proc, "stage plugin 'helpful' (package helpful-stage)", f"would be {flag}")
        assert not out.exists(), "the stage did not run"


# --------------------------------------------------------------------------- a broken plugin among others


@pytest.mark.parametrize("entry, source, why", [
    ("broken_stage", "raise ImportError('needs a library that is not installed')\n",
     "ImportError: needs a library that is not installed"),
    ("broken_stage:NOPE", "X = 1\n", "AttributeError: module 'broken_stage' has no attribute 'NOPE'"),
], ids=["raises-on-import", "names-a-missing-object"])
def test_a_broken_stage_plugin_breaks_only_its_own_command(tmp_path, records, entry, source, why):  # noqa: F811
    site = tmp_path / "site"
    install(site, "stage")  # curate sample, a working plugin
    env = plugin(site, "broken-stage", "curate.stages", {"broken": entry}, source)
    named = ["stage plugin 'broken' (package broken-stage, entry point", why]

    listed = run_curate("--help", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "sample" in listed.stdout and "report" in listed.stdout
    _one_warning(listed, *named)

    out = tmp_path / "s"
    ran = run_curate("sample", "--in", str(records), "--out", str(out), "--n", "3", env=env)
    assert ran.returncode == 0, ran.stderr
    assert json.loads((out / "run.json").read_text(encoding="utf-8"))["stage"] == "sample"
    assert sum("curate: warning:" in line for line in ran.stderr.splitlines()) == 1

    report = run_curate("report", str(out), env=env)
    assert report.returncode == 0, report.stderr
    assert (out / "report.html").exists()
    _one_warning(report, *named)

    assert_one_line_error(run_curate("broken", "--out", str(tmp_path / "b"), env=env), *named)
    assert not (tmp_path / "b").exists()


def _one_warning(proc, *needles: str) -> None:
    """Exactly one line on stderr: a warning with every needle."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("curate: warning:") and "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
