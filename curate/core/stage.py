"""The stage contract: what every stage declares, and the one runner that runs any of them.

A stage is a ``Stage``: its name, its options dataclass, which option fields name the files
it reads, what it writes (the first name is its product, the records a next stage reads), a
check of its options that runs before anything starts, a run function that does the work in
the run folder it is handed (a ``curate.core.runner.Run``) and returns its report, and how its
report reads as lines. ``run_stage`` does the rest the same way for every stage, and it is the
one place a run folder is opened:

* **one fingerprint**: the options that change the data (every field but ``out``, the input
  paths and the fields a stage marks ``{"fingerprint": False}``; a field marked ``"if-set"`` only
  when it differs from its default, so an option added later leaves the runs that do not use it
  as they were) and the SHA-256 of each input
  file, hashed together (``curate.core.hashing``). Paths are left out, so a moved run folder
  is still done; content is in, so an edited input or another ``--seed`` is a new run;
* **skips what is done** (``resume=True``): a folder whose marker holds this fingerprint and
  whose report is the one the marker names is not run again;
* **one run**: the folder is locked, its outputs staged and swapped in together, and its
  ``run.json`` records this fingerprint, the options and each input's hash
  (``curate.core.runner.open_run``, called from here only);
* **one report name**: ``report.json`` in every stage's folder, written from what the run
  function returns;
* **no finished result lost without a word**: a run that replaces another finished run in its
  folder (another seed, input or stage) keeps that run beside the folder, in
  ``.curate-replaced/<folder's name>/<fingerprint:12>/`` (hidden, so no reader of the run takes it
  for a stage, and the folder itself holds only the current run), and says so in one line; only
  the latest replaced run per folder is kept (``keep_replaced``);
* **no stale product read**: before a run reads another stage's product, the chain behind that
  product is checked (``stale_reason``): a stage the pipeline's latest run has not reached, or
  one made from bytes its upstream no longer holds, is an earlier run's, and the run stops with
  one line that says which stage and how to make it anew;
* **one way of printing**: the stage's ``summary`` lines, printed here, after the run.

Orchestrators (``curate pipeline``, ``curate ablate``) are lists of stages run through
``run_stage``, reading each other's products and reports through the contract.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curate.core.hashing import file_digest, tree_digest, value_digest
from curate.core.jsonl import atomic_write_json, read_json_object
from curate.core.params import check_values, field_flag
from curate.core.registry import Registry
from curate.core.secrets import mask_secrets
from curate.core.errors import CurateError
from curate.core.runner import REJECTED, REPORT, RUN_JSON, folder_lock, open_run, settle

MARKER = ".curate-done.json"  # a ".curate" name: stages that check their folder pass it by
STARTED = ".curate-started.json"  # an appending stage's fingerprint, written before it starts
REPLACED = ".curate-replaced"  # beside a folder: the latest finished run a re-run there replaced
DONE, RAN = "done earlier", "ran"
_SECRET_FIELDS = frozenset({"api_key"})  # never hashed into anything written
# How and where the work runs, not what it makes: left out of every fingerprint, so a rerun
# with more workers or a longer timeout is still the same run (the results are the same).
_HOW_FIELDS = frozenset({"cache", "concurrency", "parallel", "timeout", "max_retries", "backoff_base",
                         "executor", "workers", "ray_address", "gpus_per_worker"})


@dataclass(frozen=True)
class Stage:
    """One stage, as every orchestrator and the command line see it."""

    name: str
    options: type  # its options dataclass (each field: default, range and help in its metadata)
    # does the work in the run folder it is handed (``run.dir``), returns the report:
    # ``run(opts, run, **objects)``, objects being what a caller passes ``run_stage`` in Python
    run: Callable[..., dict[str, Any]]
    reads: tuple[str, ...] = ()  # option fields holding the paths of the files it reads
    # files found from options (a recipe by name, a task's spec and templates): part of the identity
    also_reads: Callable[[Any], list[Any]] | None = None
    also_writes: Callable[[Any], list[str]] | None = None  # outputs named by options (export's formats)
    # the options checked before anything starts (the pipeline checks every stage's before its first)
    check: Callable[[Any], None] | None = None
    # what it writes in its folder, by role: "records" (its product, what a next stage reads),
    # "drops" (why it dropped what it dropped), "corpus" (documents a next stage searches)
    writes: dict[str, str] = field(default_factory=dict)
    summary: Callable[[dict[str, Any], Path], list[Any]] | None = None  # lines printed after a run
    appends: bool = False  # resumes by appending to its outputs (generate) instead of replacing them
    # the funnel: what the run took in and kept (facts, from its report and folder: what
    # pipeline.json keeps), and how those facts read (one ``FunnelRow``: the terminal's lines and
    # the page's row are both drawn from it)
    funnel: Callable[[dict[str, Any], Path], dict[str, Any]] | None = None
    present: Callable[[dict[str, Any]], "FunnelRow"] | None = None
    # what the report page shows about the run beyond the funnel: (label, text) rows from its report
    details: Callable[[dict[str, Any]], list[tuple[str, str]]] | None = None
    # what a later export records of this run (its card's source entry), from its report; a
    # "dataset" key names the data its records came from
    provenance: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # a stage run on a finished pipeline run (``curate train RUN``), in a folder of its own inside
    # it: the stage whose product it reads. The run's page shows it after the pipeline's stages
    # while that product is the one it read (it ran after the product was written)
    follows: str | None = None
    # an orchestrator whose folder holds other stages' folders (the pipeline): from its folder, the
    # names of the stage folders its latest run is made of, and of those it has reached so far
    # (None: no record). A stage folder it names and has not reached is an earlier run's
    members: Callable[[Path], tuple[list[str], list[str]] | None] | None = None
    # the ``meta["source"]`` values it writes on records it builds from a dataset (mine: a BEIR
    # folder, a pairs file, a hub set): such records share one task text, so an export tells its
    # inputs apart by the dataset's name (``dataset_sources``)
    dataset_sources: tuple[str, ...] = ()
    # what its LLM calls took, from its report (``llm_usage``: requests, prompt and completion
    # tokens, cost, the estimate's seconds): the report page's time-and-cost row; None: no LLM
    usage: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    # the record fields it reads from the records it is given, and those it adds for the stages
    # after it (distilabel's step columns): an orchestrator checks its chain before the first runs
    needs: tuple[str, ...] = ()
    adds: tuple[str, ...] = ()

    def path(self, folder: str | Path, role: str = "records") -> Path:
        """Where a run of this stage in ``folder`` keeps its ``role`` output."""
        return Path(folder) / self.writes[role]


@dataclass
class FunnelRow:
    """How one stage's funnel facts read, wherever they are shown: ``lines`` for the terminal
    (label, text), ``cells`` for the page (label, the key of the number in the facts), what was
    dropped by reason, and for a stage of steps (filter) each step's records in, kept and dropped."""

    lines: list[tuple[str, str]]
    cells: list[tuple[str, str]] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)
    steps: list[tuple[str, int, int, dict[str, int]]] = field(default_factory=list)


