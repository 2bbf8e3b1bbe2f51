"""`curate generate --from-corpus`: a query that copies its passage is asked for again
(``--copy-retries``), against the scripted server; the real bundled model's copies are measured in
bench/results (zero-label grids)."""

from __future__ import annotations

import re
from collections import Counter

from curate.core.records import Record
from curate.dedup.copies import containment
from tests.fake_llm_server import fake_llm_server
from tests.generate.test_from_corpus import _docs, _generate
from tests.helpers import read_jsonl

PASSAGE = re.compile(r"Passage:\s*(.*?)\s*Write one query", re.S)


def _passage(body: dict) -> str:
    return PASSAGE.search(body["messages"][-1]["content"]).group(1)


def _server(copies_before_real: dict[str, int]):
    """A server that copies the passage (its first eight words, a word added) the first N times
    it is asked about it (N by the passage's first word), then writes a real query."""
    asked: Counter = Counter()

    def answer(body):
        passage = _passage(body)
        asked[passage] += 1
        words = passage.split()
        if asked[passage] <= copies_before_real.get(words[0], 0):
            return {"query": " ".join(words[:8] + [f"variant{asked[passage]}"])}
        return {"query": "which force sets the rhythm of this phenomenon"}

    return fake_llm_server(responder=answer), asked


def test_a_copied_query_is_asked_for_again_and_the_real_one_kept(tmp_path):
    docs = _docs(tmp_path / "docs")
    # Ocean tides...: copied once then real; A qubit...: copied every time; Aspirin...: real at once
    srv_cm, asked = _server({"Ocean": 1, "A": 99})
    with srv_cm as srv:
        proc = _generate(srv.base_url, docs, tmp_path / "out", "-n", "3", "--copy-retries", "2")
        assert proc.returncode == 0, proc.stderr
    records = {r["positive_id"].split("#")[0]: Record.from_dict(r) for r in read_jsonl(tmp_path / "out" / "generated.jsonl")}
    assert set(records) == {"tides", "qubits", "aspirin"}
    by_first = {p.split()[0]: n for p, n in asked.items()}
    assert by_first == {"Ocean": 2, "A": 3, "Aspirin": 1}, "asked again only for copies, at most 2 more times"

    tides = records["tides"]
    assert tides.query == "which force sets the rhythm of this phenomenon", "the second, real query is kept"
    first = tides.meta["copy"]["containment"][0]
    assert first >= 0.5 and tides.meta["copy"]["containment"][1] < 0.5 and tides.meta["copy"]["kept"] == 1
    assert first == round(containment(" ".join(tides.positive.split()[:8] + ["variant1"]), tides.positive)[0], 4)
    qubits = records["qubits"]
    assert qubits.meta["copy"]["kept"] == 0 and len(qubits.meta["copy"]["containment"]) == 3, \
        "every answer copied: the least copying (the first of equals) is kept, for the filter to judge"
    assert "variant1" in qubits.query
    assert "copy" not in records["aspirin"].meta, "a query that did not copy leaves no trace"
    from curate.core.stage import report_of

    counts = report_of(tmp_path / "out")
    fam = counts["families"]["from-corpus"] if "families" in counts else counts
    assert fam["copies_asked_again"] == 2 and fam["copies_left"] == 1


def test_by_default_the_first_answer_is_kept(tmp_path):
    docs = _docs(tmp_path / "docs")
    srv_cm, asked = _server({"Ocean": 1})
    with srv_cm as srv:
        proc = _generate(srv.base_url, docs, tmp_path / "out", "-n", "3")
        assert proc.returncode == 0, proc.stderr
    assert sum(asked.values()) == 3, "one request per passage"
    tides = next(Record.from_dict(r) for r in read_jsonl(tmp_path / "out" / "generated.jsonl")
                 if r["positive_id"].startswith("tides"))
    assert "variant1" in tides.query and "copy" not in tides.meta
