"""Task specs (tasks/*.yaml): which templates a family uses, its placeholder pools and answer schema.

A user adds a family by writing a template and a spec; nothing here is family-specific.
Placeholder values are drawn with a per-item random generator, so an item renders the
same prompt on every run whatever order the items run in.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from curate.core.errors import CurateError
from curate.core.resources import resource_dir
from curate.core.yamlfile import read_utf8_text, read_yaml_mapping

if TYPE_CHECKING:
    from curate.llm.task import LLMTask

ANSWER_KEYS = ("query", "positive", "negatives")
INPUT_KEYS = ("query", "positive")  # answer keys a spec may take from its items instead
DEFAULT_PARAMS = {"temperature": 1.0, "top_p": 1.0, "max_tokens": 2048}
# A family names files under --out (tasks/<family>.jsonl), so it must be a plain file name.
FAMILY_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


@dataclass
class PromptStep:
    """One LLM call shape: a template, the variables drawn into it, the answer schema."""

    template: str
    schema: dict[str, Any]
    placeholders: dict[str, list[Any]] = field(default_factory=dict)
    banks: dict[str, str] = field(default_factory=dict)  # variable -> data/banks/<name>.txt
    params: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_PARAMS))
    system: str | None = None

    def with_max_chars(self, limit: int | None) -> PromptStep:
        """A copy whose answer strings are capped at ``limit`` characters (quick runs, budgets)."""
        if not limit:
            return self
        return dataclasses.replace(self, schema=clamp_strings(self.schema, limit))

    def task(self, name: str, parse, prompt_dirs=()) -> "LLMTask":
        """This step as an LLM task whose answers ``parse`` reads."""
        from curate.llm.task import LLMTask

        return LLMTask(name, self.template, self.schema, parse, dict(self.params), self.system,
                       tuple(str(d) for d in prompt_dirs))

    def variables(self, seed: int, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
        """Placeholder values for one item from its own seed; ``overrides`` pin chosen placeholders."""
        values = self.draw(random.Random(seed))
        values.update(overrides or {})
        return values

    def draw(self, rng: random.Random) -> dict[str, Any]:
        """Pick one value per placeholder pool and one line per bank."""
        values = {name: rng.choice(pool) for name, pool in sorted(self.placeholders.items())}
        for name, bank in sorted(self.banks.items()):
            values[name] = rng.choice(load_bank(bank))
        return values


@dataclass
class TaskSpec:
    family: str
    description: str
    path: Path
    generate: PromptStep
    brainstorm: PromptStep | None = None
    tasks_per_call: int = 20
    brainstorm_temperatures: list[float] = field(default_factory=lambda: [0.8, 1.0, 1.2])
    fixed_tasks: list[str] = field(default_factory=list)
    n_negatives: int = 4
    symmetric: bool = False
    score_scale: tuple[float, float] = (1.0, 10.0)
    # Answer keys each item brings with it (e.g. a real query and positive) instead of asking
    # the model; they go into the template's variables and into the record verbatim.
    inputs: list[str] = field(default_factory=list)
    # Multi-hop (from-corpus specs): each item brings this many related passages, a size drawn
    # per item; empty: one passage an item.
    bundle: tuple[int, ...] = ()
    # How the spec takes part in ``generate --languages`` (curate.generate.languages): "pool" (each
    # item's drawn language replaces its ``language`` placeholder), "pair" (a drawn source and
    # target replace ``language_pair``, for bitext); None: it keeps its own placeholders.
    languages: str | None = None
    # Answer keys an item may bring instead of the model writing them (--from-corpus: positive;
    # --from-pairs: query and positive): without them the model writes these too; see ``taking``.
    optional_inputs: list[str] = field(default_factory=list)
    # Answer keys whose texts make up the record's query, "query" first (e.g. [query, instruction]):
    # joined into the one text the embedder sees; each part is also kept in meta.query_parts.
    query_parts: list[str] = field(default_factory=list)

    def taking(self, keys: Iterable[str]) -> TaskSpec:
        """This spec for items that bring the answer ``keys`` (--from-corpus: the positive;
        --from-pairs: the query and positive). Itself when it lists them under ``inputs``; when it
        lists them under ``optional_inputs``, a copy that takes them as inputs: they leave the
        answer schema (its properties and its required list) and reach the template as variables
        (``{% if positive is defined %}``). A key the spec can only ask the model for is refused."""
        wanted = set(keys)
        extra = [k for k in INPUT_KEYS if k in wanted and k not in self.inputs]
        if not extra:
            return self
        refused = [k for k in extra if k not in self.optional_inputs]
        if refused:
            raise CurateError(f"{self.family}: the spec asks the model for {', '.join(refused)}; it cannot take "
                              f"{'it' if len(refused) == 1 else 'them'} as given (neither 'inputs' nor 'optional_inputs')")
        schema = dict(self.generate.schema)
        schema["properties"] = {k: v for k, v in (schema.get("properties") or {}).items() if k not in extra}
        schema["required"] = [k for k in schema.get("required") or [] if k not in extra]
        return dataclasses.replace(self, generate=dataclasses.replace(self.generate, schema=schema),
                                   inputs=[*self.inputs, *extra],
                                   optional_inputs=[k for k in self.optional_inputs if k not in extra])


def bank_path(name: str) -> Path:
    """Where the bank ``name`` is: a .txt file given by path, else data/banks/NAME.txt."""
    return Path(name) if name.endswith(".txt") and Path(name).exists() else resource_dir("data") / "banks" / f"{name}.txt"


@lru_cache(maxsize=None)
def load_bank(name: str) -> tuple[str, ...]:
    """A bank is a text file of one entry a line under data/banks/; '#' starts a comment."""
    path = bank_path(name)
    if not path.exists():
        raise CurateError(f"bank {name!r} not found (looked for {path})")
    lines = [ln.strip() for ln in read_utf8_text(path).splitlines()]
    entries = tuple(ln for ln in lines if ln and not ln.startswith("#"))
    if not entries:
        raise CurateError(f"{path}: bank is empty")
    return entries


def list_families(extra_dirs: tuple[Path, ...] = ()) -> list[str]:
    dirs = list(extra_dirs) + [resource_dir("tasks")]
    names = {p.stem for d in dirs if Path(d).is_dir() for p in Path(d).glob("*.yaml")}
    return sorted(names)


def find_spec(name: str, extra_dirs: tuple[Path, ...] = ()) -> Path:
    p = Path(name)
    if p.suffix in (".yaml", ".yml") and p.exists():
        return p
    for d in list(extra_dirs) + [resource_dir("tasks")]:
        cand = Path(d) / f"{name}.yaml"
        if cand.exists():
            return cand
    known = ", ".join(list_families(extra_dirs))
    raise CurateError(f"unknown task family {name!r} (known: {known})")


@lru_cache(maxsize=None)
def family_symmetric(task_type: str) -> bool:
    """The shipped spec's ``symmetric`` for a family (False for a task type without a spec)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", task_type or "") or task_type.endswith((".yaml", ".yml")):
        return False
    try:
        return load_spec(task_type).symmetric
    except CurateError:
        return False