# Every stage by name: the modules that declare the shipped ones register them, a plugin adds
# one through the entry-point group. The report, the API and the pipeline look stages up here.
STAGES: Registry[Stage] = Registry("stage", "curate.stages", builtin=(
    "curate.generate.stage", "curate.filter.main", "curate.mine.main", "curate.export.main",
    "curate.convert.main", "curate.holdout.main", "curate.train.main", "curate.train.fit_stage",
    "curate.evaluate.stage", "curate.flows.pipeline"))


def llm_usage(node: Any, calls: str) -> dict[str, Any]:
    """The LLM calls recorded under ``node`` (part of a report), summed: every block holding
    ``tokens`` (prompt and completion) counts once, its calls under the key ``calls`` (each stage
    names its own), with its ``cost`` and its ``estimate``'s seconds where given."""
    found: dict[str, Any] = {"requests": 0, "prompt": 0, "completion": 0, "cost": None, "estimate": None}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            tokens = node.get("tokens")
            if isinstance(tokens, dict) and {"prompt", "completion"} <= tokens.keys():
                found["prompt"] += int(tokens.get("prompt") or 0)
                found["completion"] += int(tokens.get("completion") or 0)
                found["requests"] += int(node.get(calls) or 0)
                if isinstance(node.get("cost"), (int, float)):
                    found["cost"] = (found["cost"] or 0.0) + node["cost"]
                est = node.get("estimate")
                if isinstance(est, dict) and isinstance(est.get("seconds"), (int, float)):
                    found["estimate"] = (found["estimate"] or 0.0) + est["seconds"]
                return
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(node)
    return found


