"""An empty qrels or queries file in a BEIR folder (issue 32): ``curate mine`` names the empty
file, not just "no queries to mine"."""

from __future__ import annotations

import pytest

from curate.core.errors import CurateError
from curate.mine.inputs import load_beir_input
from tests.helpers import run_curate
from tests.mine_helpers import write_beir


@pytest.fixture
def beir(tmp_path):
    return write_beir(tmp_path / "beir", {"d1": "alpha beta", "d2": "gamma delta"},
                      {"q1": "alpha?", "q2": "gamma?"}, {"q1": {"d1": 1}, "q2": {"d2": 1}})


@pytest.mark.parametrize("empty, named", [
    ("qrels/train.tsv", "qrels/train.tsv: no qrels lines"),
    ("queries.jsonl", "queries.jsonl: no queries in the file"),
])
def test_the_empty_file_is_named(beir, empty, named):
    (beir / empty).write_text("query-id\tcorpus-id\tscore\n" if empty.endswith(".tsv") else "")
    with pytest.raises(CurateError) as e:
        load_beir_input(beir, "train")
    assert str(e.value) == f"{beir / named}: no queries to mine"
    proc = run_curate("mine", "--data", str(beir), "--out", str(beir.parent / "out"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [f"curate: error: {beir / named}: no queries to mine"], \
        "one line, no warning of dropped qrels lines before it"


def test_a_qrels_file_given_by_path_is_the_one_named(beir, tmp_path):
    other = tmp_path / "picked.tsv"
    other.write_text("")
    with pytest.raises(CurateError, match=f"^{other}: no qrels lines"):
        load_beir_input(beir, "train", other)
