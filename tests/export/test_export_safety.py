"""What an export must never write, in any format.

* An id holding a TAB, a line break or another control character: BEIR's qrels would get a
  4-column line and a split one, which ``curate eval`` then refuses. Such an id is refused on
  read, naming the file and line, before anything is written.
* A negative that is a copy of one of its record's positives (whitespace aside): dropped,
  counted on the card and in ``rejected.jsonl``, and never borrowed by a row that has none.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curate.export.formats.common import fill_negatives
from curate.export.rows import ExportRow
from tests.helpers import assert_one_line_error, read_jsonl, run_curate
from tests.mine_helpers import write_jsonl

ENV = {"NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200", "CURATE_DEBUG": ""}
TOPICS = ["tides", "glaciers", "volcanoes", "honeybees", "lighthouses", "vaccines", "comets", "deserts"]


def _record(k: int, **fields) -> dict:
    topic = TOPICS[k % len(TOPICS)]
    rec = {"id": f"rec-{k}", "task_type": "short-long", "task": "Given a question, find the passage that answers it",
           "query": f"what do we know about {topic} number {k}",
           "positive": f"A passage about {topic} number {k}: how they form, change and end.",
           "positive_id": f"doc-{k}",
           "negatives": [{"text": f"A passage about something else ({topic} {k} and {j}).", "level": j,
                          "doc_id": f"neg-{k}-{j}"} for j in (1, 2, 3)]}
    rec.update(fields)
    return rec


def _same(text: str) -> str:
    return " ".join(text.split())


# ---------------------------------------------------------------------------- ids


def _bad_id(field: str, value: str):
    """Record 2 of the file, with ``value`` as one of its ids."""
    def make(k: int) -> dict:
        rec = _record(k)
        if field == "negative doc_id":
            rec["negatives"][1]["doc_id"] = value
        elif field == "further positive doc_id":
            rec["positives"] = [{"text": "Another passage that answers it.", "doc_id": value}]
        elif field == "query_id":
            rec["meta"] = {"query_id": value}
        else:
            rec[field] = value
        return rec
    return make


@pytest.mark.parametrize("field, value, needle, fmt", [
    ("positive_id", "doc\t7", "'positive_id'", "beir"),
    ("id", "rec\n2", "'id'", "sentence-transformers"),
    ("negative doc_id", "neg\r9", "'doc_id'", "tevatron"),
    ("further positive doc_id", "doc\u2028x", "'doc_id'", "all"),
    ("query_id", "q\t1", "'query_id'", "beir"),
])
def test_an_id_with_a_control_character_is_refused_naming_file_and_line(tmp_path, field, value, needle, fmt):
    records = [_record(0), _bad_id(field, value)(1), _record(2)]
    src = write_jsonl(tmp_path / "in" / "records.jsonl", records)
    out = tmp_path / "export"
    proc = run_curate("export", "--in", str(src), "--out", str(out), "--format", fmt, "--dev-fraction", "0",
                      env=ENV)
    assert proc.returncode == 2
    assert_one_line_error(proc, f"{src}:2", needle, "control character")
    assert not out.exists() or not [p for p in out.rglob("*") if p.is_file()], "nothing written"


# ---------------------------------------------------------------------------- negatives equal to a positive


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    """Records with copies of their positives among their negatives, exported in every format.

    rec-0: its first negative is its positive, spaced and broken differently.
    rec-1: a negative copies its further (second) positive.
    rec-2: its only negative copies its positive: it keeps none and borrows from its batch,
           where rec-3 has rec-2's positive (spaced differently) as a negative of its own.
    """
    tmp = tmp_path_factory.mktemp("copies")
    recs = [_record(k) for k in range(8)]
    recs[0]["negatives"][0]["text"] = "  " + recs[0]["positive"].replace(" ", "   ", 3) + "\n"
    recs[1]["positives"] = [{"text": "A second passage that answers rec 1.", "doc_id": "doc-1b"}]
    recs[1]["negatives"][2]["text"] = "A second  passage that answers rec 1. "
    recs[2]["negatives"] = [{"text": recs[2]["positive"].replace(": ", ":\t"), "level": 1}]
    recs[3]["negatives"][0]["text"] = recs[2]["positive"].replace(" ", "  ")
    src = write_jsonl(tmp / "in" / "records.jsonl", recs)
    out = tmp / "export"
    proc = run_curate("export", "--in", str(src), "--out", str(out), "--format", "all", "--dev-fraction", "0",
                      "--batch-size", "8", "--negatives-per-row", "all", env=ENV)
    assert proc.returncode == 0, proc.stderr
    positives = {r["id"]: {_same(r["positive"]), *(_same(p["text"]) for p in r.get("positives", []))} for r in recs}
    return {"out": out, "proc": proc, "records": recs, "positives": positives}


def _negatives_in(value, under_negative: bool = False) -> list[str]:
    """Every string found under a key that names negatives (neg, negatives, negative_3, neg_doc,
    negative_passages), a passage's title and text joined as its reader joins them."""
    if isinstance(value, dict):
        if under_negative and "text" in value:
            return [" ".join(t for t in (value.get("title"), value["text"]) if t)]
        return [s for k, v in value.items() for s in _negatives_in(v, under_negative or "neg" in k.lower())]
    if isinstance(value, list):
        return [s for v in value for s in _negatives_in(v, under_negative)]
    return [value] if under_negative and isinstance(value, str) else []


