"""Typed parameters (curate/core/params.py): recipes are checked against each step's
parameters dataclass when they load, before any step runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import pytest

from curate.core.errors import CurateError
from curate.core.params import check_params
from tests.helpers import assert_one_line_error, run_curate


@dataclass
class Demo:
    top: int | None = field(default=10, metadata={"min": 0})
    share: float = field(default=0.95, metadata={"min": 0.0, "max": 1.0})
    mode: Literal["a", "b"] = "a"
    names: list[str] = field(default_factory=lambda: ["x"])
    on: bool = True


def test_check_params_fills_defaults_and_accepts_good_values():
    assert check_params("w", Demo, None) == Demo()
    got = check_params("w", Demo, {"top": None, "share": 1, "mode": "b", "names": ["p", "q"], "on": False})
    assert got == Demo(top=None, share=1.0, mode="b", names=["p", "q"], on=False)


@pytest.mark.parametrize("given, message", [
    ({"topp": 3}, "w: unknown parameter 'topp' (did you mean top?); known: top, share, mode, names, on"),
    ({"top": -3}, "w: top must be at least 0, got -3"),
    ({"share": 1.5}, "w: share must be between 0.0 and 1.0, got 1.5"),
    ({"share": "high"}, "w: share: expected a number, got 'high'"),
    ({"top": 2.5}, "w: top: expected a whole number or null, got 2.5"),
    ({"top": True}, "w: top: expected a whole number or null, got True"),
    ({"mode": "c"}, "w: mode: choose 'a' or 'b', got 'c'"),
    ({"names": "x"}, "w: names: expected a list, got 'x'"),
    ({"names": [1]}, "w: names: expected a string, got 1"),
    ({"on": "yes"}, "w: on: expected true or false, got 'yes'"),
])
def test_check_params_names_the_fault(given, message):
    with pytest.raises(CurateError) as err:
        check_params("w", Demo, given)
    assert str(err.value) == message


@pytest.mark.parametrize("step, needle", [
    ("teacher_rank: {positive_topp: 10}", "unknown parameter 'positive_topp' (did you mean positive_top?)"),
    ("teacher_rank: {positive_top: -3}", "positive_top must be at least 0, got -3"),
    ("false_negatives: {mode: percnt}", "mode: choose 'percent' or 'margin', got 'percnt'"),
    ("sts_gap: {min_gap: -1}", "min_gap must be at least 0.0"),
    ("heuristics: {length_tolerance: 2}", "length_tolerance must be in (0, 1]"),
    ("minhash: {treshold: 0.5}", "unknown parameter 'treshold' (did you mean threshold?)"),
])
def test_recipe_faults_stop_filter_before_it_reads_anything(tmp_path, step, needle):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"steps:\n  - heuristics: {{}}\n  - {step}\n")
    proc = run_curate("filter", "--in", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "f"),
                      "--recipe", str(recipe))
    assert_one_line_error(proc, f"{recipe}: step 2", needle)  # the recipe, not the missing input
    assert not (tmp_path / "f").exists()