def is_symmetric(record) -> bool:
    """Do both sides of this record play the same role (STS, bitext)? The one answer for every
    stage: the teacher then encodes documents as queries, and the export puts the instruction on
    documents too. A record's ``meta.symmetric`` (written by generate from its spec) wins over
    the shipped spec of its family."""
    flag = (record.meta or {}).get("symmetric") if isinstance(record.meta, dict) else None
    return flag if isinstance(flag, bool) else family_symmetric(record.task_type)


def load_spec(name: str, extra_dirs: tuple[Path, ...] = ()) -> TaskSpec:
    path = find_spec(name, extra_dirs)
    raw = read_yaml_mapping(path, "task spec")
    try:
        return _parse(raw, path)
    except (KeyError, TypeError, ValueError) as e:
        raise CurateError(f"{path}: {e}") from None


def _step(raw: dict[str, Any], where: str) -> PromptStep:
    if not isinstance(raw, dict):
        raise ValueError(f"'{where}' must be a mapping")
    if "template" not in raw or "schema" not in raw:
        raise ValueError(f"'{where}' needs 'template' and 'schema'")
    placeholders = raw.get("placeholders") or {}
    for key, pool in placeholders.items():
        if not isinstance(pool, list) or not pool:
            raise ValueError(f"'{where}.placeholders.{key}' must be a non-empty list")
    params = dict(DEFAULT_PARAMS)
    params.update(raw.get("params") or {})
    _check_string_limits(raw["schema"], f"{where}.schema")
    return PromptStep(
        template=str(raw["template"]),
        schema=_no_blank_strings(raw["schema"]),
        placeholders=placeholders,
        banks=dict(raw.get("banks") or {}),
        params=params,
        system=raw.get("system"),
    )


