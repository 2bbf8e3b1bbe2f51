"""Where shards of a stage's work run: in this process, or as Ray tasks when one machine is
outgrown.

A stage cuts its records into contiguous shards and hands ``map_shards`` one function of a
shard; the results come back in shard order, so joining them gives exactly what one process
would have produced. The function and its shards must pickle (Ray ships them to its workers
with cloudpickle); a shard's function sees only its shard, which is why only steps that decide
each record on its own (``map`` steps) are sharded.

``Executor(kind="ray")`` starts a local Ray instance with ``workers`` CPUs, or joins the cluster
at ``address`` (``"auto"``: the one this machine belongs to). Ray is an optional dependency
(``pip install 'curate[ray]'``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from curate.core.errors import CurateError

S = TypeVar("S")
R = TypeVar("R")


@dataclass(frozen=True)
class Executor:
    """Where a stage's parallel work runs. As a stage option's type, its fields are the
    ``--executor``, ``--workers``, ``--ray-address`` and ``--gpus-per-worker`` options; the
    stage's field names the work (``"help_vars": {"what": ..., "unit": ...}``)."""

    kind: Literal["local", "ray"] = field(default="local", metadata={
        "flag": "--executor",
        "help": "Where {what} runs: here, or on Ray workers (pip install 'curate[ray]'); the results are the same."})
    workers: int = field(default=1, metadata={  # shards per sharded step
        "min": 1, "cli_default": 4, "help": "Ray workers ({unit} at a time), with --executor ray."})
    address: str | None = field(default=None, metadata={  # a Ray cluster to join; None starts a local one
        "flag": "--ray-address",
        "help": "A Ray cluster to join ('auto': the one this machine is in); default: a local one."})
    gpus: float = field(default=0.0, metadata={  # GPUs each Ray worker asks for (encoding on a GPU cluster: 1)
        "flag": "--gpus-per-worker", "min": 0.0, "help": "GPUs each Ray worker asks for (1 on a GPU cluster)."})

    def __post_init__(self):
        if self.kind not in ("local", "ray"):
            raise CurateError(f"--executor: choose local or ray, got {self.kind!r}")
        if not isinstance(self.workers, int) or self.workers < 1:
            raise CurateError(f"--workers must be at least 1, got {self.workers!r}")
        if self.gpus < 0:
            raise CurateError(f"--gpus-per-worker must be 0 or more, got {self.gpus!r}")

    @property
    def shards(self) -> int:
        return self.workers if self.kind == "ray" else 1


def split(items: Sequence[S], n: int) -> list[list[S]]:
    """``items`` in ``n`` contiguous, nearly equal shards (none empty); their concatenation is ``items``."""
    n = max(1, min(n, len(items)))
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(list(items[start:end]))
        start = end
    return out


def map_shards(fn: Callable[[list[S]], R], shards: Sequence[list[S]], executor: Executor) -> list[R]:
    """``fn`` over each shard, results in shard order."""
    if executor.kind == "local" or len(shards) <= 1:
        return [fn(shard) for shard in shards]
    ray = ray_for(executor)
    task = remote(ray, _call, executor)
    fn_ref = ray.put(fn)  # shipped once, shared by every shard's task
    return _get(ray, [task.remote(fn_ref, shard) for shard in shards])


def map_unordered(fn: Callable[[S], R], items: Sequence[S], executor: Executor) -> Iterator[tuple[int, R]]:
    """``fn`` over each item, yielding ``(index, result)`` as each finishes, at most ``workers``
    at a time: for long independent jobs (a training run each) whose results the caller files
    one by one, so that a stopped run keeps every finished one."""
    if executor.kind == "local":
        for i, item in enumerate(items):
            yield i, fn(item)
        return
    ray = ray_for(executor)
    task = remote(ray, _call, executor)
    fn_ref = ray.put(fn)
    waiting = list(enumerate(items))
    running: dict[Any, int] = {}
    try:
        while waiting or running:
            while waiting and len(running) < executor.workers:
                i, item = waiting.pop(0)
                running[task.remote(fn_ref, item)] = i
            [ready], _ = ray.wait(list(running), num_returns=1)
            i = running.pop(ready)
            yield i, _get(ray, ready)
    finally:
        for ref in running:  # the caller stopped early or a job failed: cancel the rest
            ray.cancel(ref, force=True)


def _call(fn: Callable[[S], R], item: S) -> R:
    """A Ray task that applies a function shipped once (``ray.put``) to one shard or item."""
    return fn(item)


