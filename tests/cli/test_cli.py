"""The command line: help everywhere, and bad input as one clear line, never a traceback."""

from __future__ import annotations

import sys

import pytest

from tests.helpers import assert_one_line_error, run_curate


@pytest.mark.parametrize("command", [[], ["generate"], ["brainstorm"], ["serve"], ["filter"], ["convert"]])
def test_every_command_has_help(command):
    proc = run_curate(*command, "--help")
    assert proc.returncode == 0
    assert "Usage:" in proc.stdout


def test_bad_tasks_file_names_file_and_line(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"task": "Find recipes for a dish."}\n{"task": 42\n')
    proc = run_curate("generate", "--task", "short-long", "-n", "1", "--out", str(tmp_path / "o"),
                      "--tasks-file", str(tasks), "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert_one_line_error(proc, "tasks.jsonl:2", "invalid JSON")
    assert not (tmp_path / "o" / "generated.jsonl").exists()


def test_unknown_family_lists_known_ones(tmp_path):
    proc = run_curate("generate", "--task", "nope", "--out", str(tmp_path))
    assert_one_line_error(proc, "unknown task family 'nope'", "short-long")


def test_missing_model_file_is_one_line(tmp_path):
    proc = run_curate("generate", "--task", "sts", "-n", "1", "--out", str(tmp_path),
                      "--model-path", str(tmp_path / "missing.gguf"))
    assert_one_line_error(proc, "missing.gguf")


def test_base_url_needs_a_model_name(tmp_path):
    proc = run_curate("generate", "--task", "sts", "-n", "1", "--out", str(tmp_path),
                      "--base-url", "http://127.0.0.1:9/v1")
    assert_one_line_error(proc, "--model is required")


def test_serve_without_vllm_says_so_in_one_line(tmp_path):
    proc = run_curate("serve", "--vllm-python", str(tmp_path / "no-such-python"))
    assert_one_line_error(proc, "vLLM is not installed", "make vllm", "no-such-python (missing)")
    proc = run_curate("serve", "--vllm-python", sys.executable)  # curate's own environment has no vLLM
    assert_one_line_error(proc, "vLLM is not installed", "(no vLLM)")


def test_serve_with_the_gpu_build_but_no_gpu_says_so_in_one_line(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho vllm\n")  # answers the probe as an environment with vLLM's GPU build
    fake.chmod(0o755)
    proc = run_curate("serve", "--vllm-python", str(fake), env={"PATH": str(tmp_path) + ":/usr/bin:/bin"})
    assert_one_line_error(proc, "GPU build", "no NVIDIA GPU", "make vllm")


def test_bad_set_syntax(tmp_path):
    proc = run_curate("generate", "--task", "sts", "--out", str(tmp_path), "--set", "oops",
                      "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert_one_line_error(proc, "NAME=VALUE")


def test_filter_bad_record_names_file_and_line(tmp_path):
    inp = tmp_path / "gen.jsonl"
    inp.write_text('{"id": "a", "task_type": "sts", "task": "t", "query": "q", "positive": "p"}\n{"id": "b"}\n')
    proc = run_curate("filter", "--in", str(inp), "--out", str(tmp_path / "o"))
    assert_one_line_error(proc, "gen.jsonl:2", "lacks")
    assert not (tmp_path / "o" / "filtered.jsonl").exists()


def test_filter_unknown_step_in_recipe_is_named(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("steps:\n  - heuristics: {}\n  - dedupe_magic: {}\n")
    inp = tmp_path / "gen.jsonl"
    inp.write_text('{"id": "a", "task_type": "sts", "task": "t", "query": "q", "positive": "p"}\n')
    proc = run_curate("filter", "--in", str(inp), "--out", str(tmp_path / "o"), "--recipe", str(recipe))
    assert_one_line_error(proc, "r.yaml", "step 2", "dedupe_magic")


def test_filter_unknown_recipe_lists_shipped_ones(tmp_path):
    inp = tmp_path / "gen.jsonl"
    inp.write_text('{"id": "a", "task_type": "sts", "task": "t", "query": "q", "positive": "p"}\n')
    proc = run_curate("filter", "--in", str(inp), "--out", str(tmp_path / "o"), "--recipe", "nope")
    assert_one_line_error(proc, "unknown recipe 'nope'", "default", "strict")


def test_help_points_a_newcomer_at_the_pipeline_the_report_and_every_recipe():
    """The top-level help names where to start; ``filter --help`` lists every shipped recipe (it read
    "default, strict" while seven shipped); ``report --help`` names convert folders too."""
    from click.testing import CliRunner

    from curate.cli import cli
    from curate.core.resources import resource_dir

    runner = CliRunner()
    top = runner.invoke(cli, ["--help"]).output
    assert "curate pipeline DOCS" in top and "curate report RUN" in top and "docs/index.md" in top
    recipes = " ".join(runner.invoke(cli, ["filter", "--help"], terminal_width=1000).output.split())
    shipped = sorted(p.stem for p in resource_dir("filters").glob("*.yaml"))
    assert len(shipped) >= 7 and all(f"{name}," in recipes or f"{name})" in recipes for name in shipped)
    assert "convert" in runner.invoke(cli, ["report", "--help"]).output
    for command in ("eval", "ablate"):  # they take a served model, not a --teacher option
        text = " ".join(runner.invoke(cli, [command, "--help"]).output.split())
        assert "a --teacher openai:MODEL" not in text and "served model named openai:MODEL" in text
