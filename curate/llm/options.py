"""What every LLM-driven command takes: which model answers and how requests are sent.

Declared apart from the client (``curate.llm.backend``) so that building a command's options, or
its ``--help``, imports no HTTP client."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

CACHE = Path(".cache") / "llm.sqlite"  # a run folder's request cache, unless --cache names another


@dataclass
class LLMOptions:
    """Which model answers and how requests are sent: every LLM-driven command's options (the
    command line builds them from these fields, ``curate.cli.options``)."""

    # where the servers are is not what they answer: a fingerprint sees only whether one serves
    base_urls: tuple[str, ...] = field(default=(), metadata={
        "flag": "--base-url", "metavar": "URL", "fingerprint_as": bool,
        "help": "OpenAI-compatible server (vLLM, ...), or a file of their URLs one a line (# for comments; "
                "curate serve --replicas writes one); repeat to spread requests over several. "
                "Default: $OPENAI_BASE_URL, else the embedded CPU model."})
    model: str | None = field(default=None, metadata={
        "help": "Model name the server serves (required with --base-url)."})
    api_key: str | None = field(default=None, metadata={
        "envvar": "OPENAI_API_KEY", "help": "API key for the server; read from the environment, never logged."})
    model_path: str | None = field(default=None, metadata={
        "path": "file", "help": "Serve this GGUF file on the CPU instead of the bundled model."})
    concurrency: int | None = field(default=None, metadata={
        "min": 1, "help": "Most requests in flight per server (default: 256 for servers, the slot count embedded); "
                          "below it the client adapts to each server, sending fewer while its latency climbs "
                          "or it answers 429/503."})
    timeout: float = field(default=600.0, metadata={
        "min": 0.1, "help": "Seconds before a request counts as timed out."})
    max_retries: int = field(default=6, metadata={
        "min": 0, "help": "Retries of a request after 429/5xx/timeouts/dropped connections."})
    max_reasks: int = field(default=2, metadata={
        "min": 0, "help": "New asks after an answer that is not valid JSON, fails the schema, or is cut off."})
    backoff_base: float = field(default=1.0, metadata={
        "min": 0.0, "help": "First retry delay in seconds (doubles each retry, with jitter)."})
    cache: str | None = field(default=None, metadata={
        "path": "file", "help": "Request cache file (default: OUT/.cache/llm.sqlite)."})
    parallel: int = field(default=4, metadata={  # embedded server slots
        "min": 1, "help": "Slots of the embedded server (sequences decoded together)."})
    # what the answers cost is not what they say: out of every fingerprint, and out of the
    # params a run writes while it is left unset (curate.generate.stage.run_llm_stage)
    price_per_1k_tokens: float | None = field(default=None, metadata={  # run.json names it only when given
        "min": 0.0, "fingerprint": False, "lineage": "if-set",
        "help": "Price of 1,000 tokens at the server, prompt and completion tokens alike; with it, the "
                "estimates and summaries show what the run costs."})
    # how the requests travel is not what they answer: out of the fingerprint (a batch run and an
    # online run make the same records from the same answers, curate.llm.batch)
    batch: Literal["api", "vllm"] | None = field(default=None, metadata={
        "fingerprint": False, "lineage": "if-set",
        "help": "Send the requests as batches. api: the --base-url server's files and batches endpoints "
                "(OpenAI's Batch API answers within 24 h at about half the price); killed, the run polls the "
                "same batch again. vllm: vLLM's offline runner here (make vllm), no server, on --model-path, "
                "--model or the bundled model."})
    batch_poll: float = field(default=30.0, metadata={
        "min": 0.01, "fingerprint": False, "help": "Seconds between two polls of a batch (with --batch)."})

    def cache_in(self, out: str | Path) -> "LLMOptions":
        """These options with the cache file pinned to ``out``'s (unless one was given): a flow
        whose stages run in folders of their own (the pipeline's stages, generate's brainstorm
        runs) asks every stage's questions through one cache, so an answer is never paid twice."""
        return self if self.cache else replace(self, cache=str(Path(out) / CACHE))
