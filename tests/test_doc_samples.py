"""The docs' sample outputs hold the lines the program prints, so they cannot drift from it.

getting-started.md shows what `make demo` (``curate pipeline data/demo``) prints at the end: the
funnel. Its lines are checked against a real run of that command, the session's ``demo`` run
(tests/conftest.py, shared with the report's tests): the stages in the same order, every label
one the program prints, and each stage's line of the same shape. Numbers, the quoted examples
and the run folder are left out of the comparison: the bundled model's counts vary run to run.
"""

from __future__ import annotations

import re

import pytest

from tests.helpers import REPO

STAGES = ("generate", "filter", "holdout", "mine", "relabel", "export")
LABEL = re.compile(r"^  (\w+)\s{2,}")  # a funnel line: two spaces, its label, the text in a column
SUB = re.compile(r"^\s{4,}(\S+)")  # a line under one: a recipe step, a next step


def sample(page: str = "getting-started.md") -> list[str]:
    """The fenced block of ``page`` that shows the demo's funnel (it starts ``pipeline data/demo``)."""
    text = (REPO / "docs" / page).read_text(encoding="utf-8")
    for block in re.finditer(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M):
        if block.group(1).startswith("pipeline data/demo"):
            return block.group(1).splitlines()
    raise AssertionError(f"docs/{page} shows no output of `curate pipeline data/demo`")


def funnel(stderr: str) -> list[str]:
    """The real run's funnel: its lines from ``pipeline DOCS -> OUT`` to the end."""
    lines = stderr.splitlines()
    starts = [i for i, line in enumerate(lines) if re.match(r"pipeline \S+ -> ", line)]
    assert starts, "the run printed no funnel"
    return lines[starts[-1]:]


def labels(lines: list[str]) -> list[str]:
    return [m[1] for m in map(LABEL.match, lines) if m]


def sub_labels(lines: list[str]) -> set[str]:
    return {m[1] for line in lines if not LABEL.match(line) and (m := SUB.match(line))}


def shape(line: str, out: str) -> str:
    """``line`` with what varies from run to run written alike: the run folder, quoted
    examples, numbers, plurals, and what comes after ``e.g.``."""
    line = line.replace(out, "runs/demo").split(", e.g.")[0]
    line = re.sub(r'"[^"]*"', '"…"', line)
    line = re.sub(r"\d+(\.\d+)?(%?)", r"#\2", line)
    line = re.sub(r"\b(\w+)ies\b", r"\1y", line)  # "1 query", "2 queries"
    line = re.sub(r"\b(\w+?)s\b", r"\1", line)  # every other plural as its singular: "1 dev row", "2 dev rows"
    return " ".join(line.split())


def shapes(lines: list[str], out: str) -> dict[str, str]:
    """Each funnel line's shape, by its label."""
    return {m[1]: shape(line, out) for line in lines if (m := LABEL.match(line))}


@pytest.fixture(scope="module")
def real(demo) -> list[str]:
    return funnel(demo["proc"].stderr)


def test_the_demo_sample_shows_the_stages_the_pipeline_runs_in_their_order(real):
    shown = [name for name in labels(sample()) if name in STAGES]
    ran = [name for name in labels(real) if name in STAGES]
    assert shown == ran, f"getting-started shows {shown}; the pipeline prints {ran}"
    assert [s for s in ran if s != "relabel"] == ["generate", "filter", "holdout", "mine", "export"]


def test_every_label_of_the_demo_sample_is_one_the_program_prints(real):
    assert set(labels(sample())) <= set(labels(real)), set(labels(sample())) - set(labels(real))
    assert sub_labels(sample()) <= sub_labels(real), sub_labels(sample()) - sub_labels(real)


def test_each_line_of_the_demo_sample_has_the_shape_of_the_real_one(demo, real):
    """Each stage line reads as the real one, numbers aside; the real one may add a clause the
    sample's run had no cause for (", 2 dropped (...)"). A run whose filter kept queries of too
    few documents to hold any out prints another holdout line: that line is then not compared."""
    printed = shapes(real, str(demo["out"]))
    if printed["holdout"].startswith("holdout nothing held out"):
        del printed["holdout"]
    differ = [f"  docs: {want}\n  real: {printed[label]}" for label, want in shapes(sample(), "runs/demo").items()
              if label in printed and not printed[label].startswith(want)]
    assert not differ, "getting-started's demo lines differ from a real run's:\n" + "\n".join(differ)


def test_the_shape_leaves_out_what_varies():
    one = '  export    sentence-transformers: 7 train rows, 1 dev row'
    other = '  export    sentence-transformers: 9 train rows, 2 dev rows'
    assert shape(one, "runs/demo") == shape(other, "runs/demo")
    assert shape('  filter    8 of 12 records kept, e.g. "x"', "/t") == shape("  filter    3 of 12 records kept", "/t")
    assert shape("  data      /tmp/x/demo/export", "/tmp/x/demo") == shape("  data      runs/demo/export", "runs/demo")
