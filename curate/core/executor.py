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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from curate.core.errors import CurateError

S = TypeVar("S")
R = TypeVar("R")


@dataclass(frozen=True)
class Executor:
    kind: Literal["local", "ray"] = "local"
    workers: int = field(default=1, metadata={"min": 1})  # shards per sharded step
    address: str | None = None  # a Ray cluster to join; None starts a local one

    def __post_init__(self):
        if self.kind not in ("local", "ray"):
            raise CurateError(f"--executor: choose local or ray, got {self.kind!r}")
        if not isinstance(self.workers, int) or self.workers < 1:
            raise CurateError(f"--workers must be at least 1, got {self.workers!r}")

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
    ray = _ray(executor)
    task = ray.remote(_apply)
    fn_ref = ray.put(fn)  # shipped once, shared by every shard's task
    refs = [task.remote(fn_ref, shard) for shard in shards]
    try:
        return ray.get(refs)
    except ray.exceptions.RayTaskError as e:
        cause = e.cause if isinstance(getattr(e, "cause", None), BaseException) else None
        if isinstance(cause, CurateError):
            raise CurateError(str(cause)) from None  # a step's own one-line error, not Ray's wrapping
        raise


def _apply(fn: Callable[[list[S]], R], shard: list[S]) -> R:
    return fn(shard)


def _ray(executor: Executor) -> Any:
    try:
        import ray
    except ImportError:
        raise CurateError("--executor ray needs Ray: pip install 'curate[ray]'") from None
    if not ray.is_initialized():
        kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                              "ignore_reinit_error": True, "configure_logging": False}
        if executor.address:
            ray.init(address=executor.address, **kw)
        else:
            ray.init(num_cpus=executor.workers, **kw)
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
