"""LLM judges: check what cheap rules cannot (Linq-Embed-Mistral, Table 10).

``judge_refute``: for tasks that ask for passages *refuting* the query (counter-arguments,
contradicting evidence...), generators often write a positive that actually supports it. Each
configured judge labels the positive ``support`` / ``refute`` / ``neutral`` against the query
(the task is shown as context, with the instruction to judge only what the passage says); any
``support`` drops the record (``positive-supports``).

``judge_answerable``: each judge says, per candidate and on its own, whether the positive and
every negative give what the task asks for (``yes`` / ``partly`` / ``no``). A positive judged
``no`` drops the record (``positive-not-answering``); a negative judged ``yes`` is a false
negative and goes (``negative-answers``). The same step runs other checks of one candidate at a
time from its recipe entry alone: ``check`` (a name), ``template``, the ``verdicts`` that template
offers, which ``negatives`` it reads (levels; ``[]``: only the positive), ``families`` and the
failing verdicts. ``filters/reasoning.yaml`` asks whether a reasoning record's positive needs the
inference its query calls for, ``filters/instruction.yaml`` whether an instruction record's level-1
negative really breaks the query's instruction; their drops are ``positive-fails-CHECK`` and
``negative-fails-CHECK``, their verdicts ``scores["judges"][CHECK]`` (the positive's) and each
kept negative's ``judges[CHECK]``.

``judge_query``: for queries an LLM wrote for a passage of the user's documents (``generate
--from-corpus``), each judge scores the (query, positive) pair 1-10 for relevance, support and
clarity, as NVIDIA's retrieval data recipe does; a record goes when any judge puts any score
under ``min_score`` (``query-below-threshold``).

Judges fail closed: a judge that gives no valid answer drops what it was judging
(``judge-error``, with the judge's error text), unless ``on_error: keep``. Verdicts go to
``record.scores["judges"]``, a negative's to that negative's ``judges``. ``relabel`` (relabel.py) asks the same judges about mined negatives,
with the helpers here.

A broken judge must not decide the data, so every step counts its calls by server
(``CallLog``) and stops the run with one line, before anything is written, when a server refuses
the credentials (401/403: at the first such answer), when it answered none of its first
``EARLY_CALLS`` calls, or when more than ``FAILED_SHARE`` (half) of its calls failed in the end.
A failed call is one that gave no valid answer after the client's own retries and re-asks.

A judge config is ``null`` (the run's own LLM backend) or a mapping with optional ``name``
(how its verdicts are labelled), ``params`` (request parameters such as temperature, merged
over ``{temperature: 0, max_tokens: 512}``); every other key describes the backend and is
handed to ``ctx.llm_factory`` as it is (no other keys: ``None``, the run's backend).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from curate.core.asyncrun import bounded
from curate.core.errors import CurateError
from curate.core.estimate import Estimate, Pace, most_tokens, plan, prompt_text, sample
from curate.core.params import schema_from_defaults
from curate.filter.base import keep_negatives, merge_params, FilterContext, register
from curate.llm.batch import PENDING
from curate.llm.client import derive_seed
from curate.core.secrets import safe_url
from curate.llm.task import LLMTask
from curate.core.records import Record

# Refutation-style wording in a task instruction. Forms with common other meanings are left out
# on purpose ("denied claim", "rejected application", "over-the-counter", "opposite"): a task
# matched by mistake would be judged as if its positive had to refute the query.
DEFAULT_REFUTE_PATTERN = (
    r"\b(?:"
    r"refut(?:e|es|ed|ing|ation|ations)"
    r"|disprov(?:e|es|ed|en|ing)|disproofs?"
    r"|contradict(?:s|ed|ing|ion|ions|ory)?"
    r"|rebut(?:s|ted|ting|tal|tals)?"
    r"|oppos(?:e|es|ed|ing|ition)"
    r"|den(?:y|ies|ying)"
    r"|disagree(?:s|d|ing|ment|ments)?"
    r"|reject(?:s|ing)?"
    r"|counter[- ]?(?:argument|claim|point|evidence|example|view|position)s?"
    r"|(?:that|which|to|who)\s+counter(?:s|ed)?"
    r")\b"
)

DEFAULT_REQUEST_PARAMS = {"temperature": 0.0, "max_tokens": 512}
JUDGE_KEYS = ("name", "params")  # everything else in a judge config goes to ctx.llm_factory

REFUTE_VERDICTS = ["support", "refute", "neutral"]
ANSWER_VERDICTS = ["yes", "partly", "no"]
QUERY_SCORES = ("relevance", "support", "clarity")
SCORE_RANGE = (1, 10)

FAILED_SHARE = 0.5  # a judge server with more than this share of its calls failed stops the run
EARLY_CALLS = 16  # a server whose first this many calls all failed stops the run without waiting for the rest
AUTH_ERROR = re.compile(r"^(?:http-40[13]\b|AuthenticationError|PermissionDeniedError)")
ERROR_CHARS = 160  # an error's text as logs and messages show it


def verdict_schema(values: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "reason": {"type": "string", "maxLength": 300},
            "verdict": {"type": "string", "enum": list(values)},
        },
        "required": ["reason", "verdict"],
        "additionalProperties": False,
    }


def score_schema(names=QUERY_SCORES) -> dict[str, Any]:
    """A short reason first (so the model reasons before it scores), then one 1-10 int per name."""
    lo, hi = SCORE_RANGE
    scores = {n: {"type": "integer", "minimum": lo, "maximum": hi} for n in names}
    return {
        "type": "object",
        "properties": {"reason": {"type": "string", "maxLength": 300}, **scores},
        "required": ["reason", *names],
        "additionalProperties": False,
    }


COMMON_DEFAULTS: dict[str, Any] = {
    "judges": [None],
    "on_error": "drop",
    "seed": 0,
    "concurrency": 64,  # records in flight; each judge client bounds its own requests too
    "prompt_dirs": [],  # folders searched before the shipped prompts/ for the template
}
REFUTE_DEFAULTS: dict[str, Any] = {
    **COMMON_DEFAULTS,
    "pattern": DEFAULT_REFUTE_PATTERN,
    "template": "judge/refute.j2",
    "drop_on": ["support"],  # add "neutral" to also drop positives that take no side
}
ANSWERABLE_DEFAULTS: dict[str, Any] = {
    **COMMON_DEFAULTS,
    "template": "judge/answerable.j2",
    "families": None,  # null: every family
    "positive_fail": ["no"],  # verdicts that drop the record
    "negative_fail": ["yes"],  # verdicts that drop a negative
    # Another check with the same step (filters/reasoning.yaml, filters/instruction.yaml): its
    # name (scores.judges[check], drop reasons positive-fails-CHECK / negative-fails-CHECK), the
    # verdicts its template offers, and which negatives it reads (levels, 1 hardest; null: all).
    "check": "answerable",
    "verdicts": list(ANSWER_VERDICTS),
    "negatives": None,
}
QUERY_DEFAULTS: dict[str, Any] = {
    **COMMON_DEFAULTS,
    "template": "judge/query.j2",
    "families": None,  # null: every family
    "min_score": 7,  # each of relevance, support and clarity must reach it (NVIDIA's recipe keeps >= 7)
}


@dataclass
class Judge:
    name: str
    backend: dict[str, Any] | None
    params: dict[str, Any]


@dataclass
class Verdict:
    verdict: str | None = None
    reason: str | None = None
    error: str | None = None
    scores: dict[str, int] | None = None  # judge_query's answers; verdict stays None there
    # what the call cost, counted by the step (not part of what the judge said)
    prompt_tokens: int = field(default=0, compare=False)
    completion_tokens: int = field(default=0, compare=False)


def _named(judges, verdicts) -> dict[str, str]:
    """Each judge's verdict by name ("error" where it failed)."""
    return {j.name: (v.verdict if v.error is None else "error") for j, v in zip(judges, verdicts)}


