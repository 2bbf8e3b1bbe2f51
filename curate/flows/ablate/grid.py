"""The ablation grid: one YAML file naming the data, the student, the budget and the arms.

An arm is either a curate recipe (``mine`` / ``filter`` / ``export`` options over the same
input), ``kind: st`` (sentence-transformers' ``mine_hard_negatives`` with its own options,
trained as its documentation recommends), or ``kind: base`` (the untrained student).  Every
key is checked against the options the stage really has, and every value by the checks the
stage itself runs first (``load_grid``), so a typo or a value out of range is a one-line
error naming the file and the arm, before anything runs.

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
      # queries that need a step of reasoning to reach their passage (the reasoning spec)
      reasoning: {generate: {passages: 300, task: reasoning}, filter: from-corpus}
      # the split's own (query, positive) pairs with negatives the LLM writes (generate --from-pairs),
      # exported as they are (mine: false) or with mined negatives added
      llm-negatives: {generate: {queries: pairs}, mine: false}
      llm-and-mined: {generate: {queries: pairs}}
      # the same export trained another way (``train``, any training arm): a distillation loss on the
      # teacher's scores (margin-mse, distill-kl), the contrastive loss with likely false negatives
      # masked by the teacher (masked), or another batch order (order: export / no-duplicates)
      margin-mse: {export: {negatives_per_row: all}, train: {loss: margin-mse}}

An arm with ``generate`` starts from ``data``'s documents only: ``curate generate
--from-corpus`` (or, with ``queries: title`` / ``first-sentence``, the passage's own title or
first sentence, the no-LLM baseline), then its ``filter`` recipe with the passages as
``--corpus``, then ``curate mine --in`` against the same passages, then the export. With
``queries: pairs`` it starts from the split's training pairs instead (``curate generate
--from-pairs``: the LLM writes each pair's graded negatives). ``mine: false`` exports a
``generate`` arm's records without mining.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import math
import unicodedata
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError
from curate.core.yamlfile import read_yaml_mapping
from curate.train.fit import SCORED, Budget, Training

KINDS = ("curate", "st", "base")
# options the grid sets itself (input, output, batch size, seed): an arm may not change them
MINE_FIXED = {"out", "data", "split", "qrels", "pairs", "records", "hf", "corpus", "limit", "check_qrels", "plots"}
EXPORT_FIXED = {"inputs", "out", "formats", "batch_size", "seed", "dev_fraction"}
# an arm that starts from the corpus: how many passages, who writes the queries, and the LLM
GENERATE_KEYS = {"passages": 300, "queries": "llm", "seed": 0, "base_url": None, "model": None,
                 "model_path": None, "max_chars": None,
                 "copy_retries": None}  # None: generate's default (--copy-retries)
# further keys an arm may give, left out of its mapping when not given, so the folders (digests) of
# arms written before they existed stay the same
GENERATE_OPTIONAL = {"task"}  # a spec for the passages (e.g. reasoning): generate --task with --from-corpus
PAIRS = "pairs"  # queries: the split's training pairs, the LLM writes their negatives (no passages sampled)
ST_OWN = {"positives", "rows"}  # ablate's own keys for the st arm (see arms.st_pairs)
ST_FIXED = {"dataset", "model", "anchor_column_name", "positive_column_name", "corpus", "output_format",
            "cache_folder", "verbose", "as_triplets", "margin", "use_multi_process", "cross_encoder"}


@dataclass
class Arm:
    name: str
    kind: str = "curate"
    mine: dict[str, Any] = field(default_factory=dict)
    filter: str | None = None  # a filter recipe run between mine and export
    export: dict[str, Any] = field(default_factory=dict)
    st: dict[str, Any] = field(default_factory=dict)
    generate: dict[str, Any] | None = None  # start from the corpus (GENERATE_KEYS), not the split's queries
    mined: bool = True  # False (``mine: false``): a generate arm's records are exported without mining
    train: dict[str, Any] = field(default_factory=dict)  # how its rows train (``Training``'s keys)

    @property
    def training(self) -> Training:
        return Training(**self.train)


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
    # a light evaluation's precision, resolved once where the grid is planned (``configured``), so
    # every worker scores at it and one table holds one precision (None: the eval stage resolves it)
    precision: str | None = None

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
    _check_keys(where, spec, {"kind", "mine", "filter", "export", "st", "generate", "train"})
    kind = spec.get("kind", "curate")
    if kind not in KINDS:
        raise CurateError(f"{where}: kind {kind!r}: choose {', '.join(KINDS)}")
    mined = spec.get("mine") is not False
    arm = Arm(name=name, kind=kind, mine=_mapping(f"{where} mine", spec.get("mine") if mined else None),
              export=_mapping(f"{where} export", spec.get("export")), st=_mapping(f"{where} st", spec.get("st")),
              filter=_recipe(path, spec.get("filter")), generate=_generate(path, where, spec), mined=mined,
              train=_mapping(f"{where} train", spec.get("train")))
    if not mined and arm.generate is None:
        raise CurateError(f"{where}: mine: false needs generate (an arm from the split's queries is made by mining)")
    if kind != "curate" and (arm.mine or arm.export or arm.filter or arm.generate is not None):
        raise CurateError(f"{where}: generate/mine/filter/export options belong to curate arms (kind: curate)")
    if kind != "st" and arm.st:
        raise CurateError(f"{where}: st options belong to kind: st")
    if arm.train:
        if kind == "base":
            raise CurateError(f"{where}: train options belong to arms that train (kind: curate or st)")
        check_params(f"{where} train", Training, arm.train, partial=True)
        if arm.training.conflict():
            raise CurateError(f"{where} train: {arm.training.conflict()}")
        if kind == "st" and arm.training.loss in SCORED:
            raise CurateError(f"{where} train: loss {arm.training.loss} reads the teacher's scores, which "
                              "sentence-transformers' miner does not write; use it on a curate arm")
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
    if kind == "curate":
        _stage_checks(where, arm)
    return arm


def _stage_checks(where: str, arm: Arm) -> None:
    """The arm's options through the very checks its stages run before they start (mine's preset
    knobs and ranges, export's curriculum and negatives per row, the filter recipe), so a value a
    stage would refuse stops the grid now, named by the grid file and the arm, not when that arm's
    turn comes. The checks are the stages' own, not a copy of their rules."""
    from curate.core.stage import STAGES, preflight

    def check(part: str, options: Any) -> None:
        try:
            preflight(STAGES.get(part), options)
        except CurateError as e:
            raise CurateError(f"{where} {part}: {e}") from None

    mine, export, filter_ = STAGES.get("mine"), STAGES.get("export"), STAGES.get("filter")
    with contextlib.redirect_stderr(io.StringIO()):  # a deprecated knob's note: the mine stage prints it
        # a teacher the grid names may be made later (a fine-tuned model): it is checked when its arm runs
        check("mine", mine.options(out="", **{**arm.mine, "teachers": ()}))
    check("export", export.options(inputs=(), out="", **arm.export))
    if arm.filter is not None:  # the grid's documents are the recipe's corpus
        check("filter", filter_.options(inp="", out="", recipe=arm.filter, corpus="corpus.jsonl"))


