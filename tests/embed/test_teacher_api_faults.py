"""What a served teacher (``--teacher openai:MODEL``) must refuse, with one line and a clean cache.

Vectors no teacher should give (zeros, true/false, strings, NaN, infinities, numbers whose
length overflows) never reach the cache; vectors of another length than the cache holds under
the name are one line saying so; a full disk under the cache is one line naming it; a server
that hangs stops the run within ``--teacher-timeout`` times a stated factor, however many
requests are queued; a URL no server could be at is refused before any request.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from curate.core.errors import CurateError
from curate.embed.kinds.api import DEFAULT_TIMEOUT, STALL_TIMEOUTS, ApiEmbedder
from curate.embed.cache import EmbeddingCache
from curate.embed.teacher import Teacher, checked_vectors
from tests.fake_llm_server import FakeLLMServer
from tests.helpers import REPO, assert_one_line_error, read_jsonl, run_curate


def _teacher(urls, tmp_path, **kw) -> Teacher:
    t = Teacher("openai:fake", base_urls=urls, batch_size=8, cache=EmbeddingCache(tmp_path / "cache"),
                query_prompt="q: ", doc_prompt="", **kw)
    cfg = t.source.embedder.cfg
    cfg.max_retries, cfg.backoff_base = 1, 0.01
    return t


def _pairs(path, n: int = 12, mark: str = "", every: bool = False):
    """``n`` query/positive pairs; ``mark`` in front of the first query (of every text with ``every``)."""
    rows = [{"query": f"{mark if i == 0 or every else ''}question {i} on subject {i}",
             "positive": f"{mark if every else ''}an answer about subject {i} and more"} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# -- 1. vectors no teacher should give -----------------------------------------------------


@pytest.mark.parametrize("action, says", [
    ("zeros", "vector 0 is all zeros"),
    ("bools", ", not a number"),
    ("strings", "not a list of numbers"),  # the client's reply check: retried, then one line
    ("nan", "vector 0 holds NaN"),
    ("inf", "vector 0 holds an infinite number"),
    ("huge", "too large for its length to be computed (up to 1e+300)"),
    ("huge30", "too large for its length to be computed (up to 1e+30)"),  # each fits a float32
])
def test_vectors_no_teacher_should_give_are_one_line_and_never_cached(tmp_path, action, says):
    with FakeLLMServer() as srv:
        t = _teacher([srv.base_url], tmp_path)
        t.encode_docs(["fine one"])
        texts = [f"FAULTS[{action}] bad", "another"]
        with pytest.raises(CurateError) as e:
            t.encode_docs(texts)
        msg = str(e.value)
        assert says in msg and "\n" not in msg, msg
        assert f"teacher openai:fake at {srv.base_url}" in msg
        assert t.cache.get_many("openai:fake", "", texts) == [None, None]
        assert t.cache.count("openai:fake", "") == 1
        t.close()


def test_the_check_takes_a_model_output_too():
    good = checked_vectors(np.eye(3, dtype=np.float32), 3, "teacher x")
    assert good.dtype == np.float32 and good.shape == (3, 3)
    with pytest.raises(CurateError, match="teacher x: vectors of bool values"):
        checked_vectors(np.ones((2, 3), dtype=bool), 2, "teacher x")
    with pytest.raises(CurateError, match="teacher x: 2 vectors of shape \\(3,\\) for 3 texts"):
        checked_vectors(np.ones((2, 3)), 3, "teacher x")
    with pytest.raises(CurateError, match="numbers too small"):
        checked_vectors([[1e-30, 0.0]], 1, "teacher x")
    assert not checked_vectors(np.zeros((1, 3), dtype=np.float32), 1, "teacher x", zeros_ok=True).any()


def test_a_server_answering_zeros_stops_mine_and_a_fixed_one_scores_afresh(tmp_path):
    """Once, zeros went into the cache and every later run scored 0.0 from there."""
    pairs = _pairs(tmp_path / "pairs.jsonl", mark="FAULTS[zeros,ok] ")
    env = {"CURATE_CACHE_DIR": str(tmp_path / "cache")}
    args = ["mine", "--pairs", str(pairs), "-k", "2", "--method", "naive", "--positive-top", "0",
            "--teacher", "openai:fake"]
    with FakeLLMServer(embed_dim=32) as srv:
        proc = run_curate(*args, "--out", str(tmp_path / "m"), "--teacher-base-url", srv.base_url, env=env)
        assert_one_line_error(proc, "teacher openai:fake at " + srv.base_url, "is all zeros")
        assert proc.returncode == 2
        assert not (tmp_path / "m" / "mined.jsonl").exists()
        proc = run_curate(*args, "--out", str(tmp_path / "m2"), "--teacher-base-url", srv.base_url, env=env)
        assert proc.returncode == 0, proc.stderr  # the server answers this text properly now
    recs = read_jsonl(tmp_path / "m2" / "mined.jsonl")
    scores = [n["teacher_score"] for r in recs for n in r["negatives"]]
    assert len(recs) == 12 and scores and all(s != 0.0 for s in scores)


# -- 2. another length than the cache holds under the name -----------------------------------


@pytest.mark.parametrize("prompt", ["", "q: "])
def test_another_length_than_the_cache_holds_is_one_line(tmp_path, prompt):
    """The cache holds 8-d document vectors for openai:fake; a 16-d model under that name must
    not add its vectors, for the documents' prompt or the queries'."""
    with FakeLLMServer() as srv:
        t = _teacher([srv.base_url], tmp_path)
        t.encode_docs(["first text"])
        t.close()
    with FakeLLMServer(embed_dim=16) as other:
        t = _teacher([other.base_url], tmp_path)
        with pytest.raises(CurateError) as e:
            t.encode(["texts the cache", "has not seen"], prompt)
        msg = str(e.value)
        assert "\n" not in msg and "16-d vectors" in msg and "holds 8-d vectors under the name openai:fake" in msg
        assert str(tmp_path / "cache") in msg and "CURATE_CACHE_DIR" in msg
        assert t.cache.get_many("openai:fake", prompt, ["texts the cache"]) == [None]
        t.close()


def test_the_cache_itself_refuses_another_length_with_one_line(tmp_path):
    cache = EmbeddingCache(tmp_path / "c")
    cache.put_many("m", "", ["a"], np.ones((1, 4)))
    with pytest.raises(CurateError, match="holds 4-d vectors for m .* not 8-d: .*CURATE_CACHE_DIR"):
        cache.put_many("m", "", ["b"], np.ones((1, 8)))
    cache.put_many("m", "q", ["a"], np.ones((1, 4)))
    cache._db.execute("DELETE FROM vectors WHERE space = (SELECT id FROM spaces WHERE prompt = 'q')")
    cache.put_many("m", "q", ["b"], np.ones((1, 8)))  # a space left empty (a write that failed) takes the new length
    assert cache.dim_of("m") == 4 and cache.dim_of("other") is None


# -- 3. a full disk under the cache ----------------------------------------------------------


class _FullDisk:
    """A connection whose writes fail as SQLite's do when the disk is full."""

    def __init__(self, db):
        self._db = db

    def execute(self, sql, *args):
        if sql.lstrip().upper().startswith(("INSERT", "UPDATE")):
            raise sqlite3.OperationalError("database or disk is full")
        return self._db.execute(sql, *args)

    def executemany(self, sql, *args):
        raise sqlite3.OperationalError("database or disk is full")

    def __getattr__(self, name):
        return getattr(self._db, name)


