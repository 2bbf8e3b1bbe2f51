"""Choose the LLM backend for a run: the servers the user named, or the embedded CPU model.

Every LLM task (brainstorm, generate, from-pairs, the judges) talks to a ``Backend``: one
method, ``ask_json(messages, schema, params, seed) -> Answer``, plus ``cfg`` (the run's
``ClientConfig``: the model records name, the concurrency, ``--batch``'s plan), ``requests_sent``
and ``close()``; under ``--batch`` also ``collecting(collector)`` (``LLMClient.collecting``).
A backend that knows a failure holds for every request (a refused key) marks the answer
``fatal`` and may say why in its own ``fatal`` (one line): generate then stops its queue.
The OpenAI-compatible client (vLLM, llama.cpp, hosted APIs) is the backend for
``http``/``https`` URLs. Another backend is one module: a class with those members,
registered for a URL scheme,

    @register_backend("mine")
    class MyBackend:
        def __init__(self, cfg: ClientConfig, cache: RequestCache): ...

and then ``--base-url mine://anything --model NAME`` routes every request to it. Backends are
the ``BACKENDS`` registry, keyed by scheme (any case); a package offers one through the
``curate.backends`` entry-point group (name = the scheme; docs/extend.md).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from curate.core.errors import CurateError
from curate.core.registry import Registry
from curate.llm.cache import RequestCache
from curate.llm.client import Answer, ClientConfig, LLMClient
from curate.llm.embedded import EmbeddedServer
from curate.llm.options import LLMOptions  # noqa: F401  (declared apart, so options need no client)


class Backend(Protocol):
    cfg: ClientConfig  # as it was built with: generate names cfg.model and sends cfg.concurrency at once per URL
    requests_sent: int

    async def ask_json(self, messages: list[dict[str, str]], schema: dict[str, Any], params: dict[str, Any],
                       seed: int, name: str = "answer", fresh: bool = False) -> Answer: ...

    async def close(self) -> None: ...


BackendFactory = Callable[[ClientConfig, RequestCache], Backend]
BACKENDS: Registry[BackendFactory] = Registry("LLM backend", "curate.backends", builtin=("curate.llm.backends",),
                                              normalize=str.lower)
register_backend = BACKENDS.register  # @register_backend("mine") on the class (see the module docstring)


def backend_for(base_urls) -> BackendFactory:
    """The backend registered for the URLs' scheme (they all share one)."""
    schemes = {urlsplit(u).scheme.lower() for u in base_urls}
    if len(schemes) != 1:
        raise CurateError(f"--base-url: one kind of backend per run, got {', '.join(sorted(schemes))}")
    scheme = schemes.pop()
    if scheme not in BACKENDS:
        raise CurateError(f"--base-url: no backend for {scheme or 'a URL without a scheme'}://"
                          f"{BACKENDS.hint(scheme) if scheme else ''} (known: {', '.join(BACKENDS.names())})")
    return BACKENDS.get(scheme)


def open_backend(cfg: ClientConfig, cache: RequestCache) -> Backend:
    """The backend for the run's URLs. Under ``--batch`` (``cfg.batch``) it must be able to
    collect its requests for a batch (``collecting``, as ``LLMClient`` does), else the run stops
    here rather than ask online while the user waits for batches."""
    backend = backend_for(cfg.base_urls)(cfg, cache)
    if cfg.batch is not None and not callable(getattr(backend, "collecting", None)):
        scheme = urlsplit(cfg.base_urls[0]).scheme
        raise CurateError(f"--batch: the {scheme}:// backend sends each request as it comes (it has no "
                          "collecting()); run without --batch")
    return backend

REMOTE_CONCURRENCY = 256  # per server: about what one vLLM instance batches at once


@contextmanager
def llm_backend(opts: LLMOptions, out_dir: Path) -> Iterator[tuple[ClientConfig, RequestCache]]:
    """Yield a client config (starting the embedded server when no base URL is given) and the cache.
    The one place a client's configuration is built, ``--batch``'s plan with it (``cfg.batch``):
    whichever way a stage opens its client, it asks the same way and keeps its batches in
    ``OUT/batch``."""
    from curate.llm.batch import BatchPlan
    from curate.llm.urls import read_urls

    base_urls = read_urls(opts.base_urls)  # a file of URLs (curate serve --replicas) gives its lines
    if not base_urls and os.environ.get("OPENAI_BASE_URL"):
        base_urls = [os.environ["OPENAI_BASE_URL"]]
    if base_urls:
        backend_for(base_urls)  # an unknown scheme stops the run before anything starts
    elif opts.batch == "api":
        raise CurateError("--batch api sends the requests to a server's batches endpoint: give --base-url "
                          "(or use --batch vllm, vLLM's offline runner here)")
    api_key = opts.api_key or os.environ.get("OPENAI_API_KEY")
    cache = RequestCache(opts.cache_in(out_dir).cache)
    server = None
    try:
        if opts.batch == "vllm":  # vLLM's offline runner answers (curate.llm.batch): no server to start or reach
            from curate.llm.batch import OFFLINE_URL, vllm_model

            base_urls, model, concurrency = [OFFLINE_URL], vllm_model(opts.model_path or opts.model)[2], 1
        elif base_urls:
            if not opts.model:
                raise CurateError("--model is required with --base-url (the name the server serves)")
            model, concurrency = opts.model, opts.concurrency or REMOTE_CONCURRENCY
        else:
            server = EmbeddedServer(opts.model_path, parallel=opts.parallel,
                                    log_path=Path(out_dir) / "logs" / "llm-server.log")
            base_urls = [server.start()]
            model, concurrency = server.model_name, opts.concurrency or opts.parallel
        cfg = ClientConfig(
            # the embedded server's slots are known (we started it): as many in flight as it has, no guessing
            base_urls=base_urls, model=model, api_key=api_key, concurrency=concurrency, adaptive=server is None,
            timeout=opts.timeout, max_retries=opts.max_retries, max_reasks=opts.max_reasks,
            backoff_base=opts.backoff_base,
            batch=BatchPlan.of(opts, Path(out_dir), cache.path.parent if cache.path else None),
        )
        yield cfg, cache
    finally:
        cache.close()
        if server is not None:
            server.stop()


@asynccontextmanager
async def llm_client(opts: LLMOptions, out_dir: Path) -> AsyncIterator[LLMClient]:
    """An open client on the chosen backend, closed (and the embedded server stopped) on exit."""
    with llm_backend(opts, out_dir) as (cfg, cache):
        client = open_backend(cfg, cache)
        try:
            yield client
        finally:
            await client.close()
