"""The ``eval`` stage's identity: a light set's score is known by the precision it was made at, so
a run folder finished on two machines (``--precision auto`` is bf16 on a CPU with native bf16,
int8 on one without) scores again instead of holding two precisions."""

from __future__ import annotations

import json
from pathlib import Path

from curate.core.stage import STAGES, _identity, is_done, placed, run_stage
from tests.mine_helpers import write_beir, write_qrels

EVAL = STAGES.get("eval")


def _folder(tmp_path):
    corpus = {f"d{i}": f"passage {i} about {topic}" for i, topic in
              enumerate(["rivers", "volcanoes", "bees", "glaciers", "tides", "comets", "moss", "salt"] * 3)}
    queries = {f"q{i}": f"what about {topic}?" for i, topic in
               enumerate(["rivers", "volcanoes", "bees", "glaciers", "tides", "comets", "moss", "salt", "rain", "ice"])}
    folder = write_beir(tmp_path / "beir", corpus, queries, {})
    write_qrels(folder / "qrels" / "test.tsv", {f"q{i}": {f"d{i % 8}": 1} for i in range(10)})
    return folder


def _machine(monkeypatch, native: bool) -> None:
    monkeypatch.setattr("curate.evaluate.main.native_bf16", lambda: native)


def test_a_light_score_made_on_another_machine_is_made_again_at_this_ones_precision(tmp_path, monkeypatch):
    monkeypatch.setenv("CURATE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    folder, root = _folder(tmp_path), tmp_path / "runs"

    _machine(monkeypatch, native=True)
    first = placed(EVAL, EVAL.options(data=str(folder), out="", light=True), root)
    assert first.precision == "bf16"
    report, _ = run_stage(EVAL, first, resume=True, quiet=True)
    assert report["model"]["precision"] == "bf16"
    assert is_done(EVAL, first)

    _machine(monkeypatch, native=False)  # the same folder, finished on a CPU without native bf16
    second = placed(EVAL, EVAL.options(data=str(folder), out="", light=True), root)
    assert second.precision == "int8" and second.out != first.out
    assert not is_done(EVAL, second)  # not taken for the bf16 score
    report, _ = run_stage(EVAL, second, resume=True, quiet=True)
    assert report["model"]["precision"] == "int8"
    made = json.loads((Path(first.out) / "report.json").read_text())
    assert made["model"]["precision"] == "bf16"  # the other machine's score is left as it was

    pinned = EVAL.options(data=str(folder), out="", light=True, precision="bf16")  # a caller's choice wins
    assert placed(EVAL, pinned, root).out == first.out


def test_a_full_score_keeps_the_identity_it_had_before_precision_counted(tmp_path, monkeypatch):
    """fp32 everywhere: the field is left out, so folders scored before it existed are still done."""
    for native in (True, False):
        _machine(monkeypatch, native)
        opts = EVAL.options(data=str(tmp_path), out="", light=False)
        assert opts.precision is None
        assert "precision" not in _identity(EVAL, opts)["options"]
