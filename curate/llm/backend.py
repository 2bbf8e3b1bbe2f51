"""Choose the LLM backend for a run: the servers the user named, or the embedded CPU model."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path

from curate.core.errors import CurateError
from curate.llm.cache import RequestCache
from curate.llm.client import ClientConfig, LLMClient
from curate.llm.embedded import EmbeddedServer

REMOTE_CONCURRENCY = 256  # per server: about what one vLLM instance batches at once


@dataclass
class LLMOptions:
    base_urls: tuple[str, ...] = ()
    model: str | None = None
    api_key: str | None = None
    model_path: str | None = None
    concurrency: int | None = None
    timeout: float = 600.0
    max_retries: int = 6
    max_reasks: int = 2
    backoff_base: float = 1.0
    cache: str | None = None
    parallel: int = 4  # embedded server slots


@contextmanager
def llm_backend(opts: LLMOptions, out_dir: Path) -> Iterator[tuple[ClientConfig, RequestCache]]:
    """Yield a client config (starting the embedded server when no base URL is given) and the cache."""
    base_urls = list(opts.base_urls)
    if not base_urls and os.environ.get("OPENAI_BASE_URL"):
        base_urls = [os.environ["OPENAI_BASE_URL"]]
    api_key = opts.api_key or os.environ.get("OPENAI_API_KEY")
    cache = RequestCache(opts.cache or Path(out_dir) / ".cache" / "llm.sqlite")
    server = None
    try:
        if base_urls:
            if not opts.model:
                raise CurateError("--model is required with --base-url (the name the server serves)")
            model, concurrency = opts.model, opts.concurrency or REMOTE_CONCURRENCY
        else:
            server = EmbeddedServer(opts.model_path, parallel=opts.parallel,
                                    log_path=Path(out_dir) / "logs" / "llm-server.log")
            base_urls = [server.start()]
            model, concurrency = server.model_name, opts.concurrency or opts.parallel
        cfg = ClientConfig(
            base_urls=base_urls, model=model, api_key=api_key, concurrency=concurrency,
            timeout=opts.timeout, max_retries=opts.max_retries, max_reasks=opts.max_reasks,
            backoff_base=opts.backoff_base,
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
        client = LLMClient(cfg, cache)
        try:
            yield client
        finally:
            await client.close()