def _generate(path: Path, where: str, spec: dict[str, Any]) -> dict[str, Any] | None:
    """The arm's ``generate`` mapping with every default filled in (None: the split's queries)."""
    if "generate" not in spec:
        return None
    given = _mapping(f"{where} generate", spec["generate"])
    _check_keys(f"{where} generate", given, set(GENERATE_KEYS) | GENERATE_OPTIONAL)
    out = {**GENERATE_KEYS, **given}
    from curate.generate.from_corpus import EXTRACTED

    if out["queries"] not in ("llm", *EXTRACTED, PAIRS):
        raise CurateError(f"{where} generate: queries must be llm, {', '.join(EXTRACTED)} or {PAIRS} "
                          f"(got {out['queries']!r})")
    if out["queries"] == PAIRS:
        if "passages" in given:
            raise CurateError(f"{where} generate: queries: {PAIRS} takes the split's pairs: passages does not apply "
                              "(the grid's queries sets how many)")
        out["passages"] = None
    elif not _whole(out["passages"]) or out["passages"] < 2:
        raise CurateError(f"{where} generate: passages must be an integer of at least 2")
    if not _whole(out["seed"]):
        raise CurateError(f"{where} generate: seed must be an integer")
    if out["copy_retries"] is not None and (not _whole(out["copy_retries"]) or not 0 <= out["copy_retries"] <= 10):
        raise CurateError(f"{where} generate: copy_retries must be an integer from 0 to 10 (or left out: the default)")
    if out["base_url"] is not None and not out["model"]:
        raise CurateError(f"{where} generate: base_url needs model (the name the server serves)")
    if "task" in out:
        if out["queries"] != "llm" or not isinstance(out["task"], str) or not out["task"].strip():
            raise CurateError(f"{where} generate: task names a spec for the passages (e.g. reasoning), with "
                              "queries: llm")
        if out["task"].endswith((".yaml", ".yml")):  # a spec file, relative to the grid file
            spec_file = Path(out["task"]).expanduser()
            out["task"] = str(spec_file if spec_file.is_absolute() else path.parent / spec_file)
        check_task = _corpus_spec(out["task"])
        if check_task:
            raise CurateError(f"{where} generate: task {out['task']!r}: {check_task}")
    if out["model_path"] is not None:
        model_path = Path(str(out["model_path"])).expanduser()
        out["model_path"] = str(model_path if model_path.is_absolute() else (path.parent / model_path))
    return out