def _failed(judges, verdicts) -> dict[str, str]:
    """The error of each judge that failed, by name."""
    return {j.name: v.error for j, v in zip(judges, verdicts) if v.error is not None}


def short_error(text: Any) -> str:
    """An error's text on one line and at most ``ERROR_CHARS`` long, for logs and messages."""
    text = " ".join(str(text).split())
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 1] + "…"


def server_name(client: Any, judge: Judge) -> str:
    """How people are shown a judge's backend: its URLs with any credentials masked (the API key
    is never part of them), else the judge's name."""
    urls = getattr(getattr(client, "cfg", None), "base_urls", None)
    if urls:
        return ", ".join(safe_url(str(u)) for u in urls)
    return f"judge {judge.name}"


class CallLog:
    """A step's judge calls, counted by server, so that a broken judge stops the run instead of
    deciding the data: every failed call would otherwise turn into a drop (or, in relabel, an
    unjudged negative) and the run would end well with nothing judged.

    ``add`` only counts (it runs inside the calls' tasks); ``collect`` runs the work and checks
    after each result, so the run stops there and the calls still in flight are cancelled with it.
    It also counts the answers' tokens (their cost at ``price``), and, given an ``estimate``
    (``judging_plan``), prints it before the first call and times the calls against it."""

    def __init__(self, step: str, price: float | None = None, estimate: Estimate | None = None):
        self.step = step
        self.calls: Counter[str] = Counter()
        self.failed: Counter[str] = Counter()
        self.first_error: dict[str, str] = {}
        self.stop: CurateError | None = None  # why the run must stop now, once known
        self.tokens: Counter[str] = Counter()  # "prompt" and "completion", over every answer
        self.price = price
        self.pace = Pace(estimate) if estimate is not None else None

    def add(self, judges: list[Judge], clients: list, verdicts: list[Verdict]) -> None:
        """Count one passage's answers, noting a stop for refused credentials or a server that
        has answered none of its first ``EARLY_CALLS`` calls."""
        if self.pace is not None:
            self.pace.answered(len(verdicts), sum(v.prompt_tokens + v.completion_tokens for v in verdicts))
        for judge, client, v in zip(judges, clients, verdicts):
            if v.error == PENDING:  # a batch run's pass: its batch answers it, the next pass counts it
                continue
            server = server_name(client, judge)
            self.calls[server] += 1
            self.tokens.update(prompt=v.prompt_tokens, completion=v.completion_tokens)
            if v.error is None:
                continue
            self.failed[server] += 1
            self.first_error.setdefault(server, short_error(v.error))
            if self.stop is not None:
                continue
            if AUTH_ERROR.match(v.error):
                self.stop = CurateError(f"{self.step}: the judge server {server} refused the request "
                                        f"({short_error(v.error)}); check the API key (--api-key, OPENAI_API_KEY "
                                        f"or the judge's api_key) and what it may use, then run again")
            elif self.failed[server] == self.calls[server] >= EARLY_CALLS:
                self.stop = self._broken(server)

    async def collect(self, targets: list, work, concurrency: int, clients: list = ()) -> dict:
        """``work(target)`` for every target, ``concurrency`` at once, by target: the one loop every
        judging step runs, so each stops at the first stop found and checks the share at the end.
        With ``--batch`` (the ``clients``' plan), the loop is a batch run's pass (``curate.llm.batch``):
        repeated until every call has its answer, the last pass's results and counts are the step's."""
        client = _batched(self.step, clients)
        if client is None:
            return await self._collect(targets, work, concurrency)
        from curate.core.progress import note
        from curate.llm.batch import ask_in_batches

        results: dict = {}
        if self.pace is not None:  # said once, before the first batch (the passes time nothing)
            self.pace.estimate.batch = client.cfg.batch.mode
            self.pace.estimate.announce()

        async def one_pass() -> None:
            self.calls, self.failed, self.tokens = Counter(), Counter(), Counter()  # the last pass's count
            results.clear()
            results.update(await self._collect(targets, work, concurrency, bar=False))

        await ask_in_batches(client, self.step, one_pass, 2 + client.cfg.max_reasks, note)
        return results

    async def _collect(self, targets: list, work, concurrency: int, bar: bool = True) -> dict:
        from curate.core.progress import track

        if self.pace is not None and bar:
            self.pace.estimate.announce()
            self.pace.begin()
        results = {}
        with track(len(targets) if bar and len(targets) > concurrency else 0, self.step) as advance:  # one wave: no bar
            async for target, result in bounded(targets, work, concurrency):
                self.check(done=False)
                results[target] = result
                advance()
        self.check()
        return results

    def check(self, done: bool = True) -> None:
        """Raise the stop found so far; with ``done`` (every call is in) also when a server failed
        more than ``FAILED_SHARE`` of its calls."""
        if self.stop is not None:
            raise self.stop
        for server, n in self.calls.items() if done else ():
            if self.failed[server] > FAILED_SHARE * n:
                raise self._broken(server)

    def _broken(self, server: str) -> CurateError:
        n, bad = self.calls[server], self.failed[server]
        what = (f"answered none of its {n} calls" if bad == n
                else f"failed {bad} of its {n} calls (more than {FAILED_SHARE:.0%})")
        return CurateError(f"{self.step}: the judge server {server} {what}; first error: "
                           f"{self.first_error[server]}. Fix the server (or raise --timeout/--max-retries) "
                           f"and run again")

    def note(self) -> dict[str, Any]:
        """The report's numbers: calls, failed calls, each failing server's first error, the
        answers' tokens (and their cost, with a price) and the estimate made before the calls."""
        from curate.core.progress import token_cost

        tokens = {"prompt": self.tokens["prompt"], "completion": self.tokens["completion"]}
        return {"judge_calls": sum(self.calls.values()), "judge_calls_failed": sum(self.failed.values()),
                "first_errors": list(dict.fromkeys(self.first_error.values())), "tokens": tokens,
                **({"cost": token_cost(sum(tokens.values()), self.price)} if self.price is not None else {}),
                **({"estimate": self.pace.estimate.as_dict()} if self.pace is not None else {})}