# settings a worker needs to find what the driver made (caches, models); never credentials
_PASSED_ENV = ("CURATE_CACHE_DIR", "CURATE_GGUF", "CURATE_VLLM_PYTHON", "CURATE_TEACHER_BASE_URL",
               "CURATE_TEACHER_TIMEOUT", "HF_HOME", "HF_HUB_OFFLINE",
               "TRANSFORMERS_OFFLINE", "SENTENCE_TRANSFORMERS_HOME", "TQDM_DISABLE")


def remote(ray, target, executor: Executor, **options: Any):
    """``target`` as a Ray task or actor asking for the executor's GPUs (none: Ray's CPU default),
    run with the driver's cache and model settings (a Ray instance started earlier in this
    process, or on another machine, would otherwise use its own); ``options``: Ray's own."""
    env = {k: os.environ[k] for k in _PASSED_ENV if k in os.environ}
    opts: dict[str, Any] = {"runtime_env": {"env_vars": env}} if env else {}
    if executor.gpus:
        opts["num_gpus"] = executor.gpus
    opts.update(options)
    return ray.remote(**opts)(target) if opts else ray.remote(target)


class WorkerPool:
    """Long-lived Ray workers for rounds of shards: each worker is built once by ``make_worker``
    (loading a model, say) and then takes one shard per round, so a model loads once per worker
    however many rounds follow. A list of makers builds one worker from each (a worker that
    holds its own part of the data: a shard of a corpus's index)."""

    def __init__(self, make_worker: Callable[[], Callable[[S], R]] | Sequence[Callable[[], Callable[[S], R]]],
                 executor: Executor):
        ray = ray_for(executor)
        actor = remote(ray, _Worker, executor)
        makers = list(make_worker) if isinstance(make_worker, Sequence) else [make_worker] * executor.workers
        self._actors = [actor.remote(m) for m in makers]

    @property
    def size(self) -> int:
        return len(self._actors)

    def map(self, shards: Sequence[S]) -> list[R]:
        """One round: shard i goes to worker i mod size; results in shard order."""
        import ray

        return _get(ray, [self._actors[i % len(self._actors)].run.remote(shard) for i, shard in enumerate(shards)])

    def close(self) -> None:
        if self._actors:
            import ray

            for a in self._actors:
                ray.kill(a)
            self._actors = []


class _Worker:
    """A Ray actor around one worker function (built in the actor's process)."""

    def __init__(self, make_worker):
        self.fn = make_worker()

    def run(self, shard):
        return self.fn(shard)


def _get(ray, refs):
    try:
        return ray.get(refs)
    except ray.exceptions.RayError as e:
        cause = getattr(e, "cause", None)
        if isinstance(cause, CurateError):
            raise CurateError(str(cause)) from None  # the worker's own one-line error, not Ray's wrapping
        raise


def ray_for(executor: Executor) -> Any:
    """Ray, started (a local instance of ``executor.workers`` CPUs) or joined (``address``) once."""
    try:
        import ray
    except ImportError:
        raise CurateError("--executor ray needs Ray: pip install 'curate[ray]'") from None
    if not ray.is_initialized():
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                              "ignore_reinit_error": True, "configure_logging": False}
        if executor.address:
            ray.init(address=executor.address, **kw)
        else:  # "local": a new instance of our own, never another program's cluster on this machine
            # Ray lowers its workers' priority by default; here they do the work the driver waits on
            os.environ.setdefault("RAY_worker_niceness", "0")
            ray.init(address="local", num_cpus=executor.workers, **kw)
    return ray


def merge_notes(notes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One step's report numbers from its shards: counts add up, tallies merge key by key, lists
    join without repeats, and any other value is kept when every shard agrees (else ``None``: a
    mean, say, cannot be rebuilt from shard means)."""
    notes = [n for n in notes if n]
    if not notes:
        return {}
    out: dict[str, Any] = {}
    for key in dict.fromkeys(k for n in notes for k in n):
        values = [n[key] for n in notes if key in n]
        out[key] = _merge_values(values)
    return out


def _merge_values(values: list[Any]) -> Any:
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return sum(values)
    if all(isinstance(v, dict) for v in values):
        return merge_notes(values)
    if all(isinstance(v, list) for v in values):
        return list(dict.fromkeys(x for v in values for x in v)) if all(
            isinstance(x, (str, int, float, bool, type(None))) for v in values for x in v) else values[0]
    first = values[0]
    return first if all(v == first for v in values) else None
