"""One LLM client for every backend: the embedded server, vLLM, or any OpenAI-compatible API.

It asks for JSON that follows a schema and only returns answers that parse and validate.
Two kinds of failure are handled separately:

* transport faults (429, 5xx, timeouts, dropped connections) are retried with exponential
  backoff and full jitter, honouring ``Retry-After``;
* content faults (not JSON, fails the schema, a blank string, cut off by
  ``finish_reason=length``) are asked again with a new seed, a bounded number of times.

A reply that is not an OpenAI-shaped response at all (an empty body, a proxy's HTML page)
counts as a transport fault, and ``timeout`` bounds the whole request, not each read, so a
server that trickles bytes cannot hold a request open.

Some failures no retry can fix, and they hold for every request of the run: a refused key
(401, 403), a model or path the server does not have (404), a host name that does not resolve,
a server whose first request got no reply in all its attempts (``FirstContact``). Such a
failure is not retried; its answer is marked ``fatal`` and the client remembers it
(``LLMClient.fatal``, one line with the URL masked) and sends nothing more, so a caller stops
its queue instead of failing every item the same way.

Whatever happens, the caller gets an ``Answer``: either data, or a reason it failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import email.utils
import json
import random
import socket
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
import jsonschema
import openai

from curate.llm.batch import BatchPlan, Collector
from curate.llm.cache import RequestCache, request_key
from curate.llm.limiter import OVERLOAD_STATUS, AdaptiveLimit, FirstContact
from curate.core.secrets import safe_url
from curate.llm.redact import Scrubber
from curate.llm.urls import split_query

SEED_MODULUS = 2**31 - 1
RETRYABLE_STATUS = {408, 409, 425, 429}
# statuses that say the same for every request of the run: what the user must fix
FATAL_STATUS = {401: "the server refused the key", 403: "the server refused the key",
                404: "the server has no such model or path"}
FATAL_HINT = {401: "check --api-key or OPENAI_API_KEY", 403: "check --api-key or OPENAI_API_KEY and what it may use",
              404: "check --model and --base-url"}
# [requests sent, answers read from the cache] of the work running in this context: a caller that
# shares one client between several kinds of work (generate's families) sets a list per task
TALLY: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("curate_llm_tally", default=None)


@dataclass
class ClientConfig:
    base_urls: list[str]
    model: str
    api_key: str | None = None
    concurrency: int = 256  # per base URL: enough to keep a vLLM server's batch full
    adaptive: bool = True  # below ``concurrency``, follow each server's latency; False: a server of known slots
    timeout: float = 600.0
    max_retries: int = 6  # transport retries per request
    max_reasks: int = 2  # new asks after a content fault
    backoff_base: float = 1.0
    backoff_max: float = 60.0
    # --batch: how the requests travel (curate.llm.batch.BatchPlan); None: each is sent as it comes.
    # Declared here so every way of opening a client carries it; ``LLMClient.collecting`` acts on it
    batch: BatchPlan | None = None


@dataclass
class Answer:
    data: Any = None
    raw: str | None = None
    reason: str | None = None  # None when the answer is good
    attempts: int = 0  # HTTP requests sent (cache hits count as requests that were once sent)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency: float = 0.0
    cached: bool = False
    sent: bool = False  # at least one request went to the server (not every answer from the cache)
    fatal: bool = False  # failed for a reason no retry fixes for any request (LLMClient.fatal says it)
    history: list[str] = field(default_factory=list)  # one short note per failed attempt

    @property
    def ok(self) -> bool:
        return self.reason is None


class _Endpoint:
    def __init__(self, base_url: str, cfg: ClientConfig):
        self.base_url = base_url
        self.inflight = 0
        self.cooldown_until = 0.0  # after a transport fault, other servers are preferred until then
        # requests in flight adapt to the server's latency, up to cfg.concurrency (curate.llm.limiter)
        self.limiter = AdaptiveLimit(cfg.concurrency, floor=1 if cfg.adaptive else cfg.concurrency)
        self.contact = FirstContact()  # one request at a time until the server has replied once
        # the query goes with every request, after the path the SDK joins to the base URL (given
        # whole, ``/v1?key=K`` became ``/v1/?key=Kchat/completions``)
        base, query = split_query(base_url)
        # The package's own transport: a hand-made httpx client with a pool sized to the
        # concurrency spent a third of a busy run in the pool's bookkeeping.
        self.client = openai.AsyncOpenAI(
            base_url=base,
            default_query=query or None,
            api_key=cfg.api_key or "no-key",
            max_retries=0,  # retries are ours, so they can be counted and bounded
            timeout=httpx.Timeout(cfg.timeout, connect=min(cfg.timeout, 30.0)),
        )


def derive_seed(*parts: Any) -> int:
    """A deterministic 31-bit seed from any parts (no global random state involved)."""
    from curate.core.records import stable_id

    return int(stable_id(*parts), 16) % SEED_MODULUS


def _retry_after(headers: Any) -> float | None:
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value)
        return max(0.0, parsed.timestamp() - time.time()) if parsed else None


# getaddrinfo's answers that a name has no address (not EAI_AGAIN: a resolver that failed this time)
_NO_SUCH_HOST = {socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)}


def _unresolvable(error: BaseException, base_url: str) -> bool:
    """Whether a connection error says the URL's host name has no address, which no retry
    changes. Names under ``.invalid`` never resolve (RFC 6761), whatever the resolver says."""
    host = (urlsplit(base_url).hostname or "").rstrip(".")
    if host == "invalid" or host.endswith(".invalid"):
        return True
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:  # openai's error wraps httpx's, which wraps the socket's
        seen.add(id(cause))
        if isinstance(cause, socket.gaierror):
            return cause.errno in _NO_SUCH_HOST
        cause = cause.__cause__ or cause.__context__
    return False


class LLMClient:
    def __init__(self, cfg: ClientConfig, cache: RequestCache | None = None):
        if not cfg.base_urls:
            raise ValueError("no base URL")
        self.cfg = cfg
        self.cache = cache or RequestCache(None)
        self._endpoints = [_Endpoint(u, cfg) for u in cfg.base_urls]
        self.scrub = Scrubber.for_config(cfg.api_key, cfg.base_urls)
        self._jitter = random.Random()  # timing jitter only; never affects content
        self.requests_sent = 0
        self.fatal: str | None = None  # why nothing more is sent: the first failure no retry fixes

    async def close(self) -> None:
        for ep in self._endpoints:
            await ep.client.close()
        self.cache.close()

    def in_flight_limit(self) -> int:
        """Requests the servers take at once now: the sum of their adaptive limits."""
        return sum(ep.limiter.limit for ep in self._endpoints)

    def _pick(self, avoid: _Endpoint | None = None) -> _Endpoint:
        """The least busy server for its limit (requests queued or in flight per place it has now),
        preferring those that have not just failed (and, on a retry, another server than the one
        that failed)."""
        now = time.monotonic()
        return min(self._endpoints, key=lambda e: (e.contact.dead is not None, e.cooldown_until > now, e is avoid,
                                                   e.inflight / e.limiter.limit))

    def _backoff(self, attempt: int) -> float:
        cap = min(self.cfg.backoff_max, self.cfg.backoff_base * (2**attempt))
        return self._jitter.uniform(cap / 2, cap)

    async def _send(self, body: dict[str, Any], answer: Answer,
                    endpoint: str = "chat") -> tuple[dict | None, str | None]:
        """Send one request (``endpoint``: chat or embeddings), retrying transport faults;
        return (response dict, failure reason). A failure no retry fixes ends it at once (see
        the module), and after one nothing more is sent."""
        last = "unknown"
        ep: _Endpoint | None = None
        probing: _Endpoint | None = None  # the server this request is the first to try (its gate held)
        silent: list[_Endpoint] = []  # servers it tried that sent no reply at all
        try:
            for attempt in range(self.cfg.max_retries + 1):
                if self.fatal is None:
                    ep, probing = await self._reach(ep, probing)
                if self.fatal is not None:
                    answer.fatal = True
                    return None, f"not sent: {self.fatal}"
                ep.inflight += 1
                delay: float | None = None
                try:
                    async with ep.limiter.slot() as slot:  # the timeout below starts once a slot is held
                        answer.attempts += 1
                        self.requests_sent += 1
                        if (tally := TALLY.get()) is not None:
                            tally[0] += 1
                        # the raw reply: curate parses the JSON once instead of building and dumping models
                        api = ep.client.chat.completions if endpoint == "chat" else ep.client.embeddings
                        raw = await asyncio.wait_for(api.with_raw_response.create(**body), self.cfg.timeout)
                    ep.contact.reply()
                    return _response_dict(raw.http_response.content, endpoint, body), None
                except openai.APIStatusError as e:
                    ep.contact.reply()
                    code = e.status_code
                    last = f"http-{code}"
                    if code in FATAL_STATUS:
                        reason = self.scrub(f"http-{code}: {_short(e.message)}")
                        return self._stop(answer, reason, f"{FATAL_STATUS[code]} at {safe_url(ep.base_url)} "
                                                          f"({reason}); {FATAL_HINT[code]}")
                    if code not in RETRYABLE_STATUS and code < 500:
                        return None, self.scrub(f"http-{code}: {_short(e.message)}")
                    if code in OVERLOAD_STATUS:
                        ep.limiter.overloaded(slot)  # before the retry: fewer requests at once
                    delay = _retry_after(e.response.headers if e.response is not None else None)
                    if delay is not None:
                        delay = min(delay, self.cfg.backoff_max)  # a server asking for an hour gets a minute
                except (openai.APITimeoutError, asyncio.TimeoutError):
                    ep.limiter.overloaded(slot)
                    last = "timeout"
                    silent.append(ep)
                except openai.APIConnectionError as e:
                    last = f"connection: {_short(str(e.__cause__ or e))}"
                    if _unresolvable(e, ep.base_url):
                        reason = self.scrub(f"{last} (the host name does not resolve)")
                        return self._stop(answer, reason, f"the host of {safe_url(ep.base_url)} does not resolve "
                                                          f"({reason}); check --base-url")
                    silent.append(ep)
                except (openai.APIError, ValueError) as e:  # a reply that is not an OpenAI-shaped response
                    ep.contact.reply()
                    last = f"bad-response: {_short(str(e))}"
                finally:
                    ep.inflight -= 1
                last = self.scrub(last)
                answer.history.append(last)
                if attempt < self.cfg.max_retries:
                    wait = delay if delay is not None else self._backoff(attempt)
                    ep.cooldown_until = max(ep.cooldown_until, time.monotonic() + max(2 * wait, 1.0))
                    await asyncio.sleep(wait)
            return self._gave_up(answer, last, self.cfg.max_retries + 1, silent)
        finally:
            if probing is not None:
                probing.contact.release()

    async def _reach(self, avoid: _Endpoint | None,
                     probing: _Endpoint | None) -> tuple[_Endpoint | None, _Endpoint | None]:
        """The server for the next attempt, and the one whose gate this request holds: waits while
        another request is the first to try a server; sets ``fatal`` when every server is given up on."""
        while True:
            ep = self._pick(avoid=avoid)
            if probing is not None and probing is not ep:  # the retry goes elsewhere: let another probe
                probing.contact.release()
                probing = None
            if ep.contact.dead is not None:  # _pick puts given-up servers last: all of them are
                self.fatal = self.fatal or self.scrub(self._dead_line(self._endpoints))
                return ep, probing
            if probing is ep or await ep.contact.turn():
                return ep, ep
            if ep.contact.dead is None:  # it replied to the probe: go
                return ep, probing

    def _stop(self, answer: Answer, reason: str, what: str) -> tuple[None, str]:
        """A failure no retry fixes: mark the answer and stop sending (``what``: for people)."""
        answer.fatal = True
        if self.fatal is None:
            self.fatal = self.scrub(what)
        return None, reason

    def _gave_up(self, answer: Answer, last: str, attempts: int, silent: list[_Endpoint]) -> tuple[None, str]:
        """The request used its ``attempts``, the last failing with ``last``. A server it tried
        that never replied to anyone is given up on; with none left, so is the run."""
        reason = f"{last} (gave up after {attempts} attempts)"
        for ep in silent:
            if not ep.contact.replied:
                ep.contact.give_up(f"{last}, {attempts} attempt{'s' if attempts > 1 else ''}")
        dead = [ep for ep in self._endpoints if ep.contact.dead is not None]
        if dead and len(dead) == len(self._endpoints):
            return self._stop(answer, reason, self._dead_line(dead))
        return None, reason

    @staticmethod
    def _dead_line(dead: list[_Endpoint]) -> str:
        """What to tell people when no server ever replied."""
        urls = ", ".join(safe_url(ep.base_url) for ep in dead)
        return (f"the server at {urls} answered no request (the first: {dead[0].contact.dead}); check that it is "
                "up and serves --model, or raise --timeout")

    async def embed(self, texts: list[str], extra: dict[str, Any] | None = None) -> tuple[list[list[float]] | None,
                                                                                        Answer]:
        """Vectors for ``texts`` from ``/v1/embeddings``, in order; transport faults and replies
        that are not one vector per text are retried like any request (no cache here: the
        embedding cache keeps vectors)."""
        answer = Answer()
        started = time.perf_counter()
        body = {"model": self.cfg.model, "input": texts, "encoding_format": "float",
                **({"extra_body": extra} if extra else {})}
        resp, answer.reason = await self._send(body, answer, "embeddings")
        answer.latency = time.perf_counter() - started
        if resp is None:
            return None, answer
        answer.prompt_tokens = int((resp.get("usage") or {}).get("prompt_tokens") or 0)
        return [d["embedding"] for d in sorted(resp["data"], key=lambda d: d.get("index", 0))], answer

    # a batch run's pass (curate.llm.batch.Collector): answers come from its batches, and a request
    # with none yet is collected for the next batch instead of being sent; set only by ``collecting``
    _collector: Collector | None = None

    @contextlib.contextmanager
    def collecting(self, collector: Collector):
        """Answer from ``collector``'s batches, and write down instead of sending what they have
        not answered, until the block ends: the one switch between online and batch asking
        (``curate.llm.batch.ask_in_batches`` turns it on for each pass). A client built without a
        plan (``cfg.batch`` None) refuses, so an online run never collects."""
        if self.cfg.batch is None:
            raise ValueError("this client asks online (no --batch plan): it does not collect")
        if self._collector is not None:
            raise ValueError("this client is collecting for another pass already")
        self._collector = collector
        try:
            yield collector
        finally:
            self._collector = None

    async def ask_json(
        self,
        messages: list[dict[str, str]],
        schema: dict[str, Any],
        params: dict[str, Any],
        seed: int,
        name: str = "answer",
        fresh: bool = False,
    ) -> Answer:
        """Ask for a JSON object following ``schema``; re-ask on content faults with new seeds.

        ``fresh`` skips cached answers (they are still stored): for retrying an item whose
        cached answers were the reason it failed. Answers that could not be used are cached too,
        so a re-run replays the same re-asks to the same good answer; but when every answer of
        this call came from the cache and none was usable, the server is asked afresh (it may
        have been fixed since), never failed again from the cache.
        """
        answer = await self._ask_json(messages, schema, params, seed, name, fresh)
        if not answer.ok and not fresh and answer.cached and not answer.sent and self._collector is None:
            answer = await self._ask_json(messages, schema, params, seed, name, fresh=True)
        return answer

    async def _ask_json(self, messages: list[dict[str, str]], schema: dict[str, Any], params: dict[str, Any],
                        seed: int, name: str, fresh: bool) -> Answer:
        answer = Answer()
        validator = _validator(schema)
        started = time.perf_counter()
        for ask in range(self.cfg.max_reasks + 1):
            body = {
                "model": self.cfg.model,
                "messages": messages,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": name, "schema": schema, "strict": True},
                },
                "seed": (seed + ask * 7919) % SEED_MODULUS,
                **params,
            }
            key = request_key(body)
            resp = self._collector.answered.get(key) if self._collector is not None else None
            if resp is not None:  # a batch's answer: sent (in the batch), and kept in the cache like any other
                answer.sent = True
                answer.attempts += 1
                self.requests_sent += 1
                if (tally := TALLY.get()) is not None:
                    tally[0] += 1
                self.cache.put(key, {**resp, "_curate_attempts": 1})
            elif (resp := None if fresh else self.cache.get(key)) is not None:
                answer.cached = True
                answer.attempts += resp.get("_curate_attempts", 1)
                if (tally := TALLY.get()) is not None:
                    tally[1] += 1
            elif self._collector is not None:  # no answer yet: the next batch asks
                answer.reason = self._collector.missing(key, body)
                break
            else:
                answer.sent = True
                resp, failure = await self._send(body, answer)
                if failure:
                    answer.reason = failure
                    break
                resp["_curate_attempts"] = 1
                self.cache.put(key, resp)
            usage = resp.get("usage") or {}
            answer.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            answer.completion_tokens += int(usage.get("completion_tokens") or 0)
            choice = (resp.get("choices") or [{}])[0]
            content = (choice.get("message") or {}).get("content")
            answer.raw = self.scrub(content)
            data, reason = _read_answer(content, choice.get("finish_reason"), validator)
            reason = self.scrub(reason)
            if reason is None:
                answer.data = data
                answer.reason = None
                break
            answer.reason = reason
            answer.history.append(reason)
        answer.latency = time.perf_counter() - started
        return answer


_VALIDATORS: dict[int, tuple[Any, Any]] = {}


def _validator(schema: dict[str, Any]) -> Any:
    """One validator per schema object for the whole run (a run asks with a few long-lived
    schemas); the schema is kept beside it so its id cannot be reused."""
    found = _VALIDATORS.get(id(schema))
    if found is None or found[0] is not schema:
        found = _VALIDATORS[id(schema)] = (schema, jsonschema.Draft202012Validator(schema))
    return found[1]


def _response_dict(body: bytes, endpoint: str = "chat", request: dict | None = None) -> dict:
    """The reply as a dict; a body that is not a JSON object with choices (empty, a proxy's HTML
    page), or for embeddings not one numeric vector per input, is a bad response."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        data = None
    if endpoint == "embeddings":
        if isinstance(data, dict) and isinstance(data.get("data"), list):
            problem = _embeddings_problem(data["data"], len((request or {}).get("input") or []))
            if problem is None:
                return data
            raise ValueError(f"not an embeddings reply: {problem}")
    elif isinstance(data, dict) and isinstance(data.get("choices"), list):
        return data
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    raise ValueError(f"not {'a chat completion' if endpoint == 'chat' else 'an embeddings reply'}: "
                     f"{_short(text, 60) or 'empty body'}")


