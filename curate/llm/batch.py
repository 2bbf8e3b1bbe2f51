"""Batch generation: a stage's requests sent as one file, answered within hours at a batch price.

OpenAI's Batch API (and the providers that copy it) takes a JSONL file of requests, one per
line with a ``custom_id``, and answers each line within a day at about half the online price;
vLLM reads the same file offline (``run_batch``), with no HTTP server in the way. curate keeps
every request's answer in its request cache under the request's key, so a batch run needs no
second way of parsing or checking answers:

1. a *collecting* pass runs the stage as usual, but a request with no answer yet is written down
   (key -> body) instead of being sent, and its item is left for later (``PENDING``);
2. the collected requests go out as one batch (its id saved in ``state.json`` at once), are polled
   to the end, and the answers are kept in the run folder (``output-K.jsonl``);
3. the next pass reads those answers where it would have sent the request: parsing, schema
   checks and the records are the online path's, so the same answers give the same records. An
   answer that fails its schema makes the item ask again, which the next pass collects into a
   follow-up batch; after ``rounds`` batches an item still without an answer fails.

A killed run finds its batch in ``state.json`` and polls it again: a batch is never submitted
twice, and an answer already downloaded is never asked for again.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

from curate.core.errors import CurateError
from curate.core.jsonl import atomic_write_json, atomic_write_jsonl

PENDING = "pending: asked in a batch"  # an item whose request waits for the next batch
STATE = "state.json"
DONE = ("completed", "expired", "failed", "cancelled")  # a batch's last states
CHAT = "/v1/chat/completions"


@dataclass
class Collector:
    """What a collecting pass needs from the client: answers already delivered (by key) and the
    requests that still need one. ``final``: the last pass, where a missing answer is a failure."""

    answered: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    final: bool = False
    unanswered: dict[str, str] = field(default_factory=dict)  # key -> why its batch gave no answer

    def missing(self, key: str, body: dict[str, Any]) -> str:
        """The reason an answer is not there yet: pending (and collected), or on the last pass why not."""
        if self.final:
            return f"batch gave no answer: {self.unanswered.get(key, 'not answered in any batch')}"
        self.requests[key] = body
        return PENDING


def request_line(key: str, body: dict[str, Any]) -> dict[str, Any]:
    """One line of the batch input file: the request's cache key is its ``custom_id``."""
    return {"custom_id": key, "method": "POST", "url": CHAT, "body": body}