def clamp_strings(schema: Any, limit: int) -> Any:
    """A copy of ``schema`` whose free strings hold at most ``limit`` characters."""
    if isinstance(schema, dict):
        out = {k: clamp_strings(v, limit) for k, v in schema.items()}
        if out.get("type") == "string" and "enum" not in out:
            out["maxLength"] = min(int(out.get("maxLength", limit)), limit)
            if "minLength" in out:
                out["minLength"] = min(int(out["minLength"]), out["maxLength"])
        return out
    if isinstance(schema, list):
        return [clamp_strings(v, limit) for v in schema]
    return schema


def _no_blank_strings(schema: Any) -> Any:
    """Every free string needs at least one character (the grammar enforces it); the client
    also re-asks when a string is only whitespace, which a length limit cannot express."""
    if isinstance(schema, dict):
        out = {k: _no_blank_strings(v) for k, v in schema.items()}
        if out.get("type") == "string" and "enum" not in out and "const" not in out:
            out["minLength"] = max(1, int(out.get("minLength", 1)))
        return out
    if isinstance(schema, list):
        return [_no_blank_strings(v) for v in schema]
    return schema


def _check_negatives(schema: dict[str, Any], n: int) -> None:
    """The prompt asks for ``n`` negatives; the schema must let the model give that many (none:
    ``n_negatives: 0`` and no ``negatives`` in the schema, for queries whose negatives are mined)."""
    neg = (schema.get("properties") or {}).get("negatives")
    if n == 0 and neg is None:
        return
    if n < 1:
        raise ValueError(f"'n_negatives' must be at least 1 (or 0 with no 'negatives' in the schema), not {n}")
    if not isinstance(neg, dict) or neg.get("type") != "array":
        raise ValueError("generate.schema.properties.negatives must be an array")
    lo, hi = int(neg.get("minItems", 0)), neg.get("maxItems")
    if n < lo or (hi is not None and n > int(hi)):
        raise ValueError(f"'n_negatives' is {n} but the schema allows {lo} to {'any number of' if hi is None else hi} negatives "
                         f"(generate.schema.properties.negatives minItems/maxItems)")


def _check_string_limits(schema: Any, where: str) -> None:
    """Every string in an answer schema carries maxLength, so no answer can run away."""
    if isinstance(schema, dict):
        if schema.get("type") == "string" and "enum" not in schema and "maxLength" not in schema:
            raise ValueError(f"'{where}': every string needs a maxLength")
        for key, sub in schema.items():
            _check_string_limits(sub, f"{where}.{key}")
    elif isinstance(schema, list):
        for i, sub in enumerate(schema):
            _check_string_limits(sub, f"{where}[{i}]")