def _embeddings_problem(items: list, expected: int) -> str | None:
    """Why ``items`` is not one vector of numbers per input (all of one length), or None."""
    if len(items) != expected:
        return f"{len(items)} vectors for {expected} texts"
    sizes = set()
    for d in items:
        vec = d.get("embedding") if isinstance(d, dict) else None
        if not isinstance(vec, list) or not vec or not all(isinstance(x, (int, float)) for x in vec):
            return "a vector that is not a list of numbers"
        sizes.add(len(vec))
    return None if len(sizes) <= 1 else f"vectors of lengths {sorted(sizes)} in one reply"


def _blank_string(data: Any, path: str = "") -> str | None:
    """The path of the first string in the answer that is empty after stripping, if any."""
    if isinstance(data, str):
        return path or "(root)" if not data.strip() else None
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        found = _blank_string(value, f"{path}/{key}" if path else str(key))
        if found:
            return found
    return None


def _read_answer(content: str | None, finish_reason: str | None, validator) -> tuple[Any, str | None]:
    """(the parsed answer, None) when it is usable, else (None, why not): parsed once."""
    if finish_reason == "length":
        return None, "truncated: finish_reason=length (raise max_tokens or lower the schema's maxLength)"
    if not content:
        return None, "invalid-json: empty answer"
    try:
        # strict=False: a raw newline or tab inside a string (which grammar backends let through)
        # is text, not a fault worth a re-ask
        data = json.loads(content, strict=False)
    except json.JSONDecodeError as e:
        return None, f"invalid-json: {e.msg} at char {e.pos}"
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        return None, f"schema: {where}: {_short(error.message)}"
    blank = _blank_string(data)
    if blank:
        return None, f"schema: {blank}: blank string"
    return data, None


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
