"""Filter recipes (filters/*.yaml): which steps run, in which order, with which parameters.

Every step's parameters are checked when the recipe is loaded (names, types, ranges), so a
typo stops the run before the first step, not halfway through it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError
from curate.core.resources import resource_dir
from curate.core.yamlfile import read_yaml_mapping


@dataclass
class StepConfig:
    name: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class TeacherSection:
    """A recipe's ``teacher:`` section: the filter's teacher unless the command line names one."""

    model: str | None = None  # null: the bundled all-MiniLM-L6-v2; any sentence-transformers name or path
    query_prompt: str | None = None  # null: the model's known convention
    doc_prompt: str | None = None


@dataclass
class RecipeFile:
    """A recipe file's top-level keys, so that ``teachr:`` is an error, not a silently default teacher."""

    name: Any = None
    teacher: dict[str, Any] | None = None
    steps: list[Any] = field(default_factory=list)
    # the judges' price of 1,000 tokens, unless --price-per-1k-tokens gives one
    price_per_1k_tokens: float | None = field(default=None, metadata={"min": 0.0})


@dataclass
class Recipe:
    name: str
    path: Path
    steps: list[StepConfig]
    teacher: dict[str, Any] = field(default_factory=dict)
    price_per_1k_tokens: float | None = None


def shipped_recipes() -> list[str]:
    """The names of the recipes that ship in ``filters/``, for help texts and errors."""
    return sorted(q.stem for q in resource_dir("filters").glob("*.yaml"))


def find_recipe(name_or_path: str) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml"):
        if p.exists():
            return p
        shipped = resource_dir("filters") / p.name
        if shipped.exists():  # "filters/strict.yaml" works from anywhere, as in the README
            return shipped
        raise CurateError(f"{p}: no such recipe file")
    cand = resource_dir("filters") / f"{name_or_path}.yaml"
    if cand.exists():
        return cand
    known = ", ".join(shipped_recipes())
    raise CurateError(f"unknown recipe {name_or_path!r} (shipped: {known})")


def load_recipe(name_or_path: str) -> Recipe:
    from curate.core.params import check_params
    from curate.filter.base import STEPS

    path = find_recipe(name_or_path)
    raw = read_yaml_mapping(path, "recipe")
    check_params(str(path), RecipeFile, raw, partial=True, noun="key")
    if not isinstance(raw.get("steps"), list):
        raise CurateError(f"{path}: a recipe is a mapping with a 'steps' list")
    teacher = check_params(f"{path}: teacher", TeacherSection, raw.get("teacher"), partial=True, noun="key")
    _check_teacher_model(path, teacher.get("model"))
    steps = []
    for i, entry in enumerate(raw["steps"], 1):
        if isinstance(entry, str):
            entry = {entry: {}}
        if not isinstance(entry, dict) or len(entry) != 1:
            raise CurateError(f"{path}: step {i} must be 'name: {{params}}'")
        (name, params), = entry.items()
        step = STEPS.get(name, where=f"{path}: step {i}")
        if params is not None and not isinstance(params, dict):
            raise CurateError(f"{path}: step {i} ({name}): parameters must be a mapping")
        where = f"{path}: step {i}"
        check_params(f"{where} ({name})", step.params, params)
        if step.check is not None:
            try:
                step.check(dict(params or {}))
            except CurateError as e:
                raise CurateError(f"{where}: {e}") from None
            except (TypeError, ValueError, AttributeError) as e:  # a value of a type the check did not expect
                raise CurateError(f"{where} ({name}): a parameter has the wrong type: {e}") from None
        steps.append(StepConfig(name, dict(params or {})))
    return Recipe(name=str(raw.get("name") or path.stem), path=path, steps=steps, teacher=teacher,
                  price_per_1k_tokens=raw.get("price_per_1k_tokens"))


def _check_teacher_model(path: Path, model: str | None) -> None:
    """The recipe's teacher is built only when a step first needs it, so a mistyped model folder
    would stop the run there, naming the folder but not the recipe it is written in. The name is
    checked now, by its kind's own constructor (which loads no weights). A served or plugin kind
    is left to where it is built: it may need the command line's server."""
    if model is None:  # the bundled model
        return
    from curate.embed.teacher import DEFAULT_KIND, TEACHERS, TeacherOptions, teacher_kind

    try:
        kind = teacher_kind(model)  # a mistyped kind prefix fails here
        if kind is TEACHERS.get(DEFAULT_KIND):
            kind(model, TeacherOptions())
    except CurateError as e:
        raise CurateError(f"{path}: teacher: model: {e}") from None
