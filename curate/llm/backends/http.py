"""OpenAI-compatible servers over HTTP(S): vLLM, llama.cpp's server, the embedded default, any
hosted API. The client that asks them (batching, retries, re-asks, the cache) is ``LLMClient``."""

from __future__ import annotations

from curate.llm.backend import register_backend
from curate.llm.client import LLMClient

register_backend("http", LLMClient)
register_backend("https", LLMClient)