def test_a_full_disk_under_the_cache_is_one_line_naming_it(tmp_path):
    with FakeLLMServer() as srv:
        t = _teacher([srv.base_url], tmp_path)
        t.encode_docs(["fine one"])
        t.cache._db = _FullDisk(t.cache._db)
        with pytest.raises(CurateError) as e:
            t.encode_docs(["a new text"])
        msg = str(e.value)
        assert "database or disk is full" in msg
        assert f"embedding cache in {tmp_path / 'cache'}" in msg and "\n" not in msg
        t.cache._db = t.cache._db._db
        assert t.cache.get_many("openai:fake", "", ["a new text"]) == [None]
        t.close()


_LIMITED = ("import resource, runpy, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
            "limit = int(sys.argv.pop(1)); resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)); "
            "sys.argv[0] = 'curate'; runpy.run_module('curate', run_name='__main__', alter_sys=True)")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE as on Linux")
def test_mine_on_a_full_disk_under_the_cache_is_one_line(tmp_path):
    """Files may grow to 64 KiB in this process: the cache's first batch of 4096-d vectors does not fit."""
    pairs = _pairs(tmp_path / "pairs.jsonl")
    cache = tmp_path / "cache"
    EmbeddingCache(cache / "embeddings").close()  # its tables exist: only the vectors need room
    with FakeLLMServer(embed_dim=4096) as srv:
        proc = subprocess.run(
            [sys.executable, "-c", _LIMITED, str(64 * 1024), "mine", "--pairs", str(pairs), "--out", str(tmp_path / "m"),
             "-k", "2", "--teacher", "openai:fake", "--teacher-base-url", srv.base_url],
            capture_output=True, text=True, timeout=600, cwd=REPO, check=False,
            env={**os.environ, "CURATE_CACHE_DIR": str(cache)})
    assert_one_line_error(proc, f"cannot write to the embedding cache in {cache / 'embeddings'}")
    assert proc.returncode == 2
    assert not (tmp_path / "m" / "mined.jsonl").exists()