def _batched(step: str, clients: list) -> Any:
    """The client when the step's judges ask in batches (its ``cfg.batch``, ``--batch``), else None."""
    from curate.llm.batch import plan_of

    planned = [c for c in clients if plan_of(c) is not None]
    if not planned:
        return None
    if len({id(c) for c in clients}) > 1:
        raise CurateError(f"{step}: --batch sends one server's requests as a batch; this step's judges ask "
                          "several servers (their own base_url): give them one, or run without --batch")
    return planned[0]


def judging_plan(step: str, task: LLMTask[Verdict], judges: list[Judge], asked: list[tuple[Record, str, Any]],
                 in_flight: int, price: float | None) -> Estimate:
    """A judging step's estimate: every judge asked about every (record, passage, extra
    variables) in ``asked``, ``in_flight`` calls at once, prompts rendered for an even sample."""
    prompts = [prompt_text(task.prompt(_variables(rec, passage, extra)).messages)
               for rec, passage, extra in sample(asked)]
    per_text = most_tokens([j.params.get("max_tokens") for j in judges])
    return plan(step, prompts, len(asked) * len(judges), None if per_text is None else per_text * len(asked),
                in_flight, price)


def _merge(step: str, params: dict[str, Any] | None) -> dict[str, Any]:
    p = merge_params(step, params)
    if "on_error" in p and p["on_error"] not in ("drop", "keep"):  # relabel has none: a failure is unjudged
        raise CurateError(f"{step}: on_error must be 'drop' or 'keep', got {p['on_error']!r}")
    if not isinstance(p["concurrency"], int) or p["concurrency"] < 1:
        raise CurateError(f"{step}: concurrency must be a positive integer")
    return p


