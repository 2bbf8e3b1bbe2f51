"""Option, recipe and template faults (issue 22): each is one line naming where it came from
(the option and its range, the file and line, the nearest known key, the template), exit 2,
never a traceback, and before any model or LLM is loaded."""

from __future__ import annotations

import pytest

from curate.core.errors import CurateError
from curate.filter.recipe import load_recipe
from curate.mine.options import MineOptions
from curate.llm.templates import load_template, render, template_from_string
from tests.helpers import assert_one_line_error, run_curate

RECORD = '{"id": "a", "task_type": "short-long", "task": "t", "query": "q", "positive": "p"}\n'


def test_mine_option_ranges_are_declared_once_and_checked_by_the_cli(tmp_path):
    out = tmp_path / "m"
    # percpos keeps candidates up to pos - |pos| x margin: 1 or more would leave no room under a positive
    proc = run_curate("mine", "--out", str(out), "--relative-margin", "1")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "Invalid value for '--relative-margin'" in proc.stderr and "0.0<=x<1.0" in proc.stderr, proc.stderr
    # the deprecated --margin, percpos's share: 5 would turn the false-negative guard off
    proc = run_curate("mine", "--out", str(out), "--margin", "5")
    assert proc.returncode == 2
    assert_one_line_error(proc, "--margin 5", "percpos", "share of the positive's score",
                          "must be above 0.0 and at most 1.0")
    assert not out.exists()
    # the same number is a fine gap for marginpos: the run gets past the knobs to its input
    proc = run_curate("mine", "--out", str(out), "--method", "marginpos", "--absolute-margin", "1.5")
    assert_one_line_error(proc, "exactly one of")
    # the old spelling too, with one line saying what to write instead
    proc = run_curate("mine", "--out", str(out), "--method", "marginpos", "--margin", "1.5")
    assert proc.returncode == 2
    assert [ln for ln in proc.stderr.splitlines() if ln.strip()][0].startswith(
        "curate: --margin is deprecated: use --absolute-margin 1.5"), proc.stderr
    # the CLI's types are the declared ranges
    for option, value in (("--temperature", "0"), ("--absolute-margin", "-1"), ("--margin", "-1"), ("--shift", "-1"),
                          ("--range-min", "-1"), ("--range-max", "0"), ("--pool", "0")):
        proc = run_curate("mine", "--out", str(out), option, value)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert f"Invalid value for '{option}'" in proc.stderr, proc.stderr
    proc = run_curate("mine", "--out", str(out), "--method", "window", "--range-min", "50", "--range-max", "50")
    assert_one_line_error(proc, "--range-min 50 / --range-max 50")
    # with the old names, the one line says which new ones they stand for
    proc = run_curate("mine", "--out", str(out), "--method", "window", "--rank-min", "50", "--rank-max", "10")
    assert_one_line_error(proc, "--range-min 49 / --range-max 10", "--rank-min is deprecated: use --range-min 49")
    proc = run_curate("mine", "--out", str(out), "--margin", "0.9", "--relative-margin", "0.1")
    assert_one_line_error(proc, "--margin and --relative-margin are the same setting")
    from curate.core.params import field_range, range_problem  # the one declaration both use
    from curate.negatives.knobs import Ceiling

    assert range_problem(field_range(Ceiling, "percent"), 5) == "must be above 0.0 and at most 1.0"
    assert field_range(MineOptions, "temperature") == {"min": 0.0, "min_open": True}


@pytest.mark.parametrize("text, needle", [
    ("teacher:\n  modle: intfloat/e5-small-v2\nsteps:\n  - heuristics: {}\n",
     "teacher: unknown key 'modle' (did you mean model?)"),
    ("teachr:\n  model: intfloat/e5-small-v2\nsteps:\n  - heuristics: {}\n",
     "unknown key 'teachr' (did you mean teacher?)"),
])
def test_recipe_teacher_typo_names_file_and_nearest_key(tmp_path, text, needle):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(text)
    proc = run_curate("filter", "--in", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "f"),
                      "--recipe", str(recipe))
    assert proc.returncode == 2
    assert_one_line_error(proc, f"{recipe}: ", needle)  # the recipe, before the missing input
    for shipped in ("default", "strict"):
        assert load_recipe(shipped).teacher == {"model": None, "query_prompt": None, "doc_prompt": None}


@pytest.mark.parametrize("text, needle", [
    ("steps:\n  - heuristics: {min_chars: 5}\n", "step 1 (heuristics): min_chars: expected a mapping or null, got 5"),
    ("steps:\n  - heuristics: {min_chars: {query: few}}\n", "min_chars.query: expected a whole number or null"),
    ("steps:\n  - heuristics: {self_explanation_patterns: [1]}\n", "self_explanation_patterns: expected a string"),
    ('teacher: "intfloat/e5-small-v2"\nsteps:\n  - heuristics: {}\n', "teacher: expected a mapping or null"),
    ("steps:\n  - heuristics: {shingle_size: x}\n", "shingle_size: expected a whole number or null, got 'x'"),
    ("steps:\n  - judge_answerable: {concurrency: many}\n", "concurrency: expected a whole number or null"),
])
def test_recipe_wrong_type_is_one_line_naming_the_file(tmp_path, text, needle):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(text)
    inp = tmp_path / "in.jsonl"
    inp.write_text(RECORD)
    proc = run_curate("filter", "--in", str(inp), "--out", str(tmp_path / "f"), "--recipe", str(recipe))
    assert proc.returncode == 2  # a user's fault, not an internal error (3)
    assert_one_line_error(proc, str(recipe), needle)


