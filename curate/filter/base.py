"""What every filter step shares: the context it runs in and the record of what it dropped.

A step is a function ``step(records, params, ctx) -> records`` (or an ``async`` one): it
returns the records it keeps, possibly with negatives pruned, and reports every drop
through ``ctx.reject`` so ``rejected.jsonl`` says which step dropped what, and why.
Steps register themselves with ``@register("name", Params, kind=...)`` so recipes can name them:
one ``Step`` in the ``STEPS`` registry, which finds the shipped ones by importing every module of
``curate.filter.steps`` and a plugin's through the ``curate.filter_steps`` entry-point group. The
parameters dataclass is the one home of the step's defaults, and a recipe's parameters are
checked against it (and by the step's own ``check``) when the recipe is loaded, before any
step runs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from curate.core.records import Record
from curate.core.registry import Registry
from curate.core.runner import Drop

StepFn = Callable[..., Any]
StepKind = Literal["map", "global"]


@dataclass(frozen=True)
class Step:
    """A filter step as recipes know it.

    ``kind="map"`` declares that the step decides each record on its own (heuristics, LLM
    judges), so a run may cut the records into shards and run it on several workers
    (``--executor ray``); its integer notes must be counts, which add up over shards.
    ``"global"`` steps see every record at once (near-duplicates, teacher ranks against the
    pool) and always run in one process."""

    fn: StepFn  # step(records, params, ctx) -> kept records (or an awaitable of them)
    params: type  # its parameters dataclass: names, types, ranges and defaults
    check: Callable[[dict[str, Any]], Any] | None = None  # deeper value checks, run at recipe load
    kind: StepKind = "global"
    # what the step cannot run without, said before any step runs (None: it needs no corpus); the
    # text is the one line a run without ``--corpus`` stops with
    needs_corpus: str | None = None

    def __post_init__(self):
        if self.kind not in ("map", "global"):
            raise ValueError(f"kind must be 'map' or 'global', not {self.kind!r}")


STEPS: Registry[Step] = Registry("filter step", "curate.filter_steps", builtin=("curate.filter.steps",))


def register(name: str, params: type, check: Callable[[dict[str, Any]], Any] | None = None,
             kind: StepKind = "global", needs_corpus: str | None = None) -> Callable[[StepFn], StepFn]:
    """Make the decorated function the step recipes call ``name``; ``params`` is its parameters
    dataclass, ``check`` an optional deeper check of a recipe's values, ``kind`` and
    ``needs_corpus`` as ``Step`` says. The function itself is returned unchanged."""
    if kind not in ("map", "global"):
        raise ValueError(f"step {name!r}: kind must be 'map' or 'global', not {kind!r}")

    def deco(fn: StepFn) -> StepFn:
        STEPS.register(name, Step(fn, params, check, kind, needs_corpus))
        return fn

    return deco


@dataclass
class FilterContext:
    """Shared services for steps: the teacher, the LLM client factory, and the drop log."""

    out_dir: Path
    teacher_factory: Callable[[], Any] | None = None  # builds curate.embed.teacher.Teacher lazily
    llm_factory: Callable[[], Any] | None = None  # an async context manager yielding an LLMClient
    corpus: list[str] = field(default_factory=list)  # extra real documents for teacher ranking
    rejections: list[Drop] = field(default_factory=list)  # in the order the steps made them
    step_name: str = ""
    notes: dict[str, dict[str, Any]] = field(default_factory=dict)  # per-step numbers for the report
    clients: dict[str, Any] = field(default_factory=dict)  # LLM clients opened this run, by backend
    stack: Any = None  # the run's AsyncExitStack: clients stay open until the last step is done
    executor: Any = None  # the run's Executor: a global step may run in stages on it (minhash)
    prompt_dirs: tuple[str, ...] = ()  # --prompts-dir: searched after a judge's own prompt_dirs
    price: float | None = None  # of 1,000 tokens at the judges' servers: their estimates and notes show cost
    _teacher: Any = None

    @property
    def teacher(self):
        if self._teacher is None:
            if self.teacher_factory is None:
                raise RuntimeError("this recipe needs a teacher model but none was configured")
            self._teacher = self.teacher_factory()
        return self._teacher

    @property
    def made_teacher(self):
        """The teacher if a step asked for one, else None: the report and the clean-up after the
        steps read it without loading a model no step used."""
        return self._teacher

    def reject(self, record: Record | str, reason: str, numbers: dict[str, Any] | None = None,
               negative=None) -> None:
        """Log a drop: the whole record, or one of its negatives when ``negative`` is given."""
        rid = record if isinstance(record, str) else record.id
        self.rejections.append(Drop(
            id=rid, stage="filter", reason=reason, step=self.step_name, detail=numbers or {},
            level=getattr(negative, "level", None) if negative is not None else None,
            text=getattr(negative, "text", None) if negative is not None else None,
        ))

    def note(self, **numbers: Any) -> None:
        """Extra numbers for this step's section of the report (e.g. mean similarity per level)."""
        self.notes.setdefault(self.step_name, {}).update(numbers)

    def reasons(self, step: str) -> Counter:
        return Counter(r.reason for r in self.rejections if r.step == step)


# Drop reasons renamed so that they say what they mean (old name: new name); a report written
# under an old name is read with the new one.
RENAMED_REASONS = {"query-copied": "query-word-for-word-in-document",
                   "query-copies-positive": "query-mostly-from-positive"}


def reason_name(reason: str) -> str:
    """A drop reason by its current name (an old run's report may carry a renamed one)."""
    return RENAMED_REASONS.get(reason, reason)


def keep_negatives(rec: Record, survivors: list, ctx: FilterContext, drop_empty: bool = True) -> bool:
    """Prune ``rec`` to ``survivors`` (a subset of its negatives, in order); a record left with none is dropped as ``no-negatives-left``.

    Returns whether the record stays. Every step that removes negatives goes through here, so
    the rule for an emptied record lives in one place.
    """
    if len(survivors) == len(rec.negatives):
        return True
    if not survivors and drop_empty:
        ctx.reject(rec, "no-negatives-left", {"negatives_before": len(rec.negatives)})
        return False
    ids = {id(n) for n in survivors}
    rec.keep_negatives([i for i, n in enumerate(rec.negatives) if id(n) in ids])
    return True


def merge_params(step: str, params: dict[str, Any] | None) -> dict[str, Any]:
    """The registered step's defaults overridden by the recipe, checked against its parameters
    dataclass (an unknown name is a one-line error), as a plain mapping."""
    from curate.core.params import as_dict, check_params

    return as_dict(check_params(step, STEPS.get(step).params, params))
