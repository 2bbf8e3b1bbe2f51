"""The ablation grid: one YAML file naming the data, the student, the budget and the arms.

An arm is either a curate recipe (``mine`` / ``filter`` / ``export`` options over the same
input), ``kind: st`` (sentence-transformers' ``mine_hard_negatives`` with its own options,
trained as its documentation recommends), or ``kind: base`` (the untrained student).  Every
key is checked against the options the stage really has, so a typo is a one-line error
naming the file and the arm, before anything runs.

    data: ../shared/data/scifact        # BEIR folder; paths are relative to the grid file
    split: train
    queries: 640                        # optional: the same seeded subset of queries for every arm
    shown_positives: 1                  # optional: each query shows its most relevant positive only
    holdout: 0.5                        # optional, for one labelled split: evaluate on this share of its
                                        # queries (eval then names no data or split), train on the rest
    eval: {data: ../shared/data/scifact, split: test, light: true}
    student: null                       # null: the bundled all-MiniLM-L6-v2
    budget: {steps: 40, batch_size: 16, lr: 2.0e-5, max_seq_length: 128}
    seeds: [0, 1, 2]
    arms:
      base: {kind: base}
      st-naive: {kind: st, st: {num_negatives: 4}}
      default: {}                        # curate mine -> curate export with their defaults
      none: {export: {curriculum: none}}
      # from the corpus alone (no training query): queries an LLM writes for 300 sampled passages,
      # Promptagator's round trip, then mining against the passages and the export
      from-corpus: {generate: {passages: 300}, filter: from-corpus}
      titles: {generate: {passages: 300, queries: title}, filter: from-corpus}

An arm with ``generate`` starts from ``data``'s documents only: ``curate generate
--from-corpus`` (or, with ``queries: title`` / ``first-sentence``, the passage's own title or
first sentence, the no-LLM baseline), then its ``filter`` recipe with the passages as
``--corpus``, then ``curate mine --in`` against the same passages, then the export.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError
from curate.core.yamlfile import read_yaml_mapping

KINDS = ("curate", "st", "base")
# options the grid sets itself (input, output, batch size, seed): an arm may not change them
MINE_FIXED = {"out", "data", "split", "qrels", "pairs", "records", "hf", "corpus", "limit", "check_qrels", "plots"}
EXPORT_FIXED = {"inputs", "out", "formats", "batch_size", "seed", "dev_fraction"}
# an arm that starts from the corpus: how many passages, who writes the queries, and the LLM
GENERATE_KEYS = {"passages": 300, "queries": "llm", "seed": 0, "base_url": None, "model": None,
                 "model_path": None, "max_chars": None}
ST_OWN = {"positives", "rows"}  # ablate's own keys for the st arm (see arms.st_pairs)
ST_FIXED = {"dataset", "model", "anchor_column_name", "positive_column_name", "corpus", "output_format",
            "cache_folder", "verbose", "as_triplets", "margin", "use_multi_process", "cross_encoder"}


@dataclass
class Budget:
    steps: int = 40
    batch_size: int = 16
    lr: float = 2e-5
    max_seq_length: int = 128
    warmup_ratio: float = 0.1


@dataclass
class Arm:
    name: str
    kind: str = "curate"
    mine: dict[str, Any] = field(default_factory=dict)
    filter: str | None = None  # a filter recipe run between mine and export
    export: dict[str, Any] = field(default_factory=dict)
    st: dict[str, Any] = field(default_factory=dict)
    generate: dict[str, Any] | None = None  # start from the corpus (GENERATE_KEYS), not the split's queries


@dataclass
class Grid:
    path: Path
    data: str
    eval_data: str
    split: str = "train"
    eval_split: str = "test"
    light: bool = True
    queries: int | None = None
    shown_positives: int | None = None  # labels held back: each training query shows only its first N positives
    holdout: float | None = None  # one labelled split: this share of its queries is evaluated, the rest trained on
    student: str | None = None
    budget: Budget = field(default_factory=Budget)
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    arms: list[Arm] = field(default_factory=list)

    @property
    def baselines(self) -> list[str]:
        return [a.name for a in self.arms if a.kind == "st"]


def _check_keys(where: str, given: dict[str, Any], allowed: set[str], fixed: set[str] = frozenset()) -> None:
    for key in given:
        if key in fixed:
            raise CurateError(f"{where}: '{key}' is set by the grid itself and cannot be changed per arm")
        if key not in allowed:
            raise CurateError(f"{where}: unknown option '{key}' (choose from {', '.join(sorted(allowed - fixed))})")


def _mapping(where: str, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise CurateError(f"{where}: expected a mapping, got {type(value).__name__}")
    return dict(value)


def _st_parameters() -> set[str]:
    from sentence_transformers.util import mine_hard_negatives

    return set(inspect.signature(mine_hard_negatives).parameters)


def _arm(path: Path, name: str, spec: Any) -> Arm:
    from curate.core.params import check_params
    from curate.export.main import ExportOptions
    from curate.mine.main import MineOptions

    where = f"{path}: arm '{name}'"
    spec = _mapping(where, spec)
    _check_keys(where, spec, {"kind", "mine", "filter", "export", "st", "generate"})
    kind = spec.get("kind", "curate")
    if kind not in KINDS:
        raise CurateError(f"{where}: kind {kind!r}: choose {', '.join(KINDS)}")
    arm = Arm(name=name, kind=kind, mine=_mapping(f"{where} mine", spec.get("mine")),
              export=_mapping(f"{where} export", spec.get("export")), st=_mapping(f"{where} st", spec.get("st")),
              filter=_recipe(path, spec.get("filter")), generate=_generate(path, where, spec))
    if kind != "curate" and (arm.mine or arm.export or arm.filter or arm.generate is not None):
        raise CurateError(f"{where}: generate/mine/filter/export options belong to curate arms (kind: curate)")
    if kind != "st" and arm.st:
        raise CurateError(f"{where}: st options belong to kind: st")
    for part, options, fixed in (("mine", MineOptions, MINE_FIXED), ("export", ExportOptions, EXPORT_FIXED)):
        given = getattr(arm, part)
        _check_keys(f"{where} {part}", given, {f.name for f in fields(options)}, fixed)
        check_params(f"{where} {part}", options, given, partial=True)  # types and ranges too
    from curate.negatives.knobs import deprecated_clash

    clash = deprecated_clash(arm.mine)  # margin with relative_margin, ...: one name, before anything runs
    if clash:
        raise CurateError(f"{where} mine: {clash}")
    if arm.st:
        _check_keys(f"{where} st", arm.st, _st_parameters() | ST_OWN, ST_FIXED)
    if arm.st.get("positives", "all") not in ("all", "one"):
        raise CurateError(f"{where} st: positives must be 'all' or 'one'")
    if arm.st.get("rows", "one") not in ("all", "one"):
        raise CurateError(f"{where} st: rows must be 'all' or 'one'")
    if arm.filter is not None and not isinstance(arm.filter, str):
        raise CurateError(f"{where}: filter must be a recipe name or file")
    return arm


def _generate(path: Path, where: str, spec: dict[str, Any]) -> dict[str, Any] | None:
    """The arm's ``generate`` mapping with every default filled in (None: the split's queries)."""
    if "generate" not in spec:
        return None
    given = _mapping(f"{where} generate", spec["generate"])
    _check_keys(f"{where} generate", given, set(GENERATE_KEYS))
    out = {**GENERATE_KEYS, **given}
    from curate.generate.from_corpus import EXTRACTED

    if out["queries"] not in ("llm", *EXTRACTED):
        raise CurateError(f"{where} generate: queries must be llm, {', '.join(EXTRACTED)} (got {out['queries']!r})")
    if not isinstance(out["passages"], int) or out["passages"] < 2:
        raise CurateError(f"{where} generate: passages must be an integer of at least 2")
    if not isinstance(out["seed"], int):
        raise CurateError(f"{where} generate: seed must be an integer")
    if out["base_url"] is not None and not out["model"]:
        raise CurateError(f"{where} generate: base_url needs model (the name the server serves)")
    if out["model_path"] is not None:
        model_path = Path(str(out["model_path"])).expanduser()
        out["model_path"] = str(model_path if model_path.is_absolute() else (path.parent / model_path))
    return out


def _recipe(path: Path, value: Any) -> Any:
    """A filter recipe file named relative to the grid is found there (a shipped name stays a name)."""
    if isinstance(value, str) and value.endswith((".yaml", ".yml")) and (path.parent / value).is_file():
        return str((path.parent / value).resolve())
    return value


def _folder(path: Path, value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise CurateError(f"{path}: '{what}' must be a BEIR folder path")
    folder = Path(value).expanduser()
    folder = folder if folder.is_absolute() else (path.parent / folder)
    if not (folder / "corpus.jsonl").is_file():
        raise CurateError(f"{path}: {what} {value!r} is not a BEIR folder (no corpus.jsonl in {folder})")
    return str(folder.resolve())


def load_grid(path: str | Path) -> Grid:
    path = Path(path)
    if not path.is_file():
        raise CurateError(f"{path}: no such grid file")
    obj = read_yaml_mapping(path, "grid (data, eval, budget, seeds, arms)")
    _check_keys(str(path), obj, {"data", "split", "queries", "shown_positives", "holdout", "eval", "student",
                                 "budget", "seeds", "arms"})
    ev = _mapping(f"{path}: eval", obj.get("eval"))
    _check_keys(f"{path}: eval", ev, {"data", "split", "light"})
    budget_in = _mapping(f"{path}: budget", obj.get("budget"))
    _check_keys(f"{path}: budget", budget_in, {f.name for f in fields(Budget)})
    try:
        budget = Budget(**{k: type(getattr(Budget(), k))(v) for k, v in budget_in.items()})
    except (TypeError, ValueError) as e:
        raise CurateError(f"{path}: budget: {e}") from None
    if budget.steps < 1 or budget.batch_size < 2 or budget.lr <= 0 or budget.max_seq_length < 8:
        raise CurateError(f"{path}: budget needs steps >= 1, batch_size >= 2, lr > 0, max_seq_length >= 8")
    seeds = obj.get("seeds", [0, 1, 2])
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) for s in seeds):
        raise CurateError(f"{path}: seeds must be a non-empty list of integers")
    arms_in = obj.get("arms")
    if not isinstance(arms_in, dict) or not arms_in:
        raise CurateError(f"{path}: 'arms' must map arm names to their options")
    queries = obj.get("queries")
    if queries is not None and (not isinstance(queries, int) or queries < 2):
        raise CurateError(f"{path}: queries must be an integer of at least 2 (or left out: all)")
    shown = obj.get("shown_positives")
    if shown is not None and (not isinstance(shown, int) or isinstance(shown, bool) or shown < 1):
        raise CurateError(f"{path}: shown_positives must be an integer of at least 1 (or left out: all)")
    holdout = obj.get("holdout")
    if holdout is not None and (not isinstance(holdout, (int, float)) or isinstance(holdout, bool)
                                or not 0 < holdout < 1):
        raise CurateError(f"{path}: holdout must be a share between 0 and 1 of the split's queries (or left out)")
    data = _folder(path, obj.get("data"), "data")
    split = str(obj.get("split", "train"))
    if holdout is not None and ("data" in ev or ev.get("split", split) != split):
        raise CurateError(f"{path}: with holdout the grid evaluates on its own split's held-out queries: "
                          "leave eval's data and split out")
    grid = Grid(path=path, data=data, eval_data=_folder(path, ev.get("data", obj.get("data")), "eval data"),
                split=split, eval_split=split if holdout is not None else str(ev.get("split", "test")),
                light=bool(ev.get("light", True)), queries=queries, shown_positives=shown,
                holdout=None if holdout is None else float(holdout),
                student=obj.get("student"),
                budget=budget, seeds=list(dict.fromkeys(seeds)),
                arms=[_arm(path, str(name), spec) for name, spec in arms_in.items()])
    for name in {a.name for a in grid.arms}:
        if "/" in name or name.startswith("."):
            raise CurateError(f"{path}: arm name {name!r} cannot contain '/' or start with '.'")
    return grid
