"""Every value of an ablation grid is checked when the grid is read (issue 32): a bad budget,
evaluation flag, arm name, student or stage option is one line naming the grid file (and arm),
before any arm runs, instead of training with it, being cut to something else, or failing when
that arm's turn comes."""

from __future__ import annotations

from pathlib import Path

import pytest

from curate.core.errors import CurateError
from curate.flows.ablate.grid import load_grid
from tests.helpers import assert_one_line_error, run_curate
from tests.mine_helpers import write_beir


@pytest.fixture(scope="module")
def beir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("grid") / "beir"
    return write_beir(folder, {"d1": "alpha beta", "d2": "gamma delta", "d3": "eps zeta"},
                      {"q1": "alpha?", "q2": "gamma?"}, {"q1": {"d1": 1}, "q2": {"d2": 1}})


def _grid(tmp_path, beir, text):
    path = tmp_path / "grid.yaml"
    path.write_text(f"data: {beir}\n{text}\n")
    return path


@pytest.mark.parametrize("text, needle", [
    ("budget: {lr: .nan}\narms: {a: {}}", "budget: lr must be a finite number above 0.0, got nan"),
    ("budget: {lr: .inf}\narms: {a: {}}", "budget: lr must be a finite number"),
    ("budget: {steps: 2.9}\narms: {a: {}}", "budget: steps: expected a whole number, got 2.9"),
    ("budget: {steps: true}\narms: {a: {}}", "budget: steps: expected a whole number, got True"),
    ("budget: {steps: .inf}\narms: {a: {}}", "budget: steps: expected a whole number, got inf"),
    ("budget: {warmup_ratio: 2}\narms: {a: {}}", "budget: warmup_ratio must be between 0.0 and 1.0"),
    ("eval: {light: 'false'}\narms: {a: {}}", "eval: light must be true or false, got 'false'"),
    ("seeds: [0, true]\narms: {a: {}}", "seeds must be a non-empty list of integers"),
    ("arms: {'': {}}", "arm name '' is empty"),
    ('arms: {"a\\nb": {}}', "arm name 'a\\nb' holds a control character"),
    ('arms: {"a\\0b": {}}', "arm name 'a\\x00b' holds a control character"),
    ("arms: {1: {}, '1': {}}", "arms 1 and '1' are both named '1'"),
    ("student: 5\narms: {a: {}}", "student must be a model name or folder"),
    ("arms: {a: {}, b: {mine: {margin: 5}}}", "arm 'b' mine: --margin 5: percpos takes a share"),
    ("arms: {a: {}, b: {export: {curriculum: sideways}}}", "arm 'b' export: --curriculum 'sideways'"),
    ("arms: {a: {}, b: {export: {negatives_per_row: -3}}}", "arm 'b' export: --negatives-per-row -3"),
    ("arms: {a: {}, b: {filter: no-such-recipe}}", "arm 'b' filter: unknown recipe 'no-such-recipe'"),
    ("arms: {a: {generate: {task: short-long}}}", "arm 'a' generate: task 'short-long': --from-corpus needs a spec"),
    ("arms: {a: {generate: {task: no-such-spec}}}", "unknown task family 'no-such-spec'"),
    ("arms: {a: {generate: {task: from-corpus, queries: title}}}", "task names a spec for the passages"),
    ("arms: {a: {train: {loss: distill-kl, mask_near: true}}}", "mask_near masks the contrastive term of mnrl+"),
])
def test_a_bad_grid_value_is_one_line_naming_the_grid_when_read(tmp_path, beir, text, needle):
    grid = _grid(tmp_path, beir, text)
    with pytest.raises(CurateError) as e:
        load_grid(grid)
    assert str(e.value).startswith(f"{grid}: ") and needle in str(e.value), str(e.value)
    assert "\n" not in str(e.value)


def test_good_values_are_kept_as_written(tmp_path, beir):
    grid = load_grid(_grid(tmp_path, beir, "budget: {lr: 1, steps: 3}\neval: {light: false}\n"
                                           "arms: {1: {}, b: {mine: {relative_margin: 0.1}}}"))
    assert grid.budget.lr == 1.0 and isinstance(grid.budget.lr, float) and grid.budget.steps == 3
    assert grid.light is False and [a.name for a in grid.arms] == ["1", "b"]


def test_a_generate_arm_names_the_spec_that_writes_its_queries(tmp_path, beir):
    """``task`` picks the spec for the passages; arms without it keep their mapping (and so the
    folders of grids written before the key existed)."""
    spec = tmp_path / "mine.yaml"
    spec.write_text((Path(__file__).resolve().parents[2] / "tasks" / "from-corpus.yaml").read_text())
    grid = load_grid(_grid(tmp_path, beir, "arms: {a: {generate: {passages: 5}}, b: {generate: {passages: 5, "
                                           "task: from-corpus-multihop}}, c: {generate: {passages: 5, task: mine.yaml}}}"))
    a, b, c = grid.arms
    assert "task" not in a.generate
    assert b.generate["task"] == "from-corpus-multihop"
    assert c.generate["task"] == str(tmp_path / "mine.yaml")


@pytest.mark.parametrize("text, needle", [
    ("budget: {steps: .inf}\narms: {a: {}}", "budget: steps: expected a whole number"),  # was OverflowError, exit 3
    ("student: 5\narms: {a: {}}", "student must be a model name or folder"),  # was AttributeError, exit 3
])
def test_the_command_line_stops_before_any_arm_runs(tmp_path, beir, text, needle):
    grid = _grid(tmp_path, beir, text)
    proc = run_curate("ablate", str(grid), "--out", str(tmp_path / "out"), timeout=120)
    assert_one_line_error(proc, str(grid), needle)
    assert proc.returncode == 2 and not (tmp_path / "out").exists()


def test_a_light_grid_scores_every_cell_at_the_precision_of_the_machine_that_planned_it(tmp_path, beir, monkeypatch):
    """Resolved once by ``configured``: a Ray worker on a CPU without native bf16 still scores at the
    planner's, so one table holds one precision."""
    from curate.flows.ablate.arms import cell_steps
    from curate.flows.ablate.main import AblateOptions, configured

    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    path = _grid(tmp_path, beir, f"eval: {{data: {beir}, split: train, light: true}}\narms: {{b: {{kind: base}}}}")
    for native, expected in ((True, "bf16"), (False, "int8")):
        monkeypatch.setattr("curate.evaluate.main.native_bf16", lambda native=native: native)
        grid = configured(AblateOptions(grid=str(path), out=str(tmp_path / "out")))
        assert grid.precision == expected
        monkeypatch.setattr("curate.evaluate.main.native_bf16", lambda native=native: not native)  # the worker
        (step,) = [s for s in cell_steps(grid, grid.arms[0], 0, tmp_path / "out") if s.label == "eval"]
        assert step.options({}).precision == expected
    full = configured(AblateOptions(grid=str(path), out=str(tmp_path / "out"), light=False))
    assert full.precision is None