def parse_judges(step: str, configs: Any) -> list[Judge]:
    if configs is None:
        configs = [None]
    if isinstance(configs, dict):
        configs = [configs]
    if not isinstance(configs, list) or not configs:
        raise CurateError(f"{step}: judges must be a non-empty list of judge configs (null = the run's backend)")
    judges: list[Judge] = []
    seen: Counter[str] = Counter()
    for i, cfg in enumerate(configs):
        if cfg is None:
            cfg = {}
        if not isinstance(cfg, dict):
            raise CurateError(f"{step}: judge {i + 1} must be a mapping or null, got {type(cfg).__name__}")
        backend = {k: v for k, v in cfg.items() if k not in JUDGE_KEYS}
        extra = cfg.get("params") or {}
        if not isinstance(extra, dict):
            raise CurateError(f"{step}: judge {i + 1}: params must be a mapping")
        name = str(cfg.get("name") or backend.get("model") or ("default" if not backend else f"judge{i + 1}"))
        seen[name] += 1
        if seen[name] > 1:
            name = f"{name}#{seen[name]}"
        judges.append(Judge(name=name, backend=backend or None, params={**DEFAULT_REQUEST_PARAMS, **extra}))
    return judges


@contextlib.asynccontextmanager
async def open_clients(step: str, ctx: FilterContext, judges: list[Judge]):
    """One client per judge; judges on the same backend share one (and one embedded server),
    within a step and, when the run keeps a stack (``filter.run``), across its steps."""
    if ctx.llm_factory is None:
        raise CurateError(f"{step} needs an LLM judge, but no LLM backend was configured")
    async with contextlib.AsyncExitStack() as own:
        stack = ctx.stack or own
        opened = ctx.clients if ctx.stack is not None else {}
        clients = []
        for j in judges:
            key = json.dumps(j.backend, sort_keys=True, default=str)
            if key not in opened:
                opened[key] = await stack.enter_async_context(ctx.llm_factory(j.backend))
            clients.append(opened[key])
        yield clients