def read_output(text: str) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """(answers by custom_id, reasons by custom_id) from a batch's output or error file."""
    answers, errors = {}, {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise CurateError(f"batch output line {n}: not JSON") from None
        key, response = row.get("custom_id"), row.get("response") or {}
        body = response.get("body")
        if response.get("status_code") == 200 and isinstance(body, dict) and isinstance(body.get("choices"), list):
            answers[key] = body
        else:
            error = row.get("error") or (body or {}).get("error") or {}
            errors[key] = str(error.get("code") or error.get("message") or f"http-{response.get('status_code')}")
    return answers, errors


@dataclass
class BatchFolder:
    """The run folder's record of its batches (``state.json``) and their files."""

    folder: Path

    def state(self) -> list[dict[str, Any]]:
        path = self.folder / STATE
        return json.loads(path.read_text(encoding="utf-8"))["rounds"] if path.is_file() else []

    def save(self, rounds: list[dict[str, Any]]) -> None:
        atomic_write_json(self.folder / STATE, {"rounds": rounds})

    def answers(self) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
        """Every answer the finished batches gave, and why the others gave none."""
        answers: dict[str, dict[str, Any]] = {}
        errors: dict[str, str] = {}
        for r in self.state():
            for name in (r.get("output"), r.get("errors")):
                if name and (self.folder / name).is_file():
                    got, bad = read_output((self.folder / name).read_text(encoding="utf-8"))
                    answers.update(got)
                    errors.update(bad)
        return answers, {k: v for k, v in errors.items() if k not in answers}


# a batch runner: (requests file, the round's record, save) -> the record, its batch finished and its
# files beside the requests; ``save(record)`` keeps the record as soon as the batch has an id
Runner = Callable[[Path, dict[str, Any], Callable[[dict[str, Any]], None]], Awaitable[dict[str, Any]]]


async def batch_rounds(folder: Path, run_pass: Callable[[Collector], Awaitable[None]], runner: Runner,
                       rounds: int, note: Callable[[str], None]) -> dict[str, Any]:
    """Passes and batches until a pass collects nothing (or ``rounds`` batches were sent); the
    batches' numbers for the stage's report. A batch left unfinished by a killed run is polled
    again first."""
    store = BatchFolder(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = store.state()

    def keep(i: int) -> Callable[[dict[str, Any]], None]:
        def save(record: dict[str, Any]) -> None:
            state[i] = record
            store.save(state)
        return save

    for i, r in enumerate(state):
        if r.get("status") not in DONE:  # left by a killed run: poll its batch (submit it only if it never was)
            if r.get("id"):
                note(f"batch {r['round']} ({r['id']}): polling the batch a killed run left")
            keep(i)(await runner(folder / r["requests"], r, keep(i)))
    while True:
        answers, errors = store.answers()
        collector = Collector(answered=answers, final=len(state) >= rounds, unanswered=errors)
        await run_pass(collector)
        if not collector.requests:
            break
        k = len(state) + 1
        name = f"requests-{k}.jsonl"
        atomic_write_jsonl(folder / name, (request_line(key, body) for key, body in collector.requests.items()))
        note(f"batch {k}: {len(collector.requests)} requests in {folder / name}")
        state.append({"round": k, "requests": name, "count": len(collector.requests), "status": "new"})
        store.save(state)
        keep(k - 1)(await runner(folder / name, state[-1], keep(k - 1)))
    return {"batches": len(state), "requests": sum(r["count"] for r in state),
            "failed_lines": sum(r.get("failed", 0) for r in state), "ids": [r.get("id") for r in state]}


def api_runner(base_url: str, api_key: str | None, poll_s: float, note: Callable[[str], None]) -> Runner:
    """Submit to an OpenAI-compatible files + batches API, poll to the end, download the files."""
    import openai

    from curate.llm.urls import split_query

    base, query = split_query(base_url)
    client = openai.AsyncOpenAI(base_url=base, default_query=query or None, api_key=api_key or "no-key",
                                max_retries=5)

    async def run(path: Path, record: dict[str, Any], save: Callable[[dict], None]) -> dict[str, Any]:
        record, folder = dict(record), path.parent
        if not record.get("id"):
            digest = file_digest(path)
            batch = await _submitted(client, digest)  # a run killed between creating it and saving its id
            if batch is None:
                with open(path, "rb") as fh:
                    uploaded = await client.files.create(file=(path.name, fh), purpose="batch")
                batch = await client.batches.create(input_file_id=uploaded.id, endpoint=CHAT, completion_window="24h",
                                                    metadata={"curate_requests": digest})
            record.update(id=batch.id, input_file=batch.input_file_id, status=batch.status, submitted=time.time())
            save(record)  # before the first poll: a killed run polls this batch, never submits again
        started, last = time.monotonic(), None
        while True:
            batch = await client.batches.retrieve(record["id"])
            counts = batch.request_counts
            line = (f"batch {record['round']} ({batch.id}): {batch.status}"
                    + (f", {counts.completed + counts.failed} of {counts.total} answered" if counts else "")
                    + f", {time.monotonic() - started:.0f} s")
            if batch.status != last:  # a line as the state changes, not every poll
                note(line)
                last = batch.status
            if batch.status in DONE:
                break
            await asyncio.sleep(poll_s)
        for kind, file_id in (("output", batch.output_file_id), ("errors", batch.error_file_id)):
            if file_id:
                content = await client.files.content(file_id)
                name = f"{kind}-{record['round']}.jsonl"
                part = folder / f".{name}.part"  # whole or not at all: a killed download is fetched again
                part.write_bytes(content.read())
                part.replace(folder / name)
                record[kind] = name
        record.update(status=batch.status, failed=counts.failed if counts else 0)
        return record

    return run


@dataclass(frozen=True)
class BatchPlan:
    """How a stage's requests travel in batches (``--batch``): ``mode`` api or vllm, the seconds
    between polls, and for vllm the model it loads (a name, folder or GGUF file; None: bundled)."""

    mode: str
    poll_s: float = 30.0
    model: str | None = None

    @classmethod
    def of(cls, llm: Any) -> "BatchPlan | None":
        return cls(llm.batch, llm.batch_poll, llm.model_path or llm.model) if llm.batch else None


OFFLINE_URL = "http://vllm-offline.invalid/v1"  # --batch vllm: no server; nothing is ever sent to it


def vllm_model(model: str | None) -> tuple[Any, str, str]:
    """(vLLM's runtime, what it loads, the name the requests carry) for ``--batch vllm``."""
    from curate.llm.serve import find_runtime, hf_folder

    runtime = find_runtime()
    return (runtime, *hf_folder(model, runtime))


def vllm_runner(model: str | None, note: Callable[[str], None]) -> Runner:
    """vLLM's offline batch runner (``run_batch``) on this machine: the same requests file in, the
    same output lines out as the API's, with no server in the way. A killed run runs it again."""
    from curate.llm.serve import vllm_command

    runtime, load, name = vllm_model(model)

    async def run(path: Path, record: dict[str, Any], save: Callable[[dict], None]) -> dict[str, Any]:
        k = record["round"]
        out, log = path.with_name(f"output-{k}.jsonl"), path.with_name(f"vllm-{k}.log")
        part = out.with_name(f".{out.name}.part")
        cmd = vllm_command(runtime, load, name, 0, 256, 1, None, (), batch=(str(path), str(part)))
        note(f"batch {k}: vLLM's offline runner ({runtime.build}) on {record['count']} requests, log {log}")
        started = time.monotonic()
        with open(log, "wb") as fh:
            proc = await asyncio.create_subprocess_exec(*cmd, stdout=fh, stderr=asyncio.subprocess.STDOUT)
            try:
                code = await proc.wait()
            except asyncio.CancelledError:
                proc.kill()
                raise
        if code != 0 or not part.is_file():
            tail = (log.read_text(encoding="utf-8", errors="replace").strip().splitlines() or ["no output"])[-1]
            raise CurateError(f"vLLM's batch runner failed (exit {code}): {tail[:300]} (log: {log})")
        part.replace(out)
        _, errors = read_output(out.read_text(encoding="utf-8"))
        note(f"batch {k}: answered in {time.monotonic() - started:.0f} s, {len(errors)} failed")
        return {**record, "id": f"vllm-{k}", "status": "completed", "output": out.name, "failed": len(errors)}

    return run


def file_digest(path: Path) -> str:
    """The requests file's content hash: the batch's ``metadata`` carries it, so a batch created by a
    run killed before it saved the id is found again instead of created twice."""
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()[:32]


async def _submitted(client: Any, digest: str, look: int = 100) -> Any:
    """The latest of the server's last ``look`` batches made from these very requests, unless it
    failed or was cancelled (then they go out again)."""
    seen = 0
    async for batch in client.batches.list(limit=look):
        if (batch.metadata or {}).get("curate_requests") == digest and batch.status not in ("failed", "cancelled"):
            return batch
        seen += 1
        if seen >= look:
            break
    return None


def runner_for(plan: BatchPlan, cfg: Any, note: Callable[[str], None]) -> Runner:
    """The runner ``--batch`` names: ``api``, the files and batches endpoints of the first
    ``--base-url`` server; ``vllm``, vLLM's offline runner here."""
    if plan.mode == "api":
        return api_runner(cfg.base_urls[0], cfg.api_key, plan.poll_s, note)
    if plan.mode == "vllm":
        return vllm_runner(plan.model, note)
    raise CurateError(f"--batch {plan.mode}: not a batch runner (api, vllm)")
