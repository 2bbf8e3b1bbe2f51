"""``curate eval`` on a BEIR folder whose queries file is empty (issue 32): the queries file is
named, not the qrels (whose lines were all dropped for want of their queries)."""

from __future__ import annotations

import pytest

from curate.core.errors import CurateError
from curate.evaluate.main import load_data
from tests.helpers import run_curate
from tests.mine_helpers import write_beir


def test_an_empty_queries_file_is_named_not_the_qrels(tmp_path):
    beir = write_beir(tmp_path / "beir", {"d1": "alpha beta", "d2": "gamma delta"}, {"q1": "alpha?"},
                      {"q1": {"d1": 1}}, split="test")
    (beir / "queries.jsonl").write_text("")
    with pytest.raises(CurateError) as e:
        load_data(str(beir), "test")
    assert str(e.value) == f"{beir / 'queries.jsonl'}: no queries in the file: nothing to evaluate"
    proc = run_curate("eval", "--data", str(beir))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"curate: error: {beir / 'queries.jsonl'}: no queries in the file: nothing to evaluate"], \
        "one line: no warning that every qrels line was dropped comes before it"
