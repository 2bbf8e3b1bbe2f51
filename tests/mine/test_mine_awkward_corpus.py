"""Awkward corpora mine the same negatives (issue 52): blank, whitespace-only and duplicate
documents, and a document whose text is a query, added to a real SciFact slice.

Before the fix a blank document became one of every query's positives (its near-zero cosine the
"lowest positive" every threshold is anchored at), so every kept negative came from the bottom of
the teacher's ranking while the run exited 0. The property: the same queries mined against the
corpus with and without such documents give the same negatives, the same scores and the same
report; and the report says where in the ranking the kept negatives sit, with a warning when most
of them are far below their positive.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from curate.embed.cache import EmbeddingCache
from curate.embed.teacher import Teacher
from curate.mine.main import run_mine, summary
from curate.mine.options import MineOptions
from tests.helpers import SHARED_DATA, read_jsonl, run_curate
from tests.mine_helpers import scifact_slice, write_jsonl

pytestmark = pytest.mark.skipif(not (SHARED_DATA / "scifact" / "corpus.jsonl").exists(),
                                reason="needs the SciFact copy in ../shared/data")

# what a report says of the corpus itself: the only part an awkward corpus may change
CORPUS_KEYS = ("corpus", "timings", "wall_seconds", "teachers", "input")


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return scifact_slice(tmp_path_factory.mktemp("slice") / "scifact", queries_a_split=12, extra_docs=120)


@pytest.fixture(scope="module")
def cached_teacher(tmp_path_factory):
    """The bundled MiniLM with a cache: a text gets one vector in every run (no batch noise), so a
    difference between two runs is the miner's, not BLAS's."""
    return Teacher(cache=EmbeddingCache(tmp_path_factory.mktemp("vectors")))


def _variant(base: Path, dest: Path, extra: list[dict]) -> Path:
    dest = dest / base.name  # the folder's name is part of each record's id
    shutil.copytree(base, dest)
    lines = (base / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    # awkward lines go first and last: their place in the file must not matter either
    head, tail = extra[: len(extra) // 2], extra[len(extra) // 2:]
    body = [json.dumps(e) for e in head] + lines + [json.dumps(e) for e in tail]
    (dest / "corpus.jsonl").write_text("\n".join(body) + "\n", encoding="utf-8")
    return dest


def _mine(folder: Path, out: Path, teacher, scores: str) -> tuple[list[dict], dict]:
    report = run_mine(MineOptions(data=str(folder), split="train", out=str(out), scores=scores, plots=False),
                      teachers=[teacher])
    return list(read_jsonl(out / "mined.jsonl")), report


def _negatives(rec: dict) -> list[tuple]:
    return [(n["doc_id"], round(n["teacher_score"], 6)) for n in rec["negatives"]]


def _first_docs(base: Path) -> tuple[dict, str]:
    corpus = list(read_jsonl(base / "corpus.jsonl"))
    query = next(iter(read_jsonl(base / "queries.jsonl")))["text"]
    return corpus[5], query


def _evidence(base: Path) -> list[tuple[str, str]]:
    """Each train query of the slice with the text of its first labelled document."""
    corpus = {d["_id"]: d for d in read_jsonl(base / "corpus.jsonl")}
    queries = {q["_id"]: q["text"] for q in read_jsonl(base / "queries.jsonl")}
    evidence: dict[str, str] = {}
    for line in (base / "qrels" / "train.tsv").read_text().splitlines()[1:]:
        q, d, _ = line.split("\t")
        evidence.setdefault(q, (corpus[d].get("title", "") + " " + corpus[d]["text"]).strip())
    return [(queries[q], text) for q, text in evidence.items()]


@pytest.mark.parametrize("scores", ["teacher", "hybrid"])
def test_blank_whitespace_and_duplicate_documents_change_nothing(base, cached_teacher, tmp_path, scores):
    some_doc, _ = _first_docs(base)
    awkward = [{"_id": "blank-1", "title": "", "text": ""},
               {"_id": "spaces", "title": "  ", "text": " \n\t "},
               {"_id": "copy-of-5", "title": "", "text": some_doc["text"]},
               {"_id": "blank-2", "text": ""}]
    plain_recs, plain = _mine(base, tmp_path / "plain", cached_teacher, scores)
    odd_recs, odd = _mine(_variant(base, tmp_path / "odd", awkward), tmp_path / "odd-out", cached_teacher, scores)

    assert plain_recs and [r["id"] for r in odd_recs] == [r["id"] for r in plain_recs]
    for a, b in zip(plain_recs, odd_recs):
        assert _negatives(b) == _negatives(a), f"query {a['query']!r} mined other negatives"
        assert b["teacher"]["positive"] == pytest.approx(a["teacher"]["positive"], abs=1e-6)
        assert [n["mine_rank"] for n in b["negatives"]] == [n["mine_rank"] for n in a["negatives"]]
    same = {k: v for k, v in plain.items() if k not in CORPUS_KEYS}
    assert {k: v for k, v in odd.items() if k not in CORPUS_KEYS} == same
    assert odd["corpus"]["blank_documents_left_out"] == 3 and odd["corpus"]["documents"] == plain["corpus"]["documents"]
    # the summary says the same of the negatives, and names the blank documents
    extra = [line for line in summary(odd, tmp_path) if line not in summary(plain, tmp_path)]
    assert [line for line in extra if not line.startswith(("wrote", "teacher "))] == \
        ["  3 corpus documents with no text left out of the pool"]


@pytest.mark.parametrize("scores", ["teacher", "hybrid"])
def test_a_document_that_is_a_query_is_never_its_negative(base, cached_teacher, tmp_path, scores):
    """Through the teacher's pool and the hybrid's candidate pool alike (``hybrid_scores``' left-out
    set): the same negatives, never the echo."""
    _, query = _first_docs(base)
    plain_recs, _ = _mine(base, tmp_path / "plain", cached_teacher, scores)
    echo_recs, _ = _mine(_variant(base, tmp_path / "echo", [{"_id": "echo", "text": query}]),
                         tmp_path / "echo-out", cached_teacher, scores)
    if scores == "teacher":
        assert [_negatives(r) for r in echo_recs] == [_negatives(r) for r in plain_recs]
    else:  # the echo is a real document: BM25's statistics (IDF, mean length) count it, so scores move a little
        assert [[d for d, _ in _negatives(r)] for r in echo_recs] == [[d for d, _ in _negatives(r)] for r in plain_recs]
    echoed = next(r for r in echo_recs if r["query"] == query)
    assert "echo" not in {n["doc_id"] for n in echoed["negatives"]}


def test_the_report_says_where_the_negatives_sit(base, cached_teacher, tmp_path):
    _, report = _mine(base, tmp_path / "out", cached_teacher, "teacher")
    ranks = report["negative_ranks"]
    assert ranks["queries"] == report["queries_out"] and 1 <= ranks["min"] <= ranks["median"] <= ranks["max"]
    assert ranks["far_below_positive"] < ranks["queries"] / 2, "SciFact's negatives sit near their positives"
    lines = summary(report, tmp_path)
    assert any(line.startswith("kept negatives rank ") for line in lines)
    assert not any(line.startswith("warning:") for line in lines)


def test_a_run_whose_negatives_all_come_from_the_bottom_says_so(base, tmp_path):
    """The filed fault's mechanism with a cause that is the input's: each query's pair lists its
    real evidence first and, as a second positive, a sentence unrelated to it. The unrelated one is
    the lowest positive every threshold is anchored at, so only documents scoring below it pass,
    from the bottom of the ranking, while the record's own positive ranks near the top. Through
    the CLI: exit 0 (nothing is wrong with the input's form), and one warning line."""
    pairs = write_jsonl(tmp_path / "pairs.jsonl", (
        {"query": query, "positive": [text, f"Opening hours of the harbour ferry on public holiday {i}."]}
        for i, (query, text) in enumerate(_evidence(base))))
    proc = run_curate("mine", "--pairs", str(pairs), "--corpus", str(base / "corpus.jsonl"),
                      "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    ranks = report["negative_ranks"]
    assert ranks["far_below_positive"] > ranks["queries"] / 2
    warning = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and f"{ranks['far_below_positive']} of {ranks['queries']} queries" in warning[0]
    # and it names this cause, not the corpus: the anchor is the unrelated second positive
    assert ranks["far_below_anchored_lower"] == ranks["far_below_positive"]
    assert "threshold sits at another labelled positive" in warning[0] and "--anchor record" in warning[0]
    # the advice works: measured from each record's own positive, the negatives sit near it again
    proc = run_curate("mine", "--pairs", str(pairs), "--corpus", str(base / "corpus.jsonl"),
                      "--out", str(tmp_path / "own"), "--anchor", "record")
    assert proc.returncode == 0, proc.stderr
    own = json.loads((tmp_path / "own" / "report.json").read_text())["negative_ranks"]
    assert own["far_below_positive"] < own["queries"] / 2 and own["far_below_anchored_lower"] == 0
    assert not [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("warning:")]
    # the report page a person opens says it too, beside the ranks
    from curate.report.page import write_report

    page = write_report(tmp_path / "out").read_text(encoding="utf-8")
    assert f"{ranks['far_below_positive']} of {ranks['queries']} queries keep negatives more than" in page
    assert "kept negatives rank" in page or "negatives&#39; ranks" in page or "negatives' ranks" in page


def test_blank_documents_through_the_cli(base, tmp_path):
    """The filed case itself, as a user runs it: blank documents in the corpus, `curate mine --data`."""
    some_doc, _ = _first_docs(base)
    folder = _variant(base, tmp_path / "odd", [{"_id": "b1", "text": ""}, {"_id": "b2", "title": "", "text": "  "}])
    proc = run_curate("mine", "--data", str(folder), "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["corpus"]["blank_documents_left_out"] == 2
    assert "positive scores below every candidate" not in report["short_reasons"]
    assert report["negative_ranks"]["far_below_positive"] < report["negative_ranks"]["queries"] / 2
    assert "2 corpus documents with no text left out of the pool" in proc.stdout + proc.stderr
    for rec in read_jsonl(tmp_path / "out" / "mined.jsonl"):
        assert {"b1", "b2"}.isdisjoint({n["doc_id"] for n in rec["negatives"]})
        # the thresholds' anchor is one of the query's own positives, not a blank document's score
        assert rec["teacher"]["positive"] == pytest.approx(min(rec["teacher"]["positives"]))


def test_blank_documents_change_nothing_when_pairs_meet_a_corpus_file(base, cached_teacher, tmp_path):
    """The other way into mine (``--pairs`` with ``--corpus``, ``Corpus.from_file``): the same
    negatives, positive scores and ranks with blank and whitespace-only lines in the corpus file."""
    pairs = write_jsonl(tmp_path / "pairs.jsonl", ({"query": query, "positive": text} for query, text in _evidence(base)))
    plain = _variant(base, tmp_path / "plain", [])
    odd = _variant(base, tmp_path / "odd", [{"_id": "b1", "text": ""}, {"_id": "b2", "title": " ", "text": "\n "}])

    def mined(folder: Path, out: str) -> tuple[list[dict], dict]:
        report = run_mine(MineOptions(pairs=str(pairs), corpus=str(folder / "corpus.jsonl"), out=str(tmp_path / out),
                                      plots=False), teachers=[cached_teacher])
        return list(read_jsonl(tmp_path / out / "mined.jsonl")), report

    plain_recs, _ = mined(plain, "plain-out")
    odd_recs, odd_report = mined(odd, "odd-out")
    assert plain_recs and len(odd_recs) == len(plain_recs)
    assert odd_report["corpus"]["blank_documents_left_out"] == 2
    for a, b in zip(plain_recs, odd_recs):
        assert _negatives(b) == _negatives(a), f"query {a['query']!r} mined other negatives"
        assert b["teacher"]["positive"] == pytest.approx(a["teacher"]["positive"], abs=1e-6)
        assert [n["mine_rank"] for n in b["negatives"]] == [n["mine_rank"] for n in a["negatives"]]