def parse_verdict(data: dict[str, Any]) -> Verdict:
    return Verdict(verdict=data["verdict"], reason=data.get("reason"))


def parse_scores(data: dict[str, Any]) -> Verdict:
    """Scores checked again here: a backend without guided decoding may not keep to the schema."""
    lo, hi = SCORE_RANGE
    scores = {}
    for name in QUERY_SCORES:
        value = data[name]
        if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
            raise ValueError(f"{name} must be a whole number from {lo} to {hi}, got {value!r}")
        scores[name] = value
    return Verdict(reason=data.get("reason"), scores=scores)


def score_task(template: str, prompt_dirs) -> LLMTask[Verdict]:
    """judge_query's call: the same variables as a verdict, answered with three scores."""
    return LLMTask("query_scores", template, score_schema(), parse_scores,
                   prompt_dirs=tuple(str(d) for d in prompt_dirs or ()))


def verdict_task(template: str, verdicts: list[str], prompt_dirs) -> LLMTask[Verdict]:
    """A judge's call: the template sees the record's task, query and one ``passage``."""
    return LLMTask("verdict", template, verdict_schema(verdicts), parse_verdict,
                   prompt_dirs=tuple(str(d) for d in prompt_dirs or ()))


async def ask(client, judge: Judge, task: LLMTask[Verdict], rec: Record, passage: str, seed: int,
              extra: dict[str, Any] | None = None) -> Verdict:
    """One judge's answer on one passage; ``extra``: more template variables (relabel's positive)."""
    try:
        result = await task.run(client, _variables(rec, passage, extra), seed, params=judge.params)
    except asyncio.CancelledError:
        raise
    except CurateError:
        raise  # the template itself is wrong: the run stops with its one line
    except Exception as e:  # a judge that breaks is an error verdict, never a crash of the run
        scrub = getattr(client, "scrub", None)  # a backend's exception may quote its key
        text = f"{type(e).__name__}: {e}"
        return Verdict(error=(scrub(text) if callable(scrub) else text)[:300])
    verdict = result.value if result.ok else Verdict(error=result.reason)
    verdict.prompt_tokens, verdict.completion_tokens = result.answer.prompt_tokens, result.answer.completion_tokens
    return verdict


def _variables(rec: Record, passage: str, extra: dict[str, Any] | None) -> dict[str, Any]:
    """What a judge's template sees: the record's task and query, and the passage judged."""
    parts = rec.meta.get("query_parts") if isinstance(rec.meta, dict) else None  # e.g. query and instruction
    return {"task": rec.task, "query": rec.query, "passage": passage,
            "query_parts": parts if isinstance(parts, dict) else {}, **(extra or {})}


async def ask_judges(log: CallLog, judges: list[Judge], clients: list, task: LLMTask[Verdict], rec: Record,
                     passage: str, seed_of, extra: dict[str, Any] | None = None) -> list[Verdict]:
    """Every judge's answer on one passage, asked at once (``seed_of(judge)``: each one's seed),
    and counted in ``log``."""
    verdicts = list(await asyncio.gather(*(
        ask(client, judge, task, rec, passage, seed_of(judge), extra) for judge, client in zip(judges, clients))))
    log.add(judges, clients, verdicts)
    return verdicts


async def _judge_positives(step: str, ctx: FilterContext, records: list[Record], targets: list[int],
                           judges: list[Judge], task: LLMTask[Verdict], p: dict[str, Any]) -> dict[int, list[Verdict]]:
    """Every judge's answer on each target record's positive (by record index), concurrently;
    stops the run (before any record is decided) when a judge is broken."""
    asked = [(records[i], records[i].positive, None) for i in targets]
    log = CallLog(step, ctx.price, judging_plan(step, task, judges, asked,
                                                min(p["concurrency"], len(targets)) * len(judges), ctx.price))
    async with open_clients(step, ctx, judges) as clients:
        async def work(i: int) -> list[Verdict]:
            rec = records[i]
            return await ask_judges(log, judges, clients, task, rec, rec.positive,
                                    lambda judge: derive_seed(p["seed"], step, rec.id, judge.name))

        results = await log.collect(targets, work, p["concurrency"], clients)
    ctx.note(**log.note())
    return results


