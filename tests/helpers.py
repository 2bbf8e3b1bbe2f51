"""Shared test helpers: run the CLI as a user would, and read its outputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


def run_curate(*args: str, timeout: float = 3600, env: dict | None = None, cwd: str | Path | None = None):
    """Run ``python -m curate ARGS`` in a subprocess; return the CompletedProcess (text).

    ``timeout`` only stops a hung process: tests bound their runs by the work they ask for,
    and a busy 2-core machine can be several times slower than a quiet one."""
    full_env = dict(os.environ)
    full_env.pop("OPENAI_BASE_URL", None)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "curate", *args], capture_output=True, text=True,
                          timeout=timeout, env=full_env, cwd=cwd or REPO)


def read_jsonl(path: str | Path) -> list[dict]:
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def assert_one_line_error(proc, *needles: str) -> None:
    """The command failed with exactly one line on stderr, containing every needle, no traceback."""
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def scifact_pairs(n: int, max_chars: int = 800) -> list[tuple[str, str]]:
    """``n`` (claim, abstract) pairs from SciFact (claims and abstracts in file order, not
    matched: texts for tests that need real sentences); stand-ins when the copy is missing."""
    folder = SHARED_DATA / "scifact"
    if not (folder / "corpus.jsonl").exists():  # pragma: no cover - keep the tests runnable anywhere
        return [(f"Claim number {i} about cells.", f"Abstract {i} about cells and their growth in mice.")
                for i in range(n)]
    claims = [json.loads(line)["text"] for line in open(folder / "queries.jsonl", encoding="utf-8")][:n]
    docs = []
    with open(folder / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            docs.append(json.loads(line)["text"][:max_chars])
            if len(docs) >= n + 8:
                break
    return list(zip(claims, docs))


def server_pids(program: str, port: int) -> list[int]:
    """Processes with ``program`` among their command-line arguments (or in one of them) and
    ``port`` as one argument: a server started on that port."""
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(program.encode() in c for c in cmd) and str(port).encode() in cmd:
                pids.append(int(d.name))
    return pids
