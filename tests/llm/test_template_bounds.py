"""User templates (--instruction, --prompts-dir) render in bounded time as well as bounded size:
a loop that writes nothing for hours, or a lipsum of thousands of paragraphs, is one line naming
the template; ordinary templates render exactly as Jinja renders them."""

from __future__ import annotations

import time

import jinja2
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from curate.core.errors import CurateError
from curate.llm import templates
from curate.llm.templates import load_template, render, template_from_string
from tests.helpers import assert_one_line_error, run_curate

NESTED = "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}{{ query }}"


@pytest.fixture
def short_deadline(monkeypatch):
    monkeypatch.setattr(templates, "MAX_SECONDS", 0.5)


@pytest.mark.parametrize("source", [
    NESTED,
    "{% for c in 'x' * 5000000 %}{% for d in 'yy' * 5000000 %}{% endfor %}{% endfor %}{{ query }}",
    ("{% macro m() %}{% endmacro %}{% for i in range(99999) %}{% for j in range(99999) %}{{ m() }}{% endfor %}"
     "{% endfor %}{{ query }}"),
])
def test_a_render_that_runs_past_the_deadline_is_stopped(source, short_deadline):
    started = time.monotonic()
    with pytest.raises(CurateError, match=r"^template '.*': rendering took more than 0.5 s") as e:
        render(template_from_string(source, name="slow"), {"query": "q"})
    assert time.monotonic() - started < 5 and "'slow'" in str(e.value)


def test_a_prompts_dir_template_that_runs_too_long_is_named(tmp_path, short_deadline):
    (tmp_path / "loop.j2").write_text(NESTED)
    with pytest.raises(CurateError, match=r"template 'loop\.j2': rendering took more than"):
        render(load_template("loop.j2", [tmp_path]), {"query": "q"})


def test_lipsum_is_bounded():
    started = time.monotonic()
    with pytest.raises(CurateError, match=r"template 'many': not allowed in the sandbox: lipsum\(3000"):
        render(template_from_string("{{ lipsum(3000, max=1000) }}", name="many"), {})
    assert time.monotonic() - started < 1
    assert render(template_from_string("{{ lipsum(2, html=False) }}"), {}).count("\n\n") == 1


def test_instruction_that_loops_without_end_is_one_line_on_the_command_line(tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"id": "a", "task_type": "short-long", "task": "t", "query": "q", "positive": "p"}\n')
    started = time.monotonic()
    proc = run_curate("export", "--in", str(inp), "--out", str(tmp_path / "x"), "--instruction", NESTED, timeout=300)
    assert proc.returncode == 2
    assert_one_line_error(proc, "template '{% for i in range(99999) %}", f"rendering took more than {templates.MAX_SECONDS:g} s")
    assert time.monotonic() - started < 60 and not (tmp_path / "x").exists()


@pytest.mark.parametrize("source", [
    "{% for i in range(3) %}{{ loop.index }}/{{ loop.length }}{{ loop.last }} {% endfor %}",
    "{% for k, v in d|dictsort %}{{ k }}={{ v }};{% else %}none{% endfor %}",
    "{% for x in xs if x is even %}{{ x }}{{ loop.revindex }},{% endfor %}{% for x in [] %}a{% else %}empty{% endfor %}",
    "{% for row in rows recursive %}<{{ row.name }}{% if row.kids %}{{ loop(row.kids) }}{% endif %}>{% endfor %}",
    "{% macro item(x) %}- {{ x|trim }}\n{% endmacro %}{% for x in xs|batch(2) %}{{ item(x|join(',')) }}{% endfor %}",
    "{% set ns = namespace(n=0) %}{% for x in xs %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }} {{ xs|sum }}",
])
def test_ordinary_templates_render_byte_for_byte_as_jinja_does(source):
    plain = ImmutableSandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False,
                                          keep_trailing_newline=False, trim_blocks=True, lstrip_blocks=True)
    variables = {"d": {"b": 2, "a": 1}, "xs": list(range(7)),
                 "rows": [{"name": "a", "kids": [{"name": "b", "kids": []}]}, {"name": "c", "kids": []}]}
    assert render(template_from_string(source), variables) == plain.from_string(source).render(**variables).strip()