def _parse(raw: dict[str, Any], path: Path) -> TaskSpec:
    family = str(raw.get("family") or path.stem)
    if not FAMILY_RE.fullmatch(family) or ".." in family:
        raise ValueError(f"'family' must be a plain name (letters, digits, '.', '_', '-'), not {family!r}")
    generate = _step(raw["generate"], "generate")
    inputs = [str(k) for k in raw.get("inputs") or []]
    bad = [k for k in inputs if k not in INPUT_KEYS]
    if bad:
        raise ValueError(f"'inputs' may list only {', '.join(INPUT_KEYS)}, not {', '.join(bad)}")
    n_negatives = raw.get("n_negatives", 4)
    if not isinstance(n_negatives, int) or isinstance(n_negatives, bool):
        raise ValueError(f"'n_negatives' must be an integer, not {n_negatives!r}")
    required = set(generate.schema.get("required") or [])
    asked = [k for k in ANSWER_KEYS if k != "negatives" or n_negatives]  # 0: negatives are mined later
    missing = [k for k in asked if k not in required and k not in inputs]
    if missing:
        raise ValueError(f"generate.schema must require {', '.join(missing)}")
    brainstorm = None
    b = raw.get("brainstorm")
    if b:
        brainstorm = _step(b, "brainstorm")
        if "tasks" not in (brainstorm.schema.get("required") or []):
            raise ValueError("brainstorm.schema must require 'tasks'")
    fixed = [str(t) for t in raw.get("fixed_tasks") or []]
    if brainstorm is None and not fixed:
        raise ValueError("a spec needs a 'brainstorm' section or 'fixed_tasks'")
    b = b or {}
    if "negatives" not in inputs:
        _check_negatives(generate.schema, n_negatives)
    scale = raw.get("score_scale") or [1, 10]
    bundle = raw.get("bundle") or []
    if not isinstance(bundle, list) or not all(isinstance(b, int) and not isinstance(b, bool) and 2 <= b <= 5
                                               for b in bundle):
        raise ValueError(f"'bundle' must be a list of passage counts from 2 to 5, not {bundle!r}")
    if bundle and inputs != ["positive"]:
        raise ValueError("'bundle' goes with inputs: [positive] (a spec for --from-corpus)")
    languages = raw.get("languages")
    if languages is not None and languages not in ("pool", "pair"):
        raise ValueError(f"'languages' must be pool (an item's language fills {{{{ language }}}}) or pair (a source "
                         f"and target language fill {{{{ language_pair }}}}), not {languages!r}")
    return TaskSpec(
        family=family,
        description=str(raw.get("description", "")),
        path=path,
        generate=generate,
        brainstorm=brainstorm,
        tasks_per_call=int(b.get("tasks_per_call", 20)),
        brainstorm_temperatures=[float(t) for t in b.get("temperatures", [0.8, 1.0, 1.2])],
        fixed_tasks=fixed,
        n_negatives=n_negatives,
        symmetric=bool(raw.get("symmetric", False)),
        score_scale=(float(scale[0]), float(scale[1])),
        inputs=inputs,
        bundle=tuple(bundle),
        languages=languages,
        optional_inputs=_optional_inputs(raw, inputs, bundle, generate.schema),
        query_parts=_query_parts(raw, generate.schema),
    )


def _optional_inputs(raw: dict[str, Any], inputs: list[str], bundle: list[int], schema: dict[str, Any]) -> list[str]:
    """``optional_inputs``: answer keys the schema requires (the model writes them when no item
    brings them) and an item may bring instead; none of them already an input."""
    keys = raw.get("optional_inputs") or []
    if not isinstance(keys, list):
        raise ValueError(f"'optional_inputs' must be a list, not {keys!r}")
    keys = [str(k) for k in keys]
    bad = [k for k in keys if k not in INPUT_KEYS]
    if bad:
        raise ValueError(f"'optional_inputs' may list only {', '.join(INPUT_KEYS)}, not {', '.join(bad)}")
    both = [k for k in keys if k in inputs]
    if both:
        raise ValueError(f"{', '.join(both)} is under both 'inputs' and 'optional_inputs'")
    if keys and bundle:
        raise ValueError("'bundle' goes with inputs: [positive], not with 'optional_inputs'")
    required = set(schema.get("required") or [])
    missing = [k for k in keys if k not in required]
    if missing:
        raise ValueError(f"generate.schema must require {', '.join(missing)}: the model writes what no item brings")
    return list(dict.fromkeys(keys))


def _query_parts(raw: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    """``query_parts``: "query" first, then further string answer keys the schema requires."""
    parts = raw.get("query_parts") or []
    if not isinstance(parts, list):
        raise ValueError(f"'query_parts' must be a list, not {parts!r}")
    parts = [str(k) for k in parts]
    if not parts:
        return []
    if parts[0] != "query" or len(parts) < 2 or len(set(parts)) != len(parts):
        raise ValueError(f"'query_parts' lists query first and then other answer keys, each once, not {parts!r}")
    props, required = schema.get("properties") or {}, set(schema.get("required") or [])
    bad = [k for k in parts[1:] if k in ANSWER_KEYS or k not in required or (props.get(k) or {}).get("type") != "string"]
    if bad:
        raise ValueError(f"'query_parts': {', '.join(bad)} must be a string the schema requires (and not "
                         f"{' or '.join(k for k in ANSWER_KEYS if k != 'query')})")
    return parts

