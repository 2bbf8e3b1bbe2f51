"""A recipe's teacher model is checked when the recipe is loaded (issue 32): a mistyped model
folder is one line naming the recipe file, before any record is read or any step runs, not a
line naming only the folder once a teacher step asks for the model."""

from __future__ import annotations

import pytest

from curate.filter.recipe import load_recipe
from tests.filter.common import recipe_error
from tests.helpers import assert_one_line_error, run_curate

RECORD = ('{"id": "a", "task_type": "short-long", "task": "t", "query": "q", "positive": "p", '
          '"negatives": [{"text": "n"}]}\n')


@pytest.mark.parametrize("model, needle", [
    ("./no-such-model", "teacher: model: ./no-such-model: no such model folder"),
    ("opnai:text-embedding-3-small", "teacher: model: opnai:text-embedding-3-small: unknown teacher kind 'opnai'"),
])
def test_a_teacher_typo_names_the_recipe(tmp_path, model, needle):
    recipe = tmp_path / "r.yaml"
    text = f"teacher:\n  model: {model}\nsteps:\n  - heuristics: {{}}\n  - teacher_rank: {{}}\n"
    assert recipe_error(recipe, text).startswith(f"{recipe}: {needle}")
    inp = tmp_path / "in.jsonl"
    inp.write_text(RECORD)
    proc = run_curate("filter", "--in", str(inp), "--out", str(tmp_path / "f"), "--recipe", str(recipe))
    assert_one_line_error(proc, f"{recipe}: {needle}")
    assert proc.returncode == 2 and not (tmp_path / "f").exists()


def test_names_that_load_later_pass(tmp_path):
    """A model folder that exists, a hub name and a served kind are not refused at load time."""
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    for model in (str(folder), "intfloat/e5-small-v2", "openai:text-embedding-3-small", "all-MiniLM-L6-v2"):
        recipe = tmp_path / "r.yaml"
        recipe.write_text(f"teacher:\n  model: {model}\nsteps:\n  - teacher_rank: {{}}\n")
        assert load_recipe(str(recipe)).teacher["model"] == model
