"""The run folder every stage writes through: a lock, staged outputs swapped in together,
``run.json`` and ``rejected.jsonl``.

The stage runner (``curate.core.stage.run_stage``) opens ``open_run(stage, out, params, inputs)``
for every stage and hands the stage the ``Run``; the stage writes its files into ``run.dir``.
No stage opens a run itself. What that buys, the same for every stage:

* **One writer per folder.** ``OUT/.curate.lock`` is held (``flock``) for the whole run; a
  second run on the same ``--out`` stops at once with one line naming the holder's pid. The
  lock dies with its process, so a killed run never leaves the folder locked.
* **All outputs old or all new.** Files go to ``OUT/.curate-staging-PID`` first. Once every
  one is there, a journal is written and the entries are renamed into ``OUT`` (the old ones
  moved aside first). A run killed before the journal leaves the old outputs; a run killed
  during the renames is finished by the next run (roll forward). Either way the next run on
  that folder removes the staging folder, so nothing stale is left for good.
* **Problems found before the work.** A folder that cannot be created or written, or a disk
  that is (nearly) full, is one line naming the path before any model is loaded; a disk that
  fills up while writing is the same line, with the old outputs untouched.
* **Lineage.** ``run.json`` (stage, the run's fingerprint, parameters, input hashes, counts in / kept / dropped by
  reason, timings, versions, outputs) and, where the stage drops anything, ``rejected.jsonl``. An
  input that another stage's run beside this one made is also named by its path from the run
  folder (``run_path``), so a reader can check it is still the product this run was made from.

Stages that resume by appending (generate, brainstorm) run with ``staged=False``: they get the
lock and ``run.json``, and write into ``OUT`` itself. ``folder_lock`` is the lock alone, which
the stage runner takes to keep a replaced run.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError
from curate.core.jsonl import JsonlAppender, atomic_write_json
from curate.core.secrets import mask_secrets

LOCK = ".curate.lock"
STAGING = ".curate-staging-"
JOURNAL = ".commit.json"
RUN_JSON = "run.json"
REPORT = "report.json"  # every stage's report (the stage contract, curate.core.stage, names it so)
REJECTED = "rejected.jsonl"
MIN_FREE_BYTES = 8 << 20  # below this the run would fail while writing; say so before the work
_DISK_ERRORS = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded",
                errno.EROFS: "read-only file system", errno.EACCES: "permission denied",
                errno.EPERM: "permission denied"}
_VERSIONED = ("torch", "sentence-transformers", "transformers", "faiss-cpu", "openai", "datasets", "vllm")


@dataclass
class Drop:
    """One line of a run's ``rejected.jsonl``, the same shape for every stage: a dropped record,
    or one dropped negative of it (its level and text), with the stage (and filter step) that
    dropped it, why, and the numbers behind the decision."""

    id: str | None
    stage: str
    reason: str
    step: str | None = None  # the filter step that dropped it
    level: int | None = None  # a dropped negative: its level and text
    text: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def target(self) -> str:
        return "record" if self.level is None and self.text is None else "negative"

    def to_dict(self) -> dict[str, Any]:
        negative = self.target == "negative"
        return {"id": self.id, "stage": self.stage, "reason": self.reason, **({"step": self.step} if self.step else {}),
                "target": self.target, **({"level": self.level, "text": self.text} if negative else {}),
                "detail": self.detail}


@dataclass
class Run:
    """One stage's run: where to write, what it counted, what it dropped."""

    stage: str
    out: Path
    dir: Path  # where the stage writes its outputs (the staging folder, or ``out`` when not staged)
    params: dict[str, Any]
    inputs: list[str]
    fingerprint: str | None = None  # the stage runner's key for this run (``curate.core.stage``)
    hashed: dict[str, tuple[str | None, int]] = field(default_factory=dict)  # inputs hashed already: (sha256, bytes)
    counts: dict[str, Any] = field(default_factory=dict)
    dropped: Counter = field(default_factory=Counter)
    timings: dict[str, float] = field(default_factory=dict)
    _rejected: JsonlAppender | None = None
    started: float = field(default_factory=time.perf_counter)
    started_at: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))

    def path(self, name: str) -> Path:
        return self.dir / name

    def write_report(self, report: dict[str, Any]) -> None:
        """The stage's report as ``report.json``, the one name every stage's report has."""
        atomic_write_json(self.dir / REPORT, report)

    def reject(self, item_id: str | None, reason: str, **detail: Any) -> None:
        """Record why an item was dropped (one line of ``rejected.jsonl``; counted by reason)."""
        self.drop(Drop(item_id, self.stage, reason, detail=detail))

    def drop(self, drop: Drop) -> None:
        """Write a drop made elsewhere (the filter's steps collect theirs while they run)."""
        self.dropped[drop.reason] += 1
        if self._rejected is None:
            self._rejected = JsonlAppender(self.dir / REJECTED)
        self._rejected.write(drop.to_dict())

    def _close(self) -> None:
        if self._rejected is not None:
            self._rejected.close()


