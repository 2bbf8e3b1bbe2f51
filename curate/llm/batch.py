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
   follow-up batch; after ``rounds`` batches (each run's own) an item still without an answer fails.

A killed run, or one stopped by the server (gone, 404), finds its batch in ``state.json`` and
polls it again: a batch is never submitted twice, and an answer already downloaded is never asked
for again. A batch that ended without a single answer is never adopted again by its digest.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable

from curate.core.errors import CurateError
from curate.core.jsonl import atomic_write_json, atomic_write_jsonl
from curate.llm.redact import Scrubber

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


@dataclass
class Output:
    """What one output or error file says: answers and failure reasons by ``custom_id``, and the
    lines it could not use (not JSON, or a ``custom_id`` seen before: the first answer stands)."""

    answers: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    bad_lines: list[int] = field(default_factory=list)
    duplicates: list[int] = field(default_factory=list)


def read_output(text: str) -> Output:
    """A batch's output or error file, line by line: a line that is not JSON is skipped (its request
    has no answer, so the next batch asks it again), and a repeated ``custom_id`` keeps its first answer."""
    out = Output()
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            out.bad_lines.append(n)
            continue
        if not isinstance(row, dict):
            out.bad_lines.append(n)
            continue
        key = row.get("custom_id")
        if key in out.answers or key in out.errors:
            out.duplicates.append(n)
            continue
        answer, reason = _line(row)
        if answer is not None:
            out.answers[key] = answer
        else:
            out.errors[key] = reason
    return out


def _line(row: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """(the chat answer, or None and why not) of one output line."""
    response = row.get("response") if isinstance(row.get("response"), dict) else {}
    body = response.get("body")
    if response.get("status_code") == 200 and isinstance(body, dict) and isinstance(body.get("choices"), list):
        return body, ""
    error = row.get("error") or (body if isinstance(body, dict) else {}).get("error") or {}
    if not isinstance(error, dict):
        error = {"message": str(error)}
    return None, str(error.get("code") or error.get("message") or f"http-{response.get('status_code')}")


def inspect_files(folder: Path, record: dict[str, Any], note: Callable[[str], None]) -> dict[str, Any]:
    """The round's record with the lines its downloaded files could not use counted, and a line
    saying so for each file (named, so it can be looked at)."""
    record = dict(record)
    for kind in ("output", "errors"):
        name = record.get(kind)
        if not name or not (folder / name).is_file():
            continue
        got = read_output((folder / name).read_text(encoding="utf-8", errors="replace"))
        if got.bad_lines:
            lines = ", ".join(map(str, got.bad_lines[:5])) + (", ..." if len(got.bad_lines) > 5 else "")
            note(f"batch {record['round']}: {folder / name} line {lines}: not JSON, skipped "
                 f"({len(got.bad_lines)} line(s)); their requests go in the next batch")
        if got.duplicates:
            note(f"batch {record['round']}: {folder / name}: {len(got.duplicates)} repeated custom_id(s), "
                 f"the first answer kept (line {', '.join(map(str, got.duplicates[:5]))})")
        record["bad_lines"] = record.get("bad_lines", 0) + len(got.bad_lines)
        record["duplicates"] = record.get("duplicates", 0) + len(got.duplicates)
    return record


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
                    got = read_output((self.folder / name).read_text(encoding="utf-8", errors="replace"))
                    for key, answer in got.answers.items():  # the first answer stands
                        answers.setdefault(key, answer)
                    errors.update(got.errors)
        return answers, {k: v for k, v in errors.items() if k not in answers}


# a batch runner: (requests file, the round's record, save) -> the record, its batch finished and its
# files beside the requests; ``save(record)`` keeps the record as soon as the batch has an id
Runner = Callable[[Path, dict[str, Any], Callable[[dict[str, Any]], None]], Awaitable[dict[str, Any]]]


async def batch_rounds(folder: Path, run_pass: Callable[[Collector], Awaitable[None]], runner: Runner,
                       rounds: int, note: Callable[[str], None]) -> dict[str, Any]:
    """Passes and batches until a pass collects nothing (or this run sent ``rounds`` batches); the
    batches' numbers for the stage's report. A batch left unfinished by a killed run is polled
    again first. Each run has its own ``rounds``: a re-run (``--retry-failed``) asks again what
    earlier runs' batches left unanswered."""
    store = BatchFolder(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = store.state()

    def keep(i: int) -> Callable[[dict[str, Any]], None]:
        def save(record: dict[str, Any]) -> None:
            state[i] = record
            store.save(state)
        return save

    earlier = len(state)  # batches earlier runs sent (less those this run polls again)
    for i, r in enumerate(state):
        if r.get("status") not in DONE:  # left by a killed run: poll its batch (submit it only if it never was)
            earlier = min(earlier, i)
            if r.get("id"):
                note(f"batch {r['round']} ({r['id']}): polling the batch a killed run left")
            keep(i)(await runner(folder / r["requests"], r, keep(i)))
    while True:
        answers, errors = store.answers()
        collector = Collector(answered=answers, final=len(state) - earlier >= rounds, unanswered=errors)
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
            "failed_lines": sum(r.get("failed", 0) for r in state),
            "bad_lines": sum(r.get("bad_lines", 0) for r in state),
            "duplicate_lines": sum(r.get("duplicates", 0) for r in state), "ids": [r.get("id") for r in state]}


async def ask_in_batches(client: Any, name: str, run_pass: Callable[[], Awaitable[None]], rounds: int,
                         note: Callable[[str], None], was: Path | None = None) -> dict[str, Any]:
    """A stage's (or judge step's) work asked in batches, the one way every caller does it: each
    ``run_pass()`` runs with the client collecting (``client.collecting``), then a batch answers
    what it collected (``batch_rounds``), in the plan's ``folder(name)``; the batches' numbers."""
    plan = client.cfg.batch

    async def one(collector: Collector) -> None:
        with client.collecting(collector):
            await run_pass()

    folder = plan.folder(name, was, note)
    return await batch_rounds(folder, one, runner_for(plan, client.cfg, note), rounds, note)


def api_runner(base_url: str, api_key: str | None, poll_s: float, note: Callable[[str], None],
               retries: int = 5) -> Runner:
    """Submit to an OpenAI-compatible files + batches API, poll to the end, download the files.
    ``retries``: the client's retries of one call (a refused connection, a 5xx) before the run stops."""
    import openai

    from curate.llm.urls import split_query

    base, query = split_query(base_url)
    client = openai.AsyncOpenAI(base_url=base, default_query=query or None, api_key=api_key or "no-key",
                                max_retries=retries)
    server = ServerErrors(base_url, Scrubber.for_config(api_key, [base_url]))

    async def run(path: Path, record: dict[str, Any], save: Callable[[dict], None]) -> dict[str, Any]:
        record, folder = dict(record), path.parent
        if not record.get("id"):
            async with server.calling(record, folder):
                record = await _submit(client, path, record)
            save(record)  # before the first poll: a killed run polls this batch, never submits again
        async with server.calling(record, folder):
            batch = await _poll(client, record, poll_s, note)
            for kind, file_id in (("output", batch.output_file_id), ("errors", batch.error_file_id)):
                if file_id:
                    record[kind] = await _download(client, file_id, folder / f"{kind}-{record['round']}.jsonl")
        counts = batch.request_counts
        record.update(status=batch.status, failed=counts.failed if counts else 0)
        return inspect_files(folder, record, note)

    return run


async def _submit(client: Any, path: Path, record: dict[str, Any]) -> dict[str, Any]:
    """The record with the id of the batch that answers ``path``: one created by a run killed before
    it saved the id (found by the file's digest), else a new one."""
    digest = file_digest(path)
    batch = await _submitted(client, digest)
    if batch is None:
        with open(path, "rb") as fh:
            uploaded = await client.files.create(file=(path.name, fh), purpose="batch")
        batch = await client.batches.create(input_file_id=uploaded.id, endpoint=CHAT, completion_window="24h",
                                            metadata={"curate_requests": digest})
    return {**record, "id": batch.id, "input_file": batch.input_file_id, "status": batch.status,
            "submitted": time.time()}


async def _poll(client: Any, record: dict[str, Any], poll_s: float, note: Callable[[str], None]) -> Any:
    """The batch once it reached a last state; a line each time its state changes, not every poll."""
    started, last = time.monotonic(), None
    while True:
        batch = await client.batches.retrieve(record["id"])
        counts = batch.request_counts
        if batch.status != last:
            note(f"batch {record['round']} ({batch.id}): {batch.status}"
                 + (f", {counts.completed} of {counts.total} answered" if counts else "")
                 + (f", {counts.failed} failed" if counts and counts.failed else "")
                 + f", {time.monotonic() - started:.0f} s")
            last = batch.status
        if batch.status in DONE:
            return batch
        await asyncio.sleep(poll_s)


async def _download(client: Any, file_id: str, dest: Path) -> str:
    """Fetch a file whole or not at all (a killed download is fetched again); its name in the folder."""
    content = await client.files.content(file_id)
    part = dest.with_name(f".{dest.name}.part")
    part.write_bytes(content.read())
    part.replace(dest)
    return dest.name


@dataclass
class ServerErrors:
    """Turns what the batches server (or the way to it) did wrong into one line: the URL masked,
    the server's text scrubbed of the key, and where the batch's id is kept when it has one."""

    base_url: str
    scrub: Scrubber

    @contextlib.asynccontextmanager
    async def calling(self, record: dict[str, Any], folder: Path):
        import openai

        try:
            yield
        except openai.APIStatusError as e:
            raise CurateError(self._status(e, record) + self._resume(record, folder)) from None
        except openai.APIConnectionError as e:  # openai's timeout is one too
            why = _one_line(self.scrub(str(e.__cause__ or e) or type(e).__name__))
            raise CurateError(f"--batch api: cannot reach the server at {self.url} ({why})"
                              + self._resume(record, folder)) from None

    @property
    def url(self) -> str:
        from curate.core.secrets import safe_url

        return safe_url(self.base_url)

    def _status(self, e: Any, record: dict[str, Any]) -> str:
        text = _one_line(self.scrub(_server_text(e)))
        code = e.status_code
        if code in (401, 403):
            return (f"--batch api: the server refused the key (HTTP {code}) at {self.url}: {text}; "
                    "check --api-key (or OPENAI_API_KEY)")
        if code == 404 and record.get("id"):
            return (f"--batch api: the server at {self.url} does not know batch {record['id']} (HTTP 404: {text}); "
                    "if it lost the batch for good, remove that round from the state file to submit it again")
        if code in (404, 405):
            return (f"--batch api: the server at {self.url} has no files and batches endpoints (HTTP {code}: {text}); "
                    "give a server that takes batches, or run without --batch")
        return f"--batch api: the server at {self.url} answered HTTP {code}: {text}"

    @staticmethod
    def _resume(record: dict[str, Any], folder: Path) -> str:
        if not record.get("id"):
            return ""
        return (f"; batch {record['round']} ({record['id']}) is kept in {folder / STATE}: run the same command "
                "again to poll it")


def _server_text(e: Any) -> str:
    """The server's own error message, without openai's ``Error code: N - {...}`` wrapping."""
    body = getattr(e, "body", None)
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return body["message"]
    return str(getattr(e, "message", None) or e)


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class BatchPlan:
    """How a run's requests travel in batches (``--batch``): ``mode`` api or vllm, the seconds
    between polls, for vllm the model it loads (a name, folder or GGUF file; None: bundled), and
    ``home``, the run folder's ``batch/``. The client's configuration carries it
    (``ClientConfig.batch``), built once where the client's configuration is
    (``curate.llm.backend.llm_backend``), so every stage and judge step reads the same plan."""

    mode: str
    poll_s: float = 30.0
    model: str | None = None
    home: Path = Path("batch")
    cache_dir: Path | None = None  # the request cache's folder: judge steps kept their batches there before

    @classmethod
    def of(cls, llm: Any, out_dir: Path, cache_dir: Path | None = None) -> "BatchPlan | None":
        """The plan ``--batch`` asks for (None: online), its folders in ``OUT/batch``."""
        if not llm.batch:
            return None
        return cls(llm.batch, llm.batch_poll, llm.model_path or llm.model, Path(out_dir) / "batch", cache_dir)

    def folder(self, name: str, was: Path | None = None, note: Callable[[str], None] = lambda line: None) -> Path:
        """``home/NAME``: the batches of one stage (``generate``) or judge step (its name), one
        layout for all. Where an earlier release kept them (``was``: generate's ``OUT/batch``
        itself; a judge step's ``CACHE_DIR/batch/STEP``), they are moved here first, so an old
        run resumes its batches."""
        new = self.home / name
        if (new / STATE).is_file():
            return new
        for old in (was, self.cache_dir / "batch" / name if self.cache_dir else None):
            if old is not None and old != new and (old / STATE).is_file():
                _move_files(old, new)
                note(f"batch: {old} moved to {new}")
                break
        return new


def _move_files(old: Path, new: Path) -> None:
    """The files of a batch folder (not its sub-folders: other steps' batches) into ``new``."""
    import shutil

    new.mkdir(parents=True, exist_ok=True)
    for path in sorted(old.iterdir()):
        if path.is_file() and path.name != STATE:
            shutil.move(str(path), new / path.name)
    shutil.move(str(old / STATE), new / STATE)  # last: a move cut short is finished by the next run


def plan_of(client: Any) -> BatchPlan | None:
    """The plan a client was opened with (``cfg.batch``): None for one that asks online, and for
    a plugin backend that keeps no ``cfg`` (``open_backend`` gives ``--batch`` none of those)."""
    return getattr(getattr(client, "cfg", None), "batch", None)


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
        errors = read_output(out.read_text(encoding="utf-8", errors="replace")).errors
        note(f"batch {k}: answered in {time.monotonic() - started:.0f} s, {len(errors)} failed")
        return inspect_files(out.parent, {**record, "id": f"vllm-{k}", "status": "completed", "output": out.name,
                                          "failed": len(errors)}, note)

    return run


def file_digest(path: Path) -> str:
    """The requests file's content hash: the batch's ``metadata`` carries it, so a batch created by a
    run killed before it saved the id is found again instead of created twice."""
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()[:32]


async def _submitted(client: Any, digest: str, look: int = 100) -> Any:
    """The latest of the server's last ``look`` batches made from these very requests that may still
    answer them: a batch that ended without a single answer is dead, and adopting it again would
    fail the same requests in every round and every re-run."""
    seen = 0
    async for batch in client.batches.list(limit=look):
        if (batch.metadata or {}).get("curate_requests") == digest and not dead(batch):
            return batch
        seen += 1
        if seen >= look:
            break
    return None


def dead(batch: Any) -> bool:
    """Whether a batch ended without answers: failed or cancelled, or over (expired, completed)
    with no line answered."""
    if batch.status in ("failed", "cancelled"):
        return True
    counts = batch.request_counts
    return batch.status in DONE and (counts is None or not counts.completed)


def runner_for(plan: BatchPlan, cfg: Any, note: Callable[[str], None]) -> Runner:
    """The runner ``--batch`` names: ``api``, the files and batches endpoints of the first
    ``--base-url`` server; ``vllm``, vLLM's offline runner here."""
    if plan.mode == "api":
        return api_runner(cfg.base_urls[0], cfg.api_key, plan.poll_s, note, retries=cfg.max_retries)
    if plan.mode == "vllm":
        return vllm_runner(plan.model, note)
    raise CurateError(f"--batch {plan.mode}: not a batch runner (api, vllm)")