def _rows_of(path: Path) -> list[dict]:
    if path.suffix == ".parquet":
        return pq.read_table(path).to_pylist()
    if path.suffix == ".jsonl":
        return read_jsonl(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, list) else [data]


def _strings(value) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


def test_no_format_writes_a_negative_equal_to_its_positive(copies):
    out, every_positive = copies["out"], set().union(*copies["positives"].values())
    by_query = {r["query"]: copies["positives"][r["id"]] for r in copies["records"]}
    checked = set()
    for path in sorted(out.rglob("*")):
        if path.suffix not in (".parquet", ".jsonl", ".json") or path.name.startswith(".") or path.name in (
                "report.json", "run.json", "rejected.jsonl"):
            continue
        fmt = path.relative_to(out).parts[0]
        if fmt == "beir":
            continue  # no negatives as such: the corpus is checked below
        rows = _rows_of(path)
        for row in rows:
            (own,) = [by_query[q] for q in by_query if q in _strings(row)]  # the row's record, by its query
            for neg in _negatives_in(row):
                assert _same(neg) not in own, f"{path.relative_to(out)}: a positive of the row as its negative"
        if fmt != "hf":  # the others' trainers need a negative on every row: rec-2 borrowed
            assert all(_negatives_in(row) for row in rows), path.relative_to(out)
        checked.add(fmt)
    assert checked == {"sentence-transformers", "hf", "flagembedding", "tevatron", "nemo", "nemo-automodel"}
    corpus = read_jsonl(out / "beir" / "corpus.jsonl")
    texts = [_same(" ".join(t for t in (d["title"], d["text"]) if t)) for d in corpus]
    for text in every_positive:
        assert texts.count(text) == 1, "a positive is one corpus document, never also a distractor"


def test_the_dropped_copies_are_counted_on_the_card_and_in_the_drop_log(copies):
    out, proc = copies["out"], copies["proc"]
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    (entry,) = [f for f in report["filters"] if f["step"] == "negative-equals-positive"]
    assert entry["negatives_dropped"] == 3 and "records_dropped" not in entry
    drops = [d for d in read_jsonl(out / "rejected.jsonl") if d["reason"] == "negative-equals-positive"]
    assert sorted(d["id"] for d in drops) == ["rec-0", "rec-1", "rec-2"]
    assert all(d["target"] == "negative" and d["stage"] == "export" for d in drops)
    assert "dropped 3 negatives: negative-equals-positive" in proc.stdout + proc.stderr
    assert report["counts"]["train"] == len(copies["records"]), "every record still exported"


def test_a_row_without_negatives_never_borrows_a_copy_of_its_positive():
    def row(k: int, positive: str, negatives: list[str]) -> ExportRow:
        return ExportRow(record_id=f"r{k}", split="train", task_type="short-long", task="t", query=f"q{k}",
                         query_text=f"q{k}", positive=positive, negatives=negatives)

    rows = [row(0, "The tide comes in twice a day.", []),
            row(1, "Glaciers move slowly.", [" The tide  comes in\ttwice a day. ", "Volcanoes erupt."])]
    negs, filled = fill_negatives(rows, [list(r.negatives) for r in rows], 2)
    assert filled == 1
    assert negs[0] == ["Volcanoes erupt.", "Volcanoes erupt."]