def dataset_sources() -> frozenset[str]:
    """Every ``meta["source"]`` value that some stage writes on records built from a dataset."""
    return frozenset(source for _, stage in STAGES.items() for source in stage.dataset_sources)


def report_of(folder: str | Path) -> dict[str, Any] | None:
    """The report a stage left in ``folder`` (None: no finished run there)."""
    try:
        return json.loads((Path(folder) / REPORT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def stage_report(folder: str | Path) -> tuple[str | None, dict[str, Any] | None]:
    """Which stage last finished in ``folder`` (from its ``run.json``) and its report."""
    try:
        stage = json.loads((Path(folder) / RUN_JSON).read_text(encoding="utf-8")).get("stage")
    except (OSError, ValueError, AttributeError):
        stage = None
    return stage, report_of(folder)


Hashed = dict[str, tuple[str | None, int]]  # input path -> (SHA-256, bytes): each input hashed once


def fingerprint(stage: Stage, opts: Any, hashed: Hashed | None = None) -> str:
    """What makes a run of ``stage`` with ``opts`` the same run: its data-changing options and
    the bytes of what it reads (``hashed``: inputs hashed already, filled with the rest)."""
    return value_digest(_identity(stage, opts, digest=_digester({} if hashed is None else hashed)))


def _digester(hashed: Hashed) -> Callable[[Any], str | None]:
    """A file digest that hashes each path once, keeping (SHA-256, bytes) in ``hashed``."""
    def digest(path: Any) -> str | None:
        if str(path) not in hashed:
            hashed[str(path)] = tree_digest(path)
        return hashed[str(path)][0]

    return digest


def _identity(stage: Stage, opts: Any, also: list[Any] | None = None,
              digest: Callable[[Any], str | None] = file_digest) -> dict[str, Any]:
    """The options and input bytes a run's fingerprint hashes (``also``: the files found from the
    options, when the caller has them already; ``digest``: how a file is hashed)."""
    skip = {"out", *stage.reads}
    options = {f.name: _as_fingerprinted(f, getattr(opts, f.name)) for f in dataclasses.fields(opts)
               if f.name not in skip and f.name not in _HOW_FIELDS and f.metadata.get("fingerprint", True)
               and not (f.metadata.get("fingerprint") == "if-set" and getattr(opts, f.name) == f.default)}
    inputs = {name: _input_digests(getattr(opts, name), digest) for name in stage.reads}
    if stage.also_reads is not None:  # by short name (folder/file), so a moved folder is the same run
        also = stage.also_reads(opts) if also is None else also
        inputs["also"] = {f"{Path(p).parent.name}/{Path(p).name}": digest(p) for p in also}
    return {"stage": stage.name, "options": _plain(options), "inputs": inputs}


FOLDER_KEY = 12  # characters of a fingerprint that name a placed folder


def placed(stage: Stage, opts: Any, root: str | Path, hashed: Hashed | None = None) -> Any:
    """``opts`` with ``out`` set to ``root/<stage>/<fingerprint:12>``: the one place a folder is
    named by what it holds, so runs with equal options and inputs share a folder (two arms of
    a grid, a renamed arm) and a changed option gets a new folder instead of replacing a
    finished result. Call it once the stage's inputs exist: their bytes are in the name.
    ``hashed``: filled with the inputs' digests, for ``is_done`` and ``run_stage`` to reuse
    (hand it on only while the inputs stay as they are)."""
    key = fingerprint(stage, opts, hashed)
    return dataclasses.replace(opts, out=str(Path(root) / stage.name / key[:FOLDER_KEY]))


def finished_marker(folder: str | Path) -> dict[str, Any] | None:
    """The marker of the finished run in ``folder`` (its report is the one the marker names), or
    None: nothing finished there, or a run since began writing over it."""
    marker = read_json_object(Path(folder) / MARKER)
    return marker if marker and marker.get("report") == file_digest(Path(folder) / REPORT) else None


def is_done(stage: Stage, opts: Any, key: str | None = None, hashed: Hashed | None = None) -> bool:
    marker = finished_marker(opts.out)
    return (marker is not None and marker.get("stage") == stage.name
            and marker.get("fingerprint") == (key or fingerprint(stage, opts, hashed)))


def check_chain(chain: list[Stage]) -> None:
    """Refuse a chain of stages in which one needs a record field that no stage before it adds, in
    one line, before the first stage runs (the first reads what it is given: its needs are its
    input's)."""
    have: set[str] = set(chain[0].needs) if chain else set()
    for i, stage in enumerate(chain):
        missing = [name for name in stage.needs if name not in have]
        if missing:
            before = ", ".join(s.name for s in chain[:i])
            raise CurateError(f"{stage.name} needs the records' {', '.join(missing)}, which no stage before it "
                              f"({before}) adds: put a stage that adds {'them' if len(missing) > 1 else 'it'} "
                              f"before {stage.name}, or leave {stage.name} out")
        have.update(stage.adds)


def preflight(stage: Stage, opts: Any, made: list[str | Path] = ()) -> None:
    """Every check a run of ``stage`` makes before it starts: its numbers in their declared ranges
    and finite (however the options were made), then the stage's own ``check``. The pipeline and
    an ablation grid call it for every stage before the first one runs.

    ``made``: the folders of the stages that run before it in a chain. What they will write is not
    there yet, so an input option listing several paths is checked without those inside them (a
    single path is the stage's to check when it runs)."""
    check_values(opts)
    if made:
        opts = _without_made(stage, opts, [Path(m).resolve() for m in made])
    if stage.check is not None:
        stage.check(opts)


def _without_made(stage: Stage, opts: Any, made: list[Path]) -> Any:
    """``opts`` with the paths inside ``made`` left out of its list-valued inputs."""
    def later(value: Any) -> bool:  # a path, or a folder with a ":SPLIT" after it (export's --decontaminate)
        text = str(value)
        paths = [Path(p).resolve() for p in {text, text.rpartition(":")[0] or text}]
        return any(p == m or m in p.parents for p in paths for m in made)

    changes = {name: tuple(v for v in getattr(opts, name) if not later(v)) for name in stage.reads
               if isinstance(getattr(opts, name), (list, tuple))}
    return dataclasses.replace(opts, **changes) if changes else opts


def run_stage(stage: Stage, opts: Any, *, resume: bool = False, quiet: bool = False, hashed: Hashed | None = None,
              **objects: Any) -> tuple[dict[str, Any], str]:
    """Run ``stage`` with ``opts`` (``resume``: not when a run with the same fingerprint finished
    there), print its summary unless ``quiet``; its report and whether it ran or was done earlier.
    ``hashed``: the inputs' digests ``placed`` made for these options. ``objects``: passed to the
    stage's run function (a teacher object instead of a name)."""
    from curate.core.progress import console

    folder = Path(opts.out)
    settle(folder)  # a killed run's swap is finished first, whatever this run then finds wrong
    preflight(stage, opts)
    also = list(stage.also_reads(opts)) if stage.also_reads is not None else []
    hashed = {} if hashed is None else hashed  # each input hashed once: for the key and run.json
    identity = _identity(stage, opts, also, _digester(hashed))  # for the key and for what changed
    key = value_digest(identity)
    check_upstream(stage, opts, also)  # before "done earlier": a stale product is refused either way
    if resume and is_done(stage, opts, key):
        if not quiet:
            console.print(f"{stage.name}: done earlier ({folder / REPORT})", soft_wrap=True, markup=False)
        return report_of(folder) or {}, DONE
    created = not folder.exists()
    earlier = finished_marker(folder)
    kept, said = None, None
    if earlier is not None and (earlier.get("stage"), earlier.get("fingerprint")) != (stage.name, key):
        kept = keep_replaced(folder, earlier, move=stage.appends)
        said = (f"{stage.name}: {', '.join(_what_changed(earlier, stage, identity, opts))} changed since the run in "
                f"{folder}: its finished result is kept in {kept} (only the latest replaced run is kept) and this "
                "run starts afresh")
    if kept is not None and stage.appends:  # moved out of the folder already: said now, whatever happens next
        _drop_older(kept)
        if not quiet:
            console.print(said, soft_wrap=True, markup=False, highlight=False)
    if stage.appends:  # a run killed half way must not look finished, whatever ran before it
        (folder / MARKER).unlink(missing_ok=True)
        changed = _start_afresh_unless_resuming(stage, opts, folder, key, identity)
        if changed and kept is None and not quiet:
            console.print(f"{stage.name}: {', '.join(changed)} changed since the run in {folder} began: its records "
                          "are cleared and it starts afresh (the LLM's answers stay cached)",
                          soft_wrap=True, markup=False, highlight=False)
    writes = [*stage.writes.values(), REPORT, REJECTED, *(stage.also_writes(opts) if stage.also_writes else ())]
    try:
        with open_run(stage.name, folder, lineage(opts), input_paths(stage, opts, also), staged=not stage.appends,
                      writes=writes, fingerprint=key, hashed=hashed) as run:
            report = stage.run(opts, run, **objects)
            run.write_report(report)
    except BaseException:
        if kept is not None and not stage.appends:  # nothing was replaced: the finished run is still in place
            _discard_kept(kept)
        if created:  # a run that fails before its work leaves no folder it made, not even its note
            _remove_if_only_notes(folder)
        raise
    if kept is not None and not stage.appends:
        _drop_older(kept)
        if not quiet:
            console.print(said, soft_wrap=True, markup=False, highlight=False)
    atomic_write_json(folder / MARKER, {"stage": stage.name, "fingerprint": key,  # what changed, next time
                                        "report": file_digest(folder / REPORT), "identity": mask_secrets(identity)})
    if not quiet:
        for line in _summary(stage, report, folder):
            console.print(line, soft_wrap=True) if not isinstance(line, str) else console.print(
                line, soft_wrap=True, markup=False, highlight=False)
    return report, RAN


def keep_replaced(folder: Path, marker: dict[str, Any], move: bool) -> Path:
    """Keep the finished run in ``folder`` (its ``marker``) that a run is about to replace, in
    ``.curate-replaced/<folder's name>/<its fingerprint:12>/`` beside ``folder`` (a pipeline's
    stage: inside the run folder), and return where. Only the latest replaced
    run is kept: once the run replaces it, the one kept before goes (``_drop_older``), so re-runs
    never pile copies up; a staged run that fails replaced nothing, and its copy goes instead. The
    files are hard links where the file system allows (a staged run swaps new files in beside
    them, so no byte is copied); ``move``: moved instead, for a run that writes into the folder
    itself (an appending stage, which would clear them anyway)."""
    named = folder if folder.name else folder.resolve()  # "--out ." has no name of its own
    kept = named.parent / REPLACED / named.name / str(marker.get("fingerprint") or "unknown")[:12]
    with folder_lock(folder):
        shutil.rmtree(kept, ignore_errors=True)
        kept.mkdir(parents=True)
        for name in _finished_outputs(folder, marker):
            source = folder / name
            if not source.exists() and not source.is_symlink():
                continue
            if move:
                os.replace(source, kept / name)
            elif source.is_dir() and not source.is_symlink():
                shutil.copytree(source, kept / name, symlinks=True, copy_function=_link_or_copy)
            else:
                _link_or_copy(source, kept / name)
    return kept


def _discard_kept(kept: Path) -> None:
    """Remove a copy kept for a run that then failed, and the folders made only to hold it, so a
    failed run leaves nothing beside the folder it was asked to write."""
    shutil.rmtree(kept, ignore_errors=True)
    for parent in (kept.parent, kept.parent.parent):  # <folder's name>/, then .curate-replaced/
        try:
            parent.rmdir()  # only when empty: another folder's kept run stays
        except OSError:
            break


def _drop_older(kept: Path) -> None:
    """Remove every replaced run kept beside ``kept``: one kept run per folder."""
    for other in kept.parent.iterdir():
        if other != kept:
            shutil.rmtree(other) if other.is_dir() and not other.is_symlink() else other.unlink()


def _finished_outputs(folder: Path, marker: dict[str, Any]) -> list[str]:
    """What the finished run in ``folder`` wrote: its report, ``run.json`` and marker, what its
    stage declares, and for a staged run every entry its ``run.json`` lists (an appending run's
    list is the folder's, other stages' folders too, so its declared outputs stand alone)."""
    names = [REPORT, REJECTED, RUN_JSON, MARKER]
    name = marker.get("stage")
    if isinstance(name, str) and name in STAGES:
        other = STAGES.get(name)
        names += [*other.writes.values()]
        run = read_json_object(folder / RUN_JSON)
        if not other.appends and run.get("stage") == name and isinstance(run.get("outputs"), list):
            names += run["outputs"]
    return [n for n in dict.fromkeys(names) if isinstance(n, str) and "/" not in n and n not in ("", ".", "..")
            and (n == MARKER or not n.startswith("."))]


def _link_or_copy(source: str | os.PathLike, target: str | os.PathLike) -> None:
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError:  # a file system without hard links
        shutil.copy2(source, target, follow_symlinks=False)


def _what_changed(marker: dict[str, Any], stage: Stage, identity: dict[str, Any], opts: Any) -> list[str]:
    """What differs between the finished run a run replaces (its marker) and this run, as flags."""
    if marker.get("stage") != stage.name:
        return [f"the stage (it held a {marker.get('stage')} run)"]
    return _changed_flags(marker.get("identity"), mask_secrets(identity), opts) or ["an option or input"]


def check_upstream(stage: Stage, opts: Any, also: list[Any]) -> None:
    """Refuse a run that would read another stage's product which is not from its run's current
    upstream (``stale_reason``): the one check every reader makes, done here for every stage (curate
    train on a pipeline's export, an export's ``--in``, a pipeline's own next stage)."""
    own = Path(opts.out).resolve() if getattr(opts, "out", None) else None
    digests: dict[Path, str | None] = {}
    for folder in dict.fromkeys(f for f in map(_stage_folder, input_paths(stage, opts, also)) if f is not None):
        if own is not None and (folder.resolve() == own or own in folder.resolve().parents):
            continue  # the stage's own folder (its tasks/, say) is its own business
        why = stale_reason(folder, digests)
        if why is not None:
            raise CurateError(why)


def _stage_folder(path: str | os.PathLike) -> Path | None:
    """The folder of the finished stage run that ``path`` lies in (the path itself, or up to three
    folders up), if any."""
    p = Path(path)
    for folder in (p, *list(p.parents)[:3]):
        if (folder / MARKER).is_file() and (folder / RUN_JSON).is_file():
            return folder
    return None


def stale_reason(folder: str | Path, digests: dict[Path, str | None] | None = None) -> str | None:
    """Why the result in the stage folder ``folder`` is not from its run's current upstream, as one
    line naming the stage that is an earlier run's and the fix; None when it is current.

    The chain is followed up from ``folder``: a stage folder that the orchestrator of the folder
    holding it (the pipeline, ``Stage.members``) names but has not reached in its latest run is an
    earlier run's, and so is a stage whose recorded input from another stage beside it
    (``run.json``: ``run_path`` and ``sha256``) is no longer that stage's bytes. ``digests``: the
    files hashed already, shared between calls."""
    folder = Path(folder)
    found = _stale_link(folder, {} if digests is None else digests, set())
    if found is None:
        return None
    name, why = found
    orchestrator = _orchestrator(folder.parent)
    after = "" if name == folder.name else f", then each stage after it up to {folder.name}"
    fix = (f"run curate {orchestrator[0]} again with --out {folder.parent} to make it anew" if orchestrator
           else f"run {name} again on what it reads now{after}")
    return f"{folder} is from an earlier run: {why}; {fix}"


def _stale_link(folder: Path, digests: dict[Path, str | None], seen: set[Path]) -> tuple[str, str] | None:
    """The first stage in ``folder``'s chain that is an earlier run's: its folder's name and why."""
    if folder in seen:
        return None
    seen.add(folder)
    root, name = folder.parent, folder.name
    orchestrator = _orchestrator(root)
    if orchestrator is not None and name in orchestrator[1][0] and name not in orchestrator[1][1]:
        return name, f"the {orchestrator[0]}'s latest run in {root} has not reached {name}"
    for entry in read_json_object(folder / RUN_JSON).get("inputs") or []:
        rel = entry.get("run_path") if isinstance(entry, dict) else None
        if not isinstance(rel, str) or not entry.get("sha256"):
            continue
        now = root / rel
        if now not in digests:
            digests[now] = tree_digest(now)[0]
        if digests[now] != entry["sha256"]:
            return name, f"{name} was made from an earlier {rel}"
        upstream = _stale_link(root / Path(rel).parts[0], digests, seen)
        if upstream is not None:
            return upstream
    return None


def _orchestrator(root: Path) -> tuple[str, tuple[list[str], list[str]]] | None:
    """The orchestrator whose run ``root`` holds (the pipeline) and its record of the stage
    folders its latest run is made of and has reached; None for any other folder."""
    for note in (STARTED, RUN_JSON):
        name = read_json_object(root / note).get("stage")
        if isinstance(name, str) and name in STAGES and STAGES.get(name).members is not None:
            record = STAGES.get(name).members(root)
            return (name, record) if record is not None else None
    return None


def _summary(stage: Stage, report: dict[str, Any], folder: Path) -> list[Any]:
    """The lines printed after a run: the stage's own, else its funnel row's and where it wrote."""
    if stage.summary is not None:
        return list(stage.summary(report, folder))
    if stage.present is None or stage.funnel is None:
        return [f"{stage.name}: done ({folder})"]
    return [f"{label}: {text}" if label else f"  {text}" for label, text in
            stage.present(stage.funnel(report, folder)).lines] + [f"  written to {folder}"]


def lineage(opts: Any) -> dict[str, Any]:
    """The options a run was given, as ``run.json`` records them: every field but ``out`` (the key
    never; a URL's secrets are masked when written; a field marked ``"lineage": "if-set"`` only
    when it differs from its default)."""
    return {f.name: _plain_all(getattr(opts, f.name)) for f in _recorded(opts) if f.name != "out"}


def _recorded(opts: Any) -> list[dataclasses.Field]:
    return [f for f in dataclasses.fields(opts) if f.name not in _SECRET_FIELDS
            and not (f.metadata.get("lineage") == "if-set" and getattr(opts, f.name) == f.default)]


def _plain_all(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain_all(getattr(value, f.name)) for f in _recorded(value)}
    return _plain(value)


def input_paths(stage: Stage, opts: Any, also: list[Any]) -> list[str]:
    """Every file the run reads (named by options, and ``also``: found from them), for ``run.json``."""
    found: list[Any] = [getattr(opts, name) for name in stage.reads] + also
    flat: list[str] = []
    for value in found:
        for v in value if isinstance(value, (list, tuple)) else (value,):
            if v is not None and str(v) not in flat:
                flat.append(str(v))
    return flat


def _start_afresh_unless_resuming(stage: Stage, opts: Any, folder: Path, key: str,
                                  identity: dict[str, Any]) -> list[str]:
    """An appending stage resumes only what a run with the same fingerprint began: another seed,
    count, task or model must not add its records to the last run's. Its outputs are cleared then
    (an LLM's answers stay in the request cache), and the new fingerprint is noted before any
    work. Returns what changed, as flags (empty: nothing to clear)."""
    identity = mask_secrets(identity)  # written to the folder: no key, no URL's secrets
    try:
        started = json.loads((folder / STARTED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        started = {}
    changed: list[str] = []
    if isinstance(started, dict) and started.get("fingerprint") not in (None, key):
        changed = _changed_flags(started.get("identity"), identity, opts) or ["an option or input"]
        for name in (*stage.writes.values(), REPORT, MARKER):
            (folder / name).unlink(missing_ok=True)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_json(folder / STARTED, {"stage": stage.name, "fingerprint": key, "identity": identity})
    return changed


def _remove_if_only_notes(folder: Path) -> None:
    try:
        if {p.name for p in folder.iterdir()} <= {STARTED, ".curate.lock"}:
            for p in folder.iterdir():
                p.unlink()
            folder.rmdir()
    except OSError:
        pass


def _changed_flags(old: Any, new: dict[str, Any], opts: Any) -> list[str]:
    """The options (as their --flags) and inputs whose values differ between two identities."""
    if not isinstance(old, dict) or not isinstance(old.get("options"), dict):
        return []
    flags: dict[str, str] = {}  # option name -> its flag, nested option dataclasses' own included
    nested: set[str] = set()
    for f in dataclasses.fields(opts):
        value = getattr(opts, f.name)
        if dataclasses.is_dataclass(value):
            nested.add(f.name)
            flags.update({g.name: field_flag(g) for g in dataclasses.fields(value)})
        else:
            flags[f.name] = field_flag(f)

    def flat(options: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in options.items() if k not in nested}
        for k in nested:
            out.update(options.get(k) if isinstance(options.get(k), dict) else {})
        return out

    before, after = flat(old["options"]), flat(new["options"])
    changed = [flags.get(k, k) for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)]
    inputs_before = old.get("inputs") if isinstance(old.get("inputs"), dict) else {}
    changed += [f"the {flags.get(k, k)} input" for k in new["inputs"]
                if k != "also" and inputs_before.get(k) != new["inputs"][k]]
    also_before, also = inputs_before.get("also"), new["inputs"].get("also")
    if isinstance(also_before, dict) and isinstance(also, dict):  # files both runs read, edited since
        changed += [f"{name} (a file it reads)" for name in sorted(also) if name in also_before
                    and also_before[name] != also[name]]
    return changed


def _input_digests(value: Any, digest: Callable[[Any], str | None]) -> Any:
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return [_input_digests(v, digest) for v in value]
    return digest(value)


def _as_fingerprinted(f: dataclasses.Field, value: Any) -> Any:
    """The value a fingerprint sees: the field's ``"fingerprint_as"`` of it where it declares one
    (the LLM servers' URLs: only whether there are any)."""
    return f.metadata["fingerprint_as"](value) if "fingerprint_as" in f.metadata else value


def _plain(value: Any) -> Any:
    """Options as JSON-able values (nested option dataclasses too; secrets left out)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(_as_fingerprinted(f, getattr(value, f.name))) for f in dataclasses.fields(value)
                if f.name not in _SECRET_FIELDS | _HOW_FIELDS and f.metadata.get("fingerprint", True)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return getattr(value, "model_id", None) or getattr(value, "name", None) or str(value)
