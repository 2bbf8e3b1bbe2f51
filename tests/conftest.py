"""Fixtures shared across the test tree (which mirrors the package: tests/filter/ tests
curate/filter/, and so on). Helpers that are plain functions live in ``tests/helpers.py``."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def teacher():
    """The bundled MiniLM teacher without an embedding cache, loaded once for the whole run
    (a module may define its own ``teacher``, e.g. one with a cache, and it wins there)."""
    from curate.embed.teacher import Teacher

    return Teacher(cache=False)


@pytest.fixture
def srv(request):
    """A scripted OpenAI-compatible server for one test; a module sets
    ``FAKE_LLM_TIMEOUT_SLEEP`` for how long its 'timeout' fault sleeps (default 5 s)."""
    from tests.fake_llm_server import fake_llm_server

    with fake_llm_server(timeout_sleep=getattr(request.module, "FAKE_LLM_TIMEOUT_SLEEP", 5)) as s:
        yield s


@pytest.fixture(scope="session")
def demo(tmp_path_factory):
    """`make demo`'s pipeline (data/demo's 12 documents through every stage on the embedded
    default model), made once for the whole session: minutes with the bundled LLM, so the
    report's tests and the docs' sample checks (tests/test_doc_samples.py) share one run."""
    from tests.helpers import run_curate

    tmp = tmp_path_factory.mktemp("report-demo")
    out = tmp / "demo"
    proc = run_curate("pipeline", "data/demo", "--out", str(out), "-n", "12",
                      env={"CURATE_CACHE_DIR": str(tmp / "cache"), "NO_COLOR": "1", "COLUMNS": "200"}, timeout=3600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"out": out, "proc": proc, "tmp": tmp}


@pytest.fixture(scope="session")
def demo_filter_with_a_copy(demo, tmp_path_factory):
    """The demo's filter run again, by the real stage and recipe, on its generated records plus one
    whose query is its passage word for word: a drop the filter makes on every run. The demo's own
    drops depend on what the bundled LLM wrote (asked again for its copies, it can keep all 12),
    so the tests that show a drop take it from here."""
    from tests.helpers import read_jsonl, run_curate
    from tests.mine_helpers import write_jsonl

    gen = demo["out"] / "generate"
    records = read_jsonl(gen / "generated.jsonl")
    copied = dict(records[0], id="a-query-that-copies-its-passage", query=records[0]["positive"])
    tmp = tmp_path_factory.mktemp("demo-filter-copy")
    inp = write_jsonl(tmp / "records.jsonl", [*records, copied])
    out = tmp / "filter"
    proc = run_curate("filter", "--in", str(inp), "--recipe", "from-corpus", "--corpus", str(gen / "corpus.jsonl"),
                      "--out", str(out), env={"CURATE_CACHE_DIR": str(demo["tmp"] / "cache")})
    assert proc.returncode == 0, proc.stderr[-3000:]
    (drop,) = [d for d in read_jsonl(out / "rejected.jsonl") if d["id"] == copied["id"]]
    return {"out": out, "copied": copied, "drop": drop}
