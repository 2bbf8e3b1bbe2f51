"""``curate serve --replicas N``: N servers as Ray actors, their URLs in a file, a dead one restarted.

Each replica is a Ray actor that runs one server process (vLLM, or any OpenAI-compatible server
given by ``--server-command``) on a port of its own node, one GPU each where the executor asks
for GPUs. The driver writes every replica's base URL to ``--urls-file``, one a line, which
``--base-url FILE`` and ``--teacher-base-url FILE`` read. Every few seconds it checks each
replica: a server process that died is started again by its actor, on the same port, so the
URL stays good and a running client, which routes around a server that fails, finds it again
once it answers; an actor that died (its node lost) is replaced and the file rewritten.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import string
import subprocess
import sys
import time
from pathlib import Path

from curate.core.errors import CurateError
from curate.core.executor import Executor, ray_for, remote
from curate.core.jsonl import atomic_write_text
from curate.llm.readiness import wait_until_up

CHECK_EVERY = 2.0  # seconds between health checks
PLACEHOLDERS = ("host", "port", "python")  # what a replica fills in its --server-command


def command_for(command: str, host: str, port: int | str, python: str = sys.executable) -> list[str]:
    """The replica's command line: ``{host}``, ``{port}`` and ``{python}`` filled in, then split
    as a shell would; a template that cannot be filled is one line naming what is wrong."""
    known = ", ".join("{" + p + "}" for p in PLACEHOLDERS)
    try:
        for _, name, spec, conversion in string.Formatter().parse(command):
            if name is not None and name not in PLACEHOLDERS:  # no {port[0]} or {host.x}: plain names only
                raise CurateError(f"--server-command: unknown placeholder {{{name}}}; known: {known} "
                                  "(write {{ and }} for a brace)")
            if name is not None and (spec or conversion):  # {port!r} quotes it, {port:>999999} pads it
                raise CurateError(f"--server-command: {{{name}{'!' + conversion if conversion else ''}"
                                  f"{':' + spec if spec else ''}}} in {command!r}: placeholders are plain names "
                                  f"({known}), with no conversion or format spec")
        argv = shlex.split(command.format(host=host, port=port, python=python))
        if not argv:
            raise CurateError(f"--server-command {command!r}: no command to run")
        return argv
    except (ValueError, LookupError, TypeError) as e:  # a lone brace, a bad format spec, an unclosed quote
        raise CurateError(f"--server-command: {e} in {command!r} (placeholders: {known}; "
                          "{{ and }} for a brace)") from None


class Replica:
    """A Ray actor running one server process; ``{host}`` and ``{port}`` in the command are its own."""

    def __init__(self, command: str, start_timeout: float):
        import ray

        self.host = ray.util.get_node_ip_address()
        with socket.socket() as s:
            s.bind((self.host, 0))
            self.port = s.getsockname()[1]
        self.command = command_for(command, self.host, self.port)
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> str:
        self.stop()
        self.proc = subprocess.Popen(self.command, start_new_session=True, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        wait_until_up(f"{self.url}/models", self.proc, self.start_timeout, f"replica on port {self.port}")
        return self.url

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def _write(path: Path, urls: list[str]) -> None:
    atomic_write_text(path, "".join(u + "\n" for u in urls))


def serve_replicas(n: int, command: str, urls_file: Path, executor: Executor, start_timeout: float,
                   rounds: int | None = None) -> None:
    """Start ``n`` replicas, write their URLs, keep them up until interrupted (or ``rounds`` checks)."""
    command_for(command, "127.0.0.1", 8000)  # a bad template stops here, not inside every actor after Ray starts
    ray = ray_for(executor)
    # one GPU each where asked; spread over the nodes either way (the CPU build: one a node where there are enough)
    actor = remote(ray, Replica, executor, num_cpus=0, max_concurrency=2, scheduling_strategy="SPREAD")
    replicas = [actor.remote(command, start_timeout) for _ in range(n)]
    try:
        urls = _start(ray, replicas)
    except Exception:
        for r in replicas:
            ray.kill(r)
        raise
    _write(urls_file, urls)
    for u in urls:
        print(u, flush=True)
    print(f"{n} replicas; their URLs are in {urls_file} (--base-url {urls_file}); Ctrl-C stops them",
          file=sys.stderr, flush=True)
    # Ctrl-C and kill stop the replicas, also when started from a background job, where Python
    # leaves an inherited "ignore SIGINT" in place (as `curate serve` does for one server)
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    done = 0
    try:
        while rounds is None or done < rounds:
            time.sleep(CHECK_EVERY)
            done += 1
            for k, r in enumerate(replicas):
                try:
                    if not ray.get(r.running.remote(), timeout=60):
                        print(f"replica {k} ({urls[k]}) stopped; starting it again", file=sys.stderr, flush=True)
                        ray.get(r.start.remote())
                except ray.exceptions.RayActorError:  # the actor (its node) is gone: a new one
                    replicas[k] = actor.remote(command, start_timeout)
                    urls[k] = ray.get(replicas[k].start.remote())
                    _write(urls_file, urls)
                    print(f"replica {k} replaced: {urls[k]}", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        ray.get([r.stop.remote() for r in replicas], timeout=120)


def _start(ray, replicas) -> list[str]:
    try:
        return ray.get([r.start.remote() for r in replicas])
    except ray.exceptions.RayTaskError as e:
        cause = getattr(e, "cause", None)
        raise CurateError(str(cause) if isinstance(cause, CurateError) else f"a replica failed to start: {e}") from None


def _interrupt(signum, frame):
    raise KeyboardInterrupt