# -- 4. a server that hangs --------------------------------------------------------------------


def test_the_timeout_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("CURATE_TEACHER_TIMEOUT", raising=False)
    assert ApiEmbedder("openai:fake", ["http://127.0.0.1:9/v1"]).cfg.timeout == DEFAULT_TIMEOUT
    assert DEFAULT_TIMEOUT * STALL_TIMEOUTS <= 300  # a hung server stops a run within five minutes
    monkeypatch.setenv("CURATE_TEACHER_TIMEOUT", "2.5")
    assert ApiEmbedder("openai:fake", ["http://127.0.0.1:9/v1"]).cfg.timeout == 2.5
    monkeypatch.setenv("CURATE_TEACHER_TIMEOUT", "soon")
    with pytest.raises(CurateError, match="CURATE_TEACHER_TIMEOUT='soon'"):
        ApiEmbedder("openai:fake", ["http://127.0.0.1:9/v1"])


def test_a_hung_server_stops_the_encoding_in_a_bounded_time(tmp_path, monkeypatch):
    """40 requests queued 8 at a time behind a server that never answers: one line after 3
    timeouts, not 5 rounds of 7 attempts each."""
    monkeypatch.setenv("CURATE_TEACHER_TIMEOUT", "0.5")
    with FakeLLMServer(timeout_sleep=60) as srv:
        t = Teacher("openai:fake", base_urls=[srv.base_url], batch_size=1, cache=EmbeddingCache(tmp_path / "c"))
        started = time.monotonic()
        pool = ThreadPoolExecutor(1)  # not waited for: a hang must fail the test, not hold it
        job = pool.submit(t.encode_docs, [f"FAULTS[timeout] text {i}" for i in range(40)])
        pool.shutdown(wait=False)
        with pytest.raises(CurateError) as e:
            job.result(timeout=30)
        assert time.monotonic() - started < 10
        msg = str(e.value)
        assert f"teacher openai:fake at {srv.base_url}: no answer in 1.5 s" in msg and "--teacher-timeout" in msg
        t.close()


def test_mine_takes_a_teacher_timeout_and_a_hung_server_is_one_line(tmp_path):
    pairs = _pairs(tmp_path / "pairs.jsonl", mark="FAULTS[timeout] ", every=True)
    with FakeLLMServer(timeout_sleep=120) as srv:
        started = time.monotonic()
        proc = run_curate("mine", "--pairs", str(pairs), "--out", str(tmp_path / "m"), "--teacher", "openai:fake",
                          "--teacher-base-url", srv.base_url, "--teacher-timeout", "1",
                          env={"CURATE_CACHE_DIR": str(tmp_path / "cache")}, timeout=120)
        took = time.monotonic() - started
    assert_one_line_error(proc, f"teacher openai:fake at {srv.base_url}: no answer in 3 s")
    assert proc.returncode == 2 and took < 60
    assert not (tmp_path / "m" / "mined.jsonl").exists()


@pytest.mark.parametrize("command", ["mine", "filter", "eval", "convert", "ablate", "pipeline"])
def test_every_command_with_a_teacher_takes_a_teacher_timeout(command):
    proc = run_curate(command, "--help")
    assert proc.returncode == 0 and "--teacher-timeout SECONDS" in proc.stdout


# -- 5. a URL no server could be at -----------------------------------------------------------


@pytest.mark.parametrize("url", ["notaurl", "http://", "ftp://127.0.0.1/v1", "http://127.0.0.1:port/v1",
                                 "127.0.0.1:8000/v1"])
def test_a_url_no_server_could_be_at_is_refused_at_once(url):
    """(A value without ``://`` may also be read as a file of URLs, and refused as a missing one.)"""
    started = time.monotonic()
    with pytest.raises(CurateError, match="is not a server's URL|no such file; give a server URL") as e:
        Teacher("openai:fake", base_urls=[url], cache=False)
    assert "\n" not in str(e.value) and time.monotonic() - started < 1


@pytest.mark.parametrize("url, says", [("notaurl", "notaurl"), ("http://", "'http://' is not a server's URL")])
def test_mine_refuses_a_garbage_teacher_url_at_once(tmp_path, url, says):
    pairs = _pairs(tmp_path / "pairs.jsonl")
    started = time.monotonic()
    proc = run_curate("mine", "--pairs", str(pairs), "--out", str(tmp_path / "m"), "--teacher", "openai:fake",
                      "--teacher-base-url", url, env={"CURATE_CACHE_DIR": str(tmp_path / "cache")})
    assert_one_line_error(proc, says)
    assert proc.returncode == 2 and time.monotonic() - started < 20