def _family_targets(records: list[Record], families: Any) -> list[int]:
    """Indices of the records to judge: every one for ``families: null``, else those of the families."""
    if isinstance(families, str):
        families = [families]
    return [i for i, rec in enumerate(records) if families is None or rec.task_type in families]


def _judged(records: list[Record], results: dict[int, Any], kept: list[Record]):
    """Each judged record with its result; records no judge looked at go straight to ``kept``."""
    for i, rec in enumerate(records):
        if i in results:
            yield rec, results[i]
        else:
            kept.append(rec)


def _settle(ctx: FilterContext, p: dict[str, Any], rec: Record, failed: dict[str, str],
            drop: tuple[str, dict[str, Any]] | None, shown: dict[str, Any], kept: list[Record]) -> bool:
    """One judged record's fate in judge_refute and judge_query: dropped for a verdict (``drop``: the
    reason and its details), else for a failed judge when ``on_error`` is drop (the errors logged
    beside ``shown``), else kept. Returns whether it was kept despite a failed judge."""
    if drop is not None:
        ctx.reject(rec, *drop)
    elif failed and p["on_error"] == "drop":
        ctx.reject(rec, "judge-error", {**shown, "errors": failed})
    else:
        kept.append(rec)
        return bool(failed)
    return False


def _judges_scores(rec: Record) -> dict[str, Any]:
    if not isinstance(rec.scores, dict):
        rec.scores = {}
    judges = rec.scores.get("judges")
    if not isinstance(judges, dict):
        judges = rec.scores["judges"] = {}
    return judges


# --------------------------------------------------------------------------- judge_refute


def _refute_params(params: dict[str, Any] | None) -> tuple[dict[str, Any], re.Pattern]:
    p = _merge("judge_refute", params)
    try:
        return p, re.compile(p["pattern"], re.IGNORECASE)
    except (re.error, TypeError) as e:
        raise CurateError(f"judge_refute: bad pattern {p['pattern']!r}: {e}") from None


@register("judge_refute", schema_from_defaults("JudgeRefuteParams", REFUTE_DEFAULTS), _refute_params, kind="map")
async def judge_refute(records: list[Record], params: dict[str, Any], ctx: FilterContext) -> list[Record]:
    step = "judge_refute"
    p, rx = _refute_params(params)
    drop_on = set(p["drop_on"] or [])
    targets = [i for i, rec in enumerate(records) if rx.search(rec.task or "")]
    if not targets:
        ctx.note(records_in=len(records), judged=0)
        return records

    judges = parse_judges(step, p["judges"])
    task = verdict_task(p["template"], REFUTE_VERDICTS, [*p["prompt_dirs"], *ctx.prompt_dirs])
    task.check()
    results = await _judge_positives(step, ctx, records, targets, judges, task, p)

    kept: list[Record] = []
    tally: Counter[str] = Counter()
    errors = kept_on_error = 0
    for rec, verdicts in _judged(records, results, kept):
        by_judge = _named(judges, verdicts)
        tally.update(by_judge.values())
        _judges_scores(rec)["refute"] = by_judge
        failed = _failed(judges, verdicts)
        errors += bool(failed)
        drop = None
        if any(v.verdict in drop_on for v in verdicts if v.error is None):
            reasons = {j.name: v.reason for j, v in zip(judges, verdicts) if v.verdict in drop_on}
            drop = ("positive-supports", {"verdicts": by_judge, "reasons": reasons})
        kept_on_error += _settle(ctx, p, rec, failed, drop, {"verdicts": by_judge}, kept)

    ctx.note(records_in=len(records), judged=len(results), judges=[j.name for j in judges],
             verdicts=dict(tally), records_with_judge_errors=errors, kept_despite_errors=kept_on_error)
    return kept


# --------------------------------------------------------------------------- judge_answerable