@contextmanager
def open_run(stage: str, out: str | os.PathLike, params: dict[str, Any] | None = None,
             inputs: Iterable[str | os.PathLike | None] = (), staged: bool = True,
             writes: Iterable[str] = (), fingerprint: str | None = None,
             hashed: dict[str, tuple[str | None, int]] | None = None) -> Iterator[Run]:
    """Lock ``out``, clear what a killed run left, and give the stage a place to write.

    On a clean exit the outputs are swapped in with ``run.json``; on an exception the staging
    folder is removed and the old outputs stay as they were. ``writes``: names the stage knows
    it will write, so an input inside one of them is refused before the work, not after it."""
    out = Path(out)
    created = not out.exists()
    _make_dir(out)
    try:
        with _run_in(stage, out, params, inputs, staged, writes) as run:
            run.fingerprint, run.hashed = fingerprint, dict(hashed or {})
            yield run
    except BaseException:
        if created:  # a run that failed leaves no folder it made itself
            (out / LOCK).unlink(missing_ok=True)
            try:
                out.rmdir()
            except OSError:
                pass
        raise


@contextmanager
def _run_in(stage: str, out: Path, params: dict[str, Any] | None, inputs: Iterable[str | os.PathLike | None],
            staged: bool, writes: Iterable[str] = ()) -> Iterator[Run]:
    with _lock(out):
        recover(out)
        _check_space(out)
        inputs = [str(p) for p in inputs if p is not None]
        if staged:
            _check_inputs_kept(out, inputs, writes)
        staging = out / f"{STAGING}{os.getpid()}" if staged else out
        if staged:
            _make_dir(staging)
        run = Run(stage=stage, out=out, dir=staging, params=dict(params or {}), inputs=inputs)
        try:
            yield run
            run._close()
            written = _entries(staging, out) if staged else None
            atomic_write_json(run.dir / RUN_JSON, _run_json(run, written))
            if staged:
                _check_inputs_kept(out, inputs, written)
                _commit(staging, out, written + [RUN_JSON], _stale(out, stage, written, inputs))
        except OSError as e:
            run._close()
            if staged:
                shutil.rmtree(staging, ignore_errors=True)
            raise disk_error(e, out) from None
        except BaseException:
            run._close()
            if staged:
                shutil.rmtree(staging, ignore_errors=True)
            raise


def disk_error(e: OSError, where: Path) -> CurateError | OSError:
    """A write that failed for a reason the user can fix, as one line naming the path."""
    if e.errno not in _DISK_ERRORS:
        return e
    return CurateError(f"{e.filename or where}: cannot write: {_DISK_ERRORS[e.errno]}")