def test_latin1_recipe_and_task_spec_name_file_and_line(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_bytes(b"name: caf\xe9\nsteps:\n  - heuristics: {}\n")
    proc = run_curate("filter", "--in", str(tmp_path / "in.jsonl"), "--out", str(tmp_path / "f"),
                      "--recipe", str(recipe))
    assert proc.returncode == 2
    assert_one_line_error(proc, f"{recipe}:1: not UTF-8 text (byte 0xe9)")
    spec = tmp_path / "mine.yaml"
    spec.write_bytes(b"family: mine\n# r\xe9sum\xe9s\ndescription: x\n")
    proc = run_curate("generate", "--task", str(spec), "-n", "1", "--out", str(tmp_path / "g"),
                      "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert proc.returncode == 2
    assert_one_line_error(proc, f"{spec}:2: not UTF-8 text")


@pytest.mark.parametrize("template, needle", [
    ("{% for i in range(10**9) %}x{% endfor %}{{ query }}", "ranges larger than MAX_RANGE (100000)"),
    ("{% for i in range(100000000) %}{% endfor %}{{ query }}", "ranges larger than MAX_RANGE (100000)"),
    ("{{ range(99999) | join(',') * 99999 }}{{ query }}", "str * 99,999 builds 58,887,711,117 items"),
    ("{% for i in range(99999) %}{% for j in range(99999) %}xx{% endfor %}{% endfor %}{{ query }}",
     "an output of more than 10,000,000 characters"),
])
def test_template_too_large_for_memory_is_one_line(tmp_path, template, needle):
    inp = tmp_path / "in.jsonl"
    inp.write_text(RECORD)
    proc = run_curate("export", "--in", str(inp), "--out", str(tmp_path / "x"), "--instruction", template,
                      timeout=120)
    assert proc.returncode == 2
    assert_one_line_error(proc, "not allowed in the sandbox", needle)


def test_prompt_template_file_too_large_names_the_file(tmp_path):
    (tmp_path / "big.j2").write_text("{% for i in range(100000000) %}{% endfor %}{{ query }}\n")
    with pytest.raises(CurateError, match=r"template 'big\.j2': not allowed in the sandbox: Range too big"):
        render(load_template("big.j2", [tmp_path]), {"query": "q"})
    (tmp_path / "wide.j2").write_text("{{ query * 10**10 }}\n")
    with pytest.raises(CurateError, match=r"template 'wide\.j2': not allowed in the sandbox: str \* 10,000,000,000"):
        render(load_template("wide.j2", [tmp_path]), {"query": "q"})


def test_string_template_errors_name_the_template_not_none(tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_text(RECORD)
    proc = run_curate("export", "--in", str(inp), "--out", str(tmp_path / "x"),
                      "--instruction", "{{ ''.__class__ }}{{ query }}")
    assert_one_line_error(proc, "template \"{{ ''.__class__ }}{{ query }}\": not allowed in the sandbox")
    assert "None" not in proc.stderr
    with pytest.raises(CurateError) as err:
        render(template_from_string("Instruct: {{ tsak }}\nQuery: {{ query }}"), {"query": "q"})
    assert str(err.value) == ("template 'Instruct: {{ tsak }} Query: {{ query }}': "
                              "undefined variable: 'tsak' is undefined")
    with pytest.raises(CurateError, match="template 'my instruction': "):
        render(template_from_string("{{ 1 / 0 }}", name="my instruction"), {})


@pytest.mark.parametrize("line", ['{"task": ""}', '{"task": "   "}', '"  "'])
def test_blank_task_in_tasks_file_names_file_and_line(tmp_path, line):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"task": "Find recipes for a dish."}\n' + line + "\n")
    proc = run_curate("generate", "--task", "short-long", "-n", "1", "--out", str(tmp_path / "o"),
                      "--tasks-file", str(tasks), "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                      "--max-retries", "0", timeout=120)
    assert proc.returncode == 2
    assert_one_line_error(proc, f"{tasks}:2: a task needs a non-blank 'task' text")
    assert not (tmp_path / "o").exists()  # before any LLM call or run folder


@pytest.mark.parametrize("options, needle", [
    ({"k": 0}, "-k 0 must be at least 1"),
    ({"max_depth": 0}, "--max-depth 0 must be at least 1"),
    ({"positive_top": -1}, "--positive-top -1 must be at least 0"),
    ({"temperature": 0.0}, "--temperature 0.0 must be above 0.0"),
    ({"margin": 5.0}, "percpos takes a share of the positive's score"),
    ({"relative_margin": 1.5}, "--relative-margin 1.5 must be at least 0.0 and below 1.0"),
    ({"method": "window", "range_min": 100}, "--range-min 100 / --range-max 100"),
])
def test_mine_from_python_checks_the_same_declared_ranges(options, needle):
    from curate.mine.main import mine_config
    from curate.mine.options import MineOptions

    with pytest.raises(CurateError, match=needle):
        mine_config(MineOptions(out="unused", **options))