def _answerable_params(params: dict[str, Any] | None) -> dict[str, Any]:
    p = _merge("judge_answerable", params)
    for key in ("verdicts", "positive_fail", "negative_fail"):  # one name: a list of one
        if isinstance(p[key], str):
            p[key] = [p[key]]
    verdicts = p["verdicts"]
    if (not isinstance(verdicts, list) or not verdicts or len(set(verdicts)) != len(verdicts)
            or not all(isinstance(v, str) and v.strip() for v in verdicts)):
        raise CurateError(f"judge_answerable: verdicts must be a list of distinct names, got {verdicts!r}")
    for key in ("positive_fail", "negative_fail") if p["negatives"] != [] else ("positive_fail",):
        unknown = [v for v in p[key] or [] if v not in verdicts]
        if unknown:
            raise CurateError(f"judge_answerable: {key} names {', '.join(map(str, unknown))}, which is not one of "
                              f"the verdicts ({', '.join(verdicts)})")
    levels = p["negatives"]
    if levels is not None and not (isinstance(levels, list) and all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in levels)):
        raise CurateError(f"judge_answerable: negatives must be null (all) or a list of levels (1 = hardest), "
                          f"got {levels!r}")
    if not isinstance(p["check"], str) or not re.fullmatch(r"[a-z][a-z0-9_-]*", p["check"]):
        raise CurateError(f"judge_answerable: check must be a plain lower-case name, got {p['check']!r}")
    return p


def _judged_negative(neg, index: int, levels: list[int] | None) -> bool:
    """Is this negative one the step reads (its level, else its place, among ``levels``)?"""
    return levels is None or (neg.level if isinstance(neg.level, int) else index + 1) in levels


@register("judge_answerable", schema_from_defaults("JudgeAnswerableParams", ANSWERABLE_DEFAULTS),
          _answerable_params, kind="map")
async def judge_answerable(records: list[Record], params: dict[str, Any], ctx: FilterContext) -> list[Record]:
    step = "judge_answerable"
    p = _answerable_params(params)
    targets = _family_targets(records, p["families"])
    if not targets:
        ctx.note(records_in=len(records), judged=0)
        return records

    positive_fail = set(p["positive_fail"] or [])
    negative_fail = set(p["negative_fail"] or [])
    check, levels = p["check"], p["negatives"]
    pos_reason, neg_reason = (("positive-not-answering", "negative-answers") if check == "answerable"
                              else (f"positive-fails-{check}", f"negative-fails-{check}"))
    judges = parse_judges(step, p["judges"])
    task = verdict_task(p["template"], p["verdicts"], [*p["prompt_dirs"], *ctx.prompt_dirs])
    task.check()
    asked = [(records[i], text, None) for i in targets  # every negative read: at most (a failed positive's are not)
             for text in [records[i].positive, *(n.text for k, n in enumerate(records[i].negatives)
                                                 if _judged_negative(n, k, levels))]]
    log = CallLog(step, ctx.price, judging_plan(step, task, judges, asked,
                                                min(p["concurrency"], len(targets)) * len(judges), ctx.price))

    async with open_clients(step, ctx, judges) as clients:
        async def judge_text(rec: Record, index: int, text: str) -> list[Verdict]:
            return await ask_judges(log, judges, clients, task, rec, text,
                                    lambda judge: derive_seed(p["seed"], step, rec.id, judge.name, index))

        def positive_passes(verdicts: list[Verdict]) -> bool:
            if any(v.verdict in positive_fail for v in verdicts if v.error is None):
                return False
            return not (p["on_error"] == "drop" and any(v.error is not None for v in verdicts))

        async def work(i: int) -> tuple[list[Verdict], list[list[Verdict]] | None]:
            """Verdicts for the positive, then (only if the positive passed) per negative."""
            rec = records[i]
            pos = await judge_text(rec, 0, rec.positive)
            if not positive_passes(pos):
                return pos, None  # the record goes: its negatives need no judging
            negs = await asyncio.gather(*(judge_text(rec, k + 1, n.text) for k, n in enumerate(rec.negatives)
                                          if _judged_negative(n, k, levels)))
            judged = iter(negs)  # aligned with every negative again: None where it was not read
            return pos, [next(judged) if _judged_negative(n, k, levels) else None for k, n in enumerate(rec.negatives)]

        results = await log.collect(targets, work, p["concurrency"], clients)
    ctx.note(**log.note())

    def named(verdicts: list[Verdict]) -> dict[str, str]:
        return _named(judges, verdicts)

    def failed(verdicts: list[Verdict]) -> dict[str, str]:
        return _failed(judges, verdicts)

    kept: list[Record] = []
    tally: Counter[str] = Counter()
    neg_dropped = errors = 0
    for rec, (pos, negs) in _judged(records, results, kept):
        pos_named = named(pos)
        tally.update(f"positive:{v}" for v in pos_named.values())
        scores = {"positive": pos_named}
        _judges_scores(rec)[check] = scores
        if negs is None:
            if any(v.verdict in positive_fail for v in pos if v.error is None):
                ctx.reject(rec, pos_reason,
                           {"verdicts": pos_named,
                            "reasons": {j.name: v.reason for j, v in zip(judges, pos) if v.verdict in positive_fail}})
            else:
                errors += 1
                ctx.reject(rec, "judge-error", {"target": "positive", "verdicts": pos_named, "errors": failed(pos)})
            continue
        errors += bool(failed(pos))
        survivors = []
        for k, (neg, verdicts) in enumerate(zip(rec.negatives, negs)):
            if verdicts is None:  # a level this check does not read
                survivors.append(neg)
                continue
            v_named = named(verdicts)
            tally.update(f"negative:{v}" for v in v_named.values())
            if any(v.verdict in negative_fail for v in verdicts if v.error is None):
                ctx.reject(rec, neg_reason,
                           {"index": k, "verdicts": v_named,
                            "reasons": {j.name: v.reason for j, v in zip(judges, verdicts)
                                        if v.verdict in negative_fail}}, negative=neg)
            elif failed(verdicts) and p["on_error"] == "drop":
                errors += 1
                ctx.reject(rec, "judge-error", {"index": k, "verdicts": v_named, "errors": failed(verdicts)},
                           negative=neg)
            else:
                errors += bool(failed(verdicts))
                survivors.append(neg)
                neg.judges = {**(neg.judges or {}), check: v_named}
                continue
            neg_dropped += 1
        if keep_negatives(rec, survivors, ctx):
            kept.append(rec)

    ctx.note(records_in=len(records), judged=len(results), judges=[j.name for j in judges],
             verdicts=dict(tally), negatives_dropped=neg_dropped, judge_errors=errors)
    return kept


