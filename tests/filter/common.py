"""Helpers more than one filter test module uses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from curate.core.errors import CurateError
from curate.filter.recipe import load_recipe


def recipe_error(path: Path, text: str) -> str:
    """The error ``load_recipe`` gives for a recipe file holding ``text``, checked to be what every
    recipe error is: one line that names the file."""
    path.write_text(text)
    with pytest.raises(CurateError) as err:
        load_recipe(str(path))
    message = str(err.value)
    assert "\n" not in message and str(path) in message
    return message


def four_gram_share(query: str, doc: str) -> float:
    """Independent of the step: the share of the query's word 4-grams found in the document."""
    q, d = re.findall(r"\w+", query.lower()), " " + " ".join(re.findall(r"\w+", doc.lower())) + " "
    grams = {" ".join(q[i:i + 4]) for i in range(len(q) - 3)}
    return sum(f" {g} " in d for g in grams) / len(grams) if grams else 0.0
