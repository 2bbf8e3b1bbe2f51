"""Brainstorm task descriptions until enough distinct ones exist.

Each call gets its own seed, temperature (from the spec's schedule) and topic drawn from
the banks, so repeated calls explore different ground. Near-duplicates of tasks already
kept are dropped. Tasks are appended to the family's file as they arrive
(``<out>/tasks/<family>/tasks.jsonl``, the folder of that family's brainstorm run); the file is
what ``generate`` reads, so users can inspect and edit it. Re-running replays earlier calls
from the request cache and continues where the last run stopped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from curate.core.asyncrun import bounded
from curate.core.errors import CurateError
from curate.core.jsonl import JsonlAppender, read_jsonl
from curate.llm.client import LLMClient, derive_seed
from curate.core.progress import RunStats
from curate.core.records import Task, stable_id
from curate.llm.taskspec import TaskSpec



TASKS = "tasks.jsonl"  # a brainstorm run's product, in its folder


def tasks_folder(out_dir: str | Path, family: str) -> Path:
    """The folder of ``family``'s brainstorm run inside the generate folder ``out_dir``."""
    return Path(out_dir) / "tasks" / family


def tasks_path(out_dir: str | Path, family: str) -> Path:
    """The family's task descriptions, which generate in ``out_dir`` reads (and a user may edit)."""
    return tasks_folder(out_dir, family) / TASKS


def load_tasks(path: Path, family: str | None = None) -> list[Task]:
    tasks = []
    for lineno, obj in read_jsonl(path):
        if isinstance(obj, str):
            obj = {"task": obj}
        try:
            task = Task.from_dict(obj)
        except ValueError as e:
            raise CurateError(f"{path}:{lineno}: {e}") from None
        if family and not task.task_type:
            task.task_type = family
            task.id = stable_id(family, task.task)
        tasks.append(task)
    return tasks


def parse_tasks(data: dict[str, Any]) -> list[str]:
    """The answer's task descriptions, whitespace collapsed, blanks dropped."""
    texts = (" ".join(str(t).split()) for t in data["tasks"])
    return [t for t in texts if t]


def fixed_tasks(spec: TaskSpec) -> list[Task]:
    return [Task(id=stable_id(spec.family, t), task_type=spec.family, task=t, meta={"source": "spec"}) for t in spec.fixed_tasks]


async def brainstorm(
    spec: TaskSpec,
    n: int,
    client: LLMClient,
    path: Path,
    seed: int,
    stats: RunStats,
    prompt_dirs: Sequence[str | Path] = (),
    dedup_threshold: float = 0.7,
    progress=None,
) -> list[Task]:
    """Return at least ``n`` distinct tasks when the model can give them (fewer, with a warning, if not),
    appending the new ones to ``path`` (the tasks it holds already count)."""
    if spec.brainstorm is None:
        return fixed_tasks(spec)
    kept: list[Task] = load_tasks(path, spec.family) if path.exists() else []
    from curate.dedup.near_dup import NearDupIndex  # datasketch is slow to import; only brainstorming needs it

    index = NearDupIndex(threshold=dedup_threshold)
    for t in kept:
        index.add_if_new(t.task)
    stats.resumed = len(kept)
    if len(kept) >= n:
        return kept
    from curate.llm.batch import plan_of

    if getattr(plan_of(client), "mode", None) == "vllm":  # the plan the client was opened with
        raise CurateError(f"--batch vllm: brainstorming {spec.family}'s tasks asks a server; run curate brainstorm "
                          "without --batch first, or give --tasks-file or --from-corpus")

    step = spec.brainstorm
    per_call = spec.tasks_per_call
    max_calls = 8 + 4 * math.ceil(n / per_call)
    patience = 6  # calls in a row that add nothing before we accept fewer tasks
    bar = progress.add_task(f"brainstorm {spec.family}", total=n, completed=len(kept)) if progress else None

    task = step.task("tasks", parse_tasks, prompt_dirs)

    def call_plan(call: int) -> dict[str, Any]:
        call_seed = derive_seed("brainstorm", spec.family, seed, call)
        variables = step.variables(call_seed)
        variables.update(n=per_call, task_type=spec.family)
        params = dict(step.params)
        params["temperature"] = spec.brainstorm_temperatures[call % len(spec.brainstorm_temperatures)]
        return {"call": call, "seed": call_seed, "variables": variables, "params": params}

    async def ask(plan: dict[str, Any]):
        return await task.run(client, plan["variables"], plan["seed"], params=plan["params"])

    call, idle = 0, 0
    estimate = _plan(spec, task, client, [call_plan(c) for c in range(min(max_calls, math.ceil((n - len(kept)) / per_call)))],
                     stats.price)
    estimate.announce()
    with JsonlAppender(path) as out:
        while len(kept) < n and call < max_calls and idle < patience:
            wave = min(max_calls - call, max(1, math.ceil((n - len(kept)) / per_call)))
            plans = [call_plan(c) for c in range(call, call + wave)]
            call += wave
            results = {}
            async for plan, result in bounded(plans, ask, limit=wave):
                results[plan["call"]] = (plan, result)
            _stop_if_fatal(spec, client, results.values())
            for c in sorted(results):  # in call order, so the kept set is the same every run
                plan, result = results[c]
                answer = result.answer
                stats.add(result.ok, answer.prompt_tokens, answer.completion_tokens, result.reason, answer.cached)
                added = 0
                for text in result.value if result.ok else []:
                    if len(kept) >= n or not index.add_if_new(text):
                        continue
                    found = Task(
                        id=stable_id(spec.family, text), task_type=spec.family, task=text,
                        meta={"call": c, "seed": plan["seed"], "temperature": plan["params"]["temperature"],
                              "variables": plan["variables"], "model": client.cfg.model,
                              **result.prompt.provenance()},
                    )
                    out.write(found.to_dict())
                    kept.append(found)
                    added += 1
                idle = 0 if added else idle + 1
                if bar is not None:
                    progress.update(bar, completed=len(kept))
    stats.extra["distinct_tasks"] = len(kept)
    stats.extra["brainstorm_calls"] = call
    stats.extra["estimate"] = estimate.as_dict()
    return kept


def _stop_if_fatal(spec: TaskSpec, client: LLMClient, results) -> None:
    """A call that failed for a reason no retry fixes (a refused key, a dead server) ends the run
    with that reason, not with "no usable task" after the rest of the calls failed the same way."""
    for _, result in results:
        if getattr(result.answer, "fatal", False):
            raise CurateError(f"brainstorm {spec.family} stopped: {getattr(client, 'fatal', None) or result.reason}")


def _plan(spec: TaskSpec, task, client, plans: list[dict[str, Any]], price: float | None):
    """The first wave's estimate: its calls go at once, and more follow only when answers
    repeat tasks already kept, so its count is the fewest calls the family needs."""
    from curate.core.estimate import most_tokens, plan, prompt_text

    prompts = [prompt_text(task.prompt(p["variables"]).messages) for p in plans]
    return plan(f"brainstorm {spec.family}", prompts, len(plans), most_tokens(
        [task.request(client, p["params"])[1].get("max_tokens") for p in plans]), len(plans), price)
