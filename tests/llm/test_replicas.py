"""``curate serve --replicas N``: servers as Ray actors, their URLs in a file, a dead one restarted.

The replicas run the scripted server (``--server-command``): vLLM's start takes minutes on these
cores, and what is tested here is the actors, the file and the restart, not vLLM (its own test
starts it). A `generate` run reads the file and goes on while one replica's server is killed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from curate.core.errors import CurateError
from curate.llm.urls import read_urls
from tests.helpers import REPO, read_jsonl, run_curate, server_pids


def test_a_urls_file_gives_its_lines(tmp_path):
    f = tmp_path / "urls.txt"
    f.write_text("http://a:1/v1\n\nhttp://b:2/v1\n")
    assert read_urls([str(f), "http://c:3/v1"]) == ["http://a:1/v1", "http://b:2/v1", "http://c:3/v1"]


def _server_pids(port: int) -> list[int]:
    return server_pids("fake_llm_server.py", port)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.mark.bench
def test_replicas_on_ray_serve_a_run_that_outlives_a_killed_one(tmp_path):
    pytest.importorskip("ray")
    urls_file = tmp_path / "replicas.txt"
    err = open(tmp_path / "serve.log", "w")
    serve = subprocess.Popen([sys.executable, "-m", "curate", "serve", "--replicas", "2", "--urls-file", str(urls_file),
                              "--server-command", f"{{python}} {REPO / 'tests' / 'fake_llm_server.py'} --host {{host}} "
                                                  "--port {port}", "--start-timeout", "120"],
                             cwd=REPO, stdout=subprocess.PIPE, stderr=err, text=True, start_new_session=True,
                             # started as a shell starts a background job, SIGINT ignored: Ctrl-C still stops it
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        printed = [serve.stdout.readline().strip() for _ in range(2)]
        assert all(u.startswith("http://") for u in printed), (tmp_path / "serve.log").read_text()[-2000:]
        urls = read_urls([str(urls_file)])
        assert urls == printed and len(set(urls)) == 2 and all(_answers(u) for u in urls)
        tasks = tmp_path / "tasks.jsonl"
        tasks.write_text("".join(json.dumps({"task": f"FAULTS[slow0.5] Given question {i}, find passages."}) + "\n"
                                 for i in range(60)))
        out = tmp_path / "gen"
        gen = subprocess.Popen([sys.executable, "-m", "curate", "generate", "--task", "short-long", "-n", "60",
                                "--per-task", "1", "--tasks-file", str(tasks), "--out", str(out), "--base-url",
                                str(urls_file), "--model", "fake", "--concurrency", "2", "--max-reasks", "0",
                                "--backoff-base", "0.2"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env={k: v for k, v in os.environ.items() if k != "OPENAI_BASE_URL"})
        time.sleep(2.5)  # the run is under way on both replicas (60 answers of 0.5 s, 4 at a time: 7.5 s at best)
        port = int(urls[0].rsplit(":", 1)[1].split("/")[0])
        victims = _server_pids(port)
        assert victims and gen.poll() is None
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        _, gen_err = gen.communicate(timeout=600)
        assert gen.returncode == 0, gen_err[-2000:]
        records = read_jsonl(out / "generated.jsonl")
        assert len(records) == 60 and len({r["id"] for r in records}) == 60  # nothing lost, nothing twice
        assert not (out / "failed.jsonl").exists() or not read_jsonl(out / "failed.jsonl")
        deadline = time.monotonic() + 60
        while not (_server_pids(port) and _answers(urls[0])) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _answers(urls[0]) and set(_server_pids(port)).isdisjoint(victims)  # a new server, same URL
        assert read_urls([str(urls_file)]) == urls
    finally:
        os.killpg(serve.pid, signal.SIGINT)
        serve.wait(timeout=120)
        err.close()
    assert "starting it again" in (tmp_path / "serve.log").read_text()
    assert not any(_server_pids(int(u.rsplit(":", 1)[1].split("/")[0])) for u in urls)  # every server stopped


def test_a_replica_that_cannot_start_is_one_line(tmp_path):
    pytest.importorskip("ray")
    proc = run_curate("serve", "--replicas", "2", "--urls-file", str(tmp_path / "u.txt"), "--server-command",
                      "{python} -c 'raise SystemExit(3)'", "--start-timeout", "30", timeout=300)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "exited with code 3 while starting" in proc.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "u.txt").exists()


@pytest.mark.parametrize("command, needle", [
    ("{python} -m server --port {port} {nosuch}", "unknown placeholder {nosuch}; known: {host}, {port}, {python}"),
    ("{python} -m server --port {port[0]}", "unknown placeholder {port[0]}"),
    ("{python} -m server --json '{\"a\": 1}' --port {port}", "unknown placeholder {\"a\"}"),
    ("{python} -m server --port {port", "expected '}' before end of string"),
    ("{python} -m server --name 'unclosed --port {port}", "No closing quotation"),
    ("   ", "no command to run"),  # issue 42, fault 7: these passed the check and failed inside Ray
    ("{python} -m server --port {port!r}", "{port!r} in"),
    ("{python} -m server --port {port:>99999999}", "{port:>99999999} in"),
])
def test_a_bad_server_command_is_one_line_before_ray_starts(tmp_path, monkeypatch, command, needle):
    from curate.core.executor import Executor
    from curate.llm import replicas

    def no_ray(executor):
        raise AssertionError("Ray started for a command that cannot be filled in")

    monkeypatch.setattr(replicas, "ray_for", no_ray)
    with pytest.raises(CurateError, match="^--server-command") as e:
        replicas.serve_replicas(2, command, tmp_path / "u.txt", Executor("ray", 2), 30)
    assert needle in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "u.txt").exists()


def test_serve_names_the_unknown_placeholder_on_the_command_line(tmp_path):
    from tests.helpers import assert_one_line_error

    started = time.monotonic()
    proc = run_curate("serve", "--replicas", "2", "--urls-file", str(tmp_path / "u.txt"), "--server-command",
                      "{python} -m http.server {port} {nosuch}", timeout=120)
    assert proc.returncode == 2
    assert_one_line_error(proc, "--server-command: unknown placeholder {nosuch}")
    assert time.monotonic() - started < 30 and not (tmp_path / "u.txt").exists()


def test_braces_written_twice_are_literal_in_the_server_command():
    from curate.llm.replicas import command_for

    assert command_for("{python} -m s --host {host} --port {port} --cfg '{{\"a\": 1}}'", "10.0.0.2", 4000,
                       "/py") == ["/py", "-m", "s", "--host", "10.0.0.2", "--port", "4000", "--cfg", '{"a": 1}']