def _corpus_spec(name: str) -> str | None:
    """Why the spec ``name`` cannot write queries for passages (None when it can), checked as
    ``generate --from-corpus`` checks it before any server starts."""
    from curate.generate.from_corpus import check_spec
    from curate.llm.taskspec import load_spec

    try:
        check_spec(load_spec(name))
    except CurateError as e:
        return str(e)
    return None


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
        raise CurateError(f"{path}: {what} {value!r} is not a BEIR folder (no corpus.jsonl in {folder}); "
                          f"fetch it with `curate data get {folder.name}` and pass --data datasets/{folder.name}")
    return str(folder.resolve())


def _whole(value: Any) -> bool:
    """An integer as YAML writes one (``true`` is a boolean, not 1)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _budget(path: Path, given: dict[str, Any]) -> Budget:
    """The budget checked against ``Budget``'s declared types and ranges; its numbers finite."""
    from curate.core.params import check_params

    budget = check_params(f"{path}: budget", Budget, given)
    for f in fields(Budget):
        value = getattr(budget, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise CurateError(f"{path}: budget: {f.name} must be a finite number, got {value}")
    return budget


def _arm_names(path: Path, arms_in: dict[Any, Any]) -> list[str]:
    """Each arm's name as the runs, folders and report lines use it: ``str()`` of its YAML key,
    not empty, without control characters, '/' or a leading '.', and unique (the keys ``1`` and
    ``'1'`` are two YAML keys but would be one arm)."""
    seen: dict[str, Any] = {}
    for key in arms_in:
        name = str(key)
        if not name.strip():
            raise CurateError(f"{path}: arm name {key!r} is empty: give each arm a name")
        if any(unicodedata.category(c) == "Cc" for c in name):
            raise CurateError(f"{path}: arm name {name!r} holds a control character: use printable names")
        if "/" in name or name.startswith("."):
            raise CurateError(f"{path}: arm name {name!r} cannot contain '/' or start with '.'")
        if name in seen:
            raise CurateError(f"{path}: arms {seen[name]!r} and {key!r} are both named {name!r}: rename one")
        seen[name] = key
    return list(seen)


def _split(path: Path, value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise CurateError(f"{path}: {what} must be a split name (a string such as train or test), got {value!r}")
    return value


def load_grid(path: str | Path, data: str | None = None) -> Grid:
    """The grid file, every value checked (types, ranges, arm names, each arm's options by its
    stages' own checks) before anything runs: each fault one line naming the file (and arm).
    ``data``: a BEIR folder used instead of the grid's, for training and evaluation alike (the
    same grid on one's own copy of its collection)."""
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
    budget = _budget(path, budget_in)
    seeds = obj.get("seeds", [0, 1, 2])
    if not isinstance(seeds, list) or not seeds or not all(_whole(s) for s in seeds):
        raise CurateError(f"{path}: seeds must be a non-empty list of integers")
    arms_in = obj.get("arms")
    if not isinstance(arms_in, dict) or not arms_in:
        raise CurateError(f"{path}: 'arms' must map arm names to their options")
    names = _arm_names(path, arms_in)
    queries = obj.get("queries")
    if queries is not None and (not _whole(queries) or queries < 2):
        raise CurateError(f"{path}: queries must be an integer of at least 2 (or left out: all)")
    shown = obj.get("shown_positives")
    if shown is not None and (not _whole(shown) or shown < 1):
        raise CurateError(f"{path}: shown_positives must be an integer of at least 1 (or left out: all)")
    holdout = obj.get("holdout")
    if holdout is not None and (not isinstance(holdout, (int, float)) or isinstance(holdout, bool)
                                or not 0 < holdout < 1):
        raise CurateError(f"{path}: holdout must be a share between 0 and 1 of the split's queries (or left out)")
    light = ev.get("light", True)
    if not isinstance(light, bool):
        raise CurateError(f"{path}: eval: light must be true or false, got {light!r}")
    student = obj.get("student")
    if student is not None and (not isinstance(student, str) or not student.strip()):
        raise CurateError(f"{path}: student must be a model name or folder (null: the bundled all-MiniLM-L6-v2), "
                          f"got {student!r}")
    if data is not None:
        obj["data"] = str(Path(data).expanduser().resolve())
        ev.pop("data", None)
    data = _folder(path, obj.get("data"), "data")
    split = _split(path, obj.get("split", "train"), "split")
    if holdout is not None and ("data" in ev or ev.get("split", split) != split):
        raise CurateError(f"{path}: with holdout the grid evaluates on its own split's held-out queries: "
                          "leave eval's data and split out")
    eval_split = split if holdout is not None else _split(path, ev.get("split", "test"), "eval split")
    return Grid(path=path, data=data, eval_data=_folder(path, ev.get("data", obj.get("data")), "eval data"),
                split=split, eval_split=eval_split, light=light, queries=queries, shown_positives=shown,
                holdout=None if holdout is None else float(holdout), student=student,
                budget=budget, seeds=list(dict.fromkeys(seeds)),
                arms=[_arm(path, name, spec) for name, spec in zip(names, arms_in.values())])