def settle(out: str | os.PathLike | None) -> None:
    """Finish or discard a killed run's swap in ``out`` before anything checks this run's
    inputs, so that a run which then fails (a missing file, a bad option) still leaves the folder
    whole: the promise holds for every run on the folder, not just one that succeeds. A folder
    that another live run holds is left to it."""
    if out is None:
        return
    out = Path(out)
    try:
        pending = out.is_dir() and any(p.name.startswith(STAGING) for p in out.iterdir())
    except OSError:
        return  # unreadable: the run's own checks say so in one line
    if not pending:
        return
    try:
        with _lock(out):
            recover(out)
    except CurateError:
        pass  # held by a live run, or not writable: the run itself reports that


def recover(out: Path) -> None:
    """Finish or discard what a killed run left in ``out`` (call with the lock held)."""
    for staging in sorted(out.glob(f"{STAGING}*")):
        journal = staging / JOURNAL
        if journal.is_file():
            try:
                plan = json.loads(journal.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                plan = None
            if plan is not None:
                _apply(staging, out, plan["entries"], plan["remove"])
        shutil.rmtree(staging, ignore_errors=True)


def _commit(staging: Path, out: Path, entries: list[str], remove: list[str]) -> None:
    atomic_write_json(staging / JOURNAL, {"entries": entries, "remove": remove})
    _apply(staging, out, entries, remove)
    shutil.rmtree(staging, ignore_errors=True)


def _apply(staging: Path, out: Path, entries: list[str], remove: list[str]) -> None:
    """Move each staged entry into ``out``; idempotent, so a rerun after a kill completes it."""
    old = staging / ".old"
    old.mkdir(exist_ok=True)
    for name in entries:
        new = staging / name
        if not new.exists() and not new.is_symlink():
            continue  # moved before the kill
        target = out / name
        if target.exists() or target.is_symlink():
            if (old / name).exists():  # the old one was set aside already: this is a half-moved new one
                _remove(target)
            else:
                os.replace(target, old / name)
        os.replace(new, target)
    for name in remove:
        target = out / name
        if target.exists() or target.is_symlink():
            _remove(target)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def _entries(staging: Path, out: Path) -> list[str]:
    return sorted(p.name for p in staging.iterdir() if p.name not in (JOURNAL, RUN_JSON, ".old"))


def _previous_outputs(out: Path, stage: str) -> list[str]:
    """What the previous run of this stage wrote into ``out`` (another stage's outputs: none)."""
    try:
        previous = json.loads((out / RUN_JSON).read_text(encoding="utf-8"))
        before = previous.get("outputs") or [] if previous.get("stage") == stage else []
    except (OSError, ValueError, AttributeError):
        return []
    return [n for n in before if isinstance(n, str)] if isinstance(before, list) else []


def _check_inputs_kept(out: Path, inputs: list[str], replaced: Iterable[str]) -> None:
    """Refuse a run whose swap would replace one of its own inputs.

    A staged run moves each entry it writes over the old one of that name, and the old one is
    deleted with the staging folder; an input inside such an entry (``--in E/hf/x.jsonl
    --out E``) would go with it. Checked before the work against the names the stage declared
    and, exactly, against what it staged, before anything moves. An input inside an output of
    the last run that this one does not write again is kept (``_stale``)."""
    names = set(replaced)
    root = out.resolve()
    for p in inputs:
        path = Path(p).resolve()
        if root not in path.parents:
            continue
        top = path.relative_to(root).parts[0]
        if top in names:
            where = "is an output" if path == root / top else f"lies in {top}/ of {out}, a folder"
            raise CurateError(f"{p}: this input {where} this run writes anew (the old copy would be deleted); "
                              f"move it out of {out} or choose another --out")


def _stale(out: Path, stage: str, written: list[str], inputs: list[str]) -> list[str]:
    """Outputs of the previous run of this stage that this run does not write again (a format
    no longer asked for), except anything this run read: an input is never deleted, and
    another stage's outputs in the same folder are left alone."""
    before = _previous_outputs(out, stage)
    read = {Path(p).resolve() for p in inputs}
    stale = []
    for name in before:
        if name in written or name == RUN_JSON or "/" in name or name.startswith("."):
            continue
        target = (out / name).resolve()
        if any(r == target or target in r.parents for r in read):
            continue
        stale.append(name)
    return stale


def _run_json(run: Run, outputs: list[str] | None) -> dict[str, Any]:
    if run.dropped:
        run.counts.setdefault("dropped", dict(sorted(run.dropped.items())))
    return {
        "stage": run.stage,
        **({"fingerprint": run.fingerprint} if run.fingerprint else {}),
        "started": run.started_at,
        "seconds": round(time.perf_counter() - run.started, 2),
        "params": mask_secrets(json.loads(json.dumps(run.params, default=_plain))),  # a judge's URL from a recipe too
        "inputs": [_describe_input(p, run.hashed.get(p), run.out) for p in run.inputs],
        "counts": run.counts,
        "timings": {k: round(v, 2) for k, v in run.timings.items()},
        "outputs": outputs if outputs is not None else sorted(
            p.name for p in run.out.iterdir() if not p.name.startswith(".") and p.name != RUN_JSON),
        "versions": _versions(),
    }


def _plain(value: Any) -> Any:
    """Parameters given as objects (a teacher passed in from Python): their name, else their text."""
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return getattr(value, "model_id", None) or getattr(value, "name", None) or str(value)


def _describe_input(path: str, hashed: tuple[str | None, int] | None = None,
                    out: Path | None = None) -> dict[str, Any]:
    """Size and SHA-256 of an input (a folder: of its files, in name order), so a run can be
    matched to exactly what it read; ``hashed``: what the stage runner measured for its key;
    ``out``: the run's folder, to name an input that another stage beside it made (``run_path``)."""
    from curate.core.hashing import tree_digest

    digest, size = hashed or tree_digest(path)
    if digest is None:
        return {"path": path}
    beside = run_path(path, out) if out is not None else None
    return {"path": path, "bytes": size, "sha256": digest, **({"run_path": beside} if beside else {})}


def run_path(path: str | os.PathLike, out: Path) -> str | None:
    """An input's path from the folder that holds ``out``, when it lies in the folder of another
    stage's run there (a pipeline's earlier stage): recorded relative, so a reader finds the
    product this run was made from wherever the run folder has moved since
    (``curate.core.stage.stale_reason``). None for any other input."""
    try:
        here = out.resolve()
        rel = Path(path).resolve().relative_to(here.parent)
    except (OSError, ValueError):
        return None
    if not rel.parts or rel.parts[0] == here.name or not (here.parent / rel.parts[0] / RUN_JSON).is_file():
        return None
    return rel.as_posix()


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    from curate import __version__

    found = {"curate": __version__, "python": sys.version.split()[0]}
    for name in _VERSIONED:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            pass
    return found


def _make_dir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise CurateError(f"{path}: exists and is not a folder") from None
    except OSError as e:
        raise CurateError(f"{path}: cannot create the folder: {e.strerror.lower()}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise CurateError(f"{path}: cannot write here: permission denied")


def _check_space(out: Path) -> None:
    free = shutil.disk_usage(out).free
    if free < MIN_FREE_BYTES:
        raise CurateError(f"{out}: cannot write: no space left on the device ({free >> 10} KiB free)")


@contextmanager
def folder_lock(out: str | os.PathLike) -> Iterator[Path]:
    """Hold ``out``'s lock (made if need be) for a step that writes into a stage's folder
    without being a run of its own, so it never races that stage's run."""
    out = Path(out)
    _make_dir(out)
    with _lock(out):
        _check_space(out)
        yield out


@contextmanager
def _lock(out: Path) -> Iterator[None]:
    path = out / LOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as e:
        raise CurateError(f"{out}: cannot write here: {e.strerror.lower()}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
            raise CurateError(f"{out}: another curate run (pid {holder}) is writing here; wait for it to "
                              "finish or choose another --out") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # releases the lock; the file stays (removing it would race a waiting run)