# --------------------------------------------------------------------------- judge_query


def _query_params(params: dict[str, Any] | None) -> dict[str, Any]:
    p = _merge("judge_query", params)
    lo, hi = SCORE_RANGE
    m = p["min_score"]
    if not isinstance(m, int) or isinstance(m, bool) or not lo <= m <= hi:
        raise CurateError(f"judge_query: min_score must be a whole number from {lo} to {hi}, got {m!r}")
    return p


def _scored(judges, verdicts) -> dict[str, Any]:
    """Each judge's scores by name ("error" where it failed)."""
    return {j.name: (dict(v.scores) if v.error is None else "error") for j, v in zip(judges, verdicts)}


@register("judge_query", schema_from_defaults("JudgeQueryParams", QUERY_DEFAULTS), _query_params, kind="map")
async def judge_query(records: list[Record], params: dict[str, Any], ctx: FilterContext) -> list[Record]:
    step = "judge_query"
    p = _query_params(params)
    targets = _family_targets(records, p["families"])
    if not targets:
        ctx.note(records_in=len(records), judged=0)
        return records

    judges = parse_judges(step, p["judges"])
    task = score_task(p["template"], [*p["prompt_dirs"], *ctx.prompt_dirs])
    task.check()
    results = await _judge_positives(step, ctx, records, targets, judges, task, p)

    def below(v: Verdict) -> bool:
        return v.error is None and min(v.scores.values()) < p["min_score"]

    kept: list[Record] = []
    dropped = errors = kept_on_error = 0
    for rec, verdicts in _judged(records, results, kept):
        by_judge = _scored(judges, verdicts)
        _judges_scores(rec)["query"] = by_judge
        failed = _failed(judges, verdicts)
        errors += bool(failed)
        low = [j.name for j, v in zip(judges, verdicts) if below(v)]
        drop = None
        if low:
            dropped += 1
            drop = ("query-below-threshold",
                    {"scores": by_judge, "judges": low, "min_score": p["min_score"],
                     "reasons": {j.name: v.reason for j, v in zip(judges, verdicts) if below(v)}})
        kept_on_error += _settle(ctx, p, rec, failed, drop, {"scores": by_judge}, kept)

    ctx.note(records_in=len(records), judged=len(results), judges=[j.name for j in judges],
             below_threshold=dropped, records_with_judge_errors=errors, kept_despite_errors=kept_on_error)
    return kept
