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
