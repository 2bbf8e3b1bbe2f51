"""The run the report's tests look at: `make demo`'s pipeline (data/demo's 12 documents through
every stage on the embedded default model), made once for the whole session."""

from __future__ import annotations

import pytest

from tests.helpers import run_curate


@pytest.fixture(scope="session")
def demo(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report-demo")
    out = tmp / "demo"
    proc = run_curate("pipeline", "data/demo", "--out", str(out), "-n", "12",
                      env={"CURATE_CACHE_DIR": str(tmp / "cache"), "NO_COLOR": "1", "COLUMNS": "200"}, timeout=3600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"out": out, "proc": proc, "tmp": tmp}
