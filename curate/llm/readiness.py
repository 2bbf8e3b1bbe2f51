"""Wait for a freshly started server to answer, failing fast if its process dies."""

from __future__ import annotations

import subprocess
import time
import urllib.request

from curate.core.errors import CurateError


def wait_until_up(url: str, proc: subprocess.Popen, timeout: float, what: str, interval: float = 0.2) -> None:
    """Poll ``url`` until it answers 200; raise a one-line error if ``proc`` exits or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise CurateError(f"{what} exited with code {proc.returncode} while starting")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(interval)
    raise CurateError(f"{what} did not answer at {url} within {timeout:.0f} s")
