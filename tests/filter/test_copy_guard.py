"""The copy guard of the ``heuristics`` step: a query (or negative) that mostly copies the positive.

Planted near-copies of real passages (the demo documents, SciFact abstracts) must go, each with
its score; real queries people wrote (SciFact claims, NQ-UTD questions, against their qrels
positives) must stay, up to the false-drop rate bench/copy_guard.py measured
(bench/results/copy-guard.txt); a negative made from the positive goes on its own; bad
parameters are one line; and the filter's funnel names the guard's drops with an example.
"""

from __future__ import annotations

import csv
import json
import random

import pytest

from curate.core.errors import CurateError
from curate.core.records import Negative, Record
from curate.filter.base import FilterContext
from curate.filter.main import funnel, present
from curate.filter.steps.heuristics import heuristics
from tests.filter.common import four_gram_share
from tests.helpers import REPO, SHARED_DATA, assert_one_line_error, run_curate

DEMO = REPO / "data" / "demo"


def demo_doc(name: str) -> tuple[str, str]:
    """(title, text) of a demo document: its heading, then its paragraphs joined."""
    lines = (DEMO / f"{name}.md").read_text(encoding="utf-8").splitlines()
    return lines[0].lstrip("# ").strip(), " ".join(" ".join(lines[1:]).split())


def record(rid: str, query: str, title: str | None, text: str, family: str = "short-long",
           negatives: list[str] = ()) -> Record:
    """A record as ``generate --from-corpus`` writes one: the title first in the positive, and beside it."""
    return Record(id=rid, task_type=family, task="t", query=query,
                  positive=f"{title} {text}" if title else text, positive_title=title,
                  negatives=[Negative(text=t, level=1) for t in negatives])


def run(records, params=None, tmp_path=None):
    ctx = FilterContext(out_dir=tmp_path)
    ctx.step_name = "heuristics"
    kept = heuristics(records, params or {}, ctx)
    return kept, ctx


# --------------------------------------------------------------------------- planted near-copies

GLACIER = demo_doc("glaciers")
VACCINES = demo_doc("vaccines")
PRESS = demo_doc("printing-press")
TIDES = demo_doc("tides")


def planted() -> list[tuple[str, Record]]:
    g_title, g_text = GLACIER
    first = g_text.split(". ")[0]  # "A glacier forms where more snow falls each winter than melts each summer"
    return [
        # the demo's own copies, as the bundled model wrote them
        ("title added", record("glaciers", f"{g_title} {g_text[:290]}, leaving ridges.", *GLACIER)),
        ("prefix", record("vaccines", "Question: How vaccines work", *VACCINES)),
        # a changed word, a reordered clause, a prefix before a sentence
        ("changed word", record("changed", first.replace("snow", "rain") + ".", *GLACIER)),
        ("reordered clause", record("reordered", "Over years the snow is buried and pressed into dense ice, and "
                                    "it becomes thick enough to flow downhill under its own weight.", *GLACIER)),
        ("prefix sentence", record("press", "Query: " + PRESS[1].split(". ")[0], *PRESS)),
    ]


@pytest.mark.parametrize("kind,rec", planted(), ids=[k for k, _ in planted()])
def test_planted_near_copies_are_dropped_with_their_score(kind, rec, tmp_path):
    assert rec.query.lower() not in rec.positive.lower(), "no word-for-word copy: that is query-word-for-word-in-document's"
    kept, ctx = run([rec], tmp_path=tmp_path)
    assert kept == []
    [drop] = ctx.rejections
    assert drop.reason == "query-mostly-from-positive" and drop.level is None and drop.text is None
    d = drop.detail
    assert d["field"] == "query" and d["threshold"] == 0.5 and 0.5 <= d["containment"] <= 1
    assert d["ngram"] == (3 if kind == "prefix" else 4)  # "Question: How vaccines work": 4 words, 3-grams


def test_the_title_counts_even_when_only_beside_the_positive(tmp_path):
    title, text = VACCINES
    beside = Record(id="r", task_type="short-long", task="t", query="Question: How vaccines work",
                    positive=text, positive_title=title)
    kept, ctx = run([beside], tmp_path=tmp_path)
    assert kept == [] and ctx.rejections[0].reason == "query-mostly-from-positive"
    untitled = Record(id="r", task_type="short-long", task="t", query="Question: How vaccines work", positive=text)
    kept, ctx = run([untitled], tmp_path=tmp_path)
    assert kept == [untitled] and ctx.rejections == []


def test_written_queries_about_the_passage_stay(tmp_path):
    recs = [record("a", "Why do mountain glaciers carve U-shaped valleys?", *GLACIER),
            record("b", "how long does immunity from a vaccine last", *VACCINES),
            record("c", "Who invented movable metal type in Mainz?", *PRESS),
            record("d", "tides", *TIDES),  # a keyword query: never judged
            record("e", "ocean tides moon", *TIDES)]
    kept, ctx = run(recs, tmp_path=tmp_path)
    assert kept == recs and ctx.rejections == []


def test_threshold_and_ngram_are_parameters(tmp_path):
    title, text = TIDES
    # the demo's query for its tides passage: 59% of its word 4-grams come from the passage
    rec = record("t", "The sea raises and falls twice a day because the Moon's gravity pulls harder on the "
                      "Earth's side than on the far side. The difference stretches the oceans into two bulges, "
                      "and the Earth's rotation creates two smaller bulges that rise and fall. A week later, with "
                      "the Moon at a right angle to the Sun,", title, text)
    assert run([rec], tmp_path=tmp_path)[0] == []
    assert run([rec], {"copy_containment": 0.7}, tmp_path)[0] == [rec]
    assert run([rec], {"copy_containment": None}, tmp_path)[0] == [rec]
    kept, ctx = run([rec], {"copy_ngram": 6, "copy_containment": 0.3}, tmp_path)
    assert kept == [] and ctx.rejections[0].detail["ngram"] == 6


def test_sts_and_bitext_are_exempt_and_query_copy_min_words_null_allows_copies(tmp_path):
    title, text = GLACIER
    copy = f"{title} {text[:200]}"
    for family in ("sts", "bitext"):
        rec = record(family, copy + " indeed", None, f"{title} {text}", family=family)
        assert run([rec], tmp_path=tmp_path)[0] == [rec], family
    rec = record("x", copy + " indeed", *GLACIER)
    assert run([rec], {"copy_exempt_families": ["short-long"]}, tmp_path)[0] == [rec]
    # the no-LLM title baseline (bench/grids/recipes/from-corpus-keep-copies.yaml) keeps its copies
    assert run([rec], {"query_copy_min_words": None}, tmp_path)[0] == [rec]


# --------------------------------------------------------------------------- real queries


def _beir(name: str, splits: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """(query id, query, its first qrels positive as ``title text``) for every query with one."""
    folder = SHARED_DATA / name
    docs = {}
    with open(folder / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            docs[d["_id"]] = (d.get("title") or "").strip(), d["text"].strip()
    with open(folder / "queries.jsonl", encoding="utf-8") as fh:
        queries = {q["_id"]: q["text"] for q in map(json.loads, fh)}
    first: dict[str, str] = {}
    for split in splits:
        with open(folder / "qrels" / f"{split}.tsv", encoding="utf-8") as fh:
            rows = csv.reader(fh, delimiter="\t")
            next(rows)
            for qid, did, score in rows:
                if float(score) > 0 and qid in queries and did in docs:
                    first.setdefault(qid, did)
    return [(qid, queries[qid], docs[did]) for qid, did in first.items()]


# the measured false-drop rates (bench/results/copy-guard.txt, pairs at 0.5): SciFact 1.3%,
# NQ-UTD 3.4%; the bounds leave room for the sample
@pytest.mark.parametrize("name,splits,sample,most", [("scifact", ("train", "test"), 200, 0.03),
                                                       ("nq-utd", ("test",), 200, 0.06)])
def test_real_queries_are_kept(name, splits, sample, most, tmp_path):
    if not (SHARED_DATA / name / "corpus.jsonl").exists():
        pytest.skip(f"{name} not available")
    pairs = _beir(name, splits)
    pairs = random.Random(0).sample(pairs, min(sample, len(pairs)))
    recs = [record(qid, q, title or None, text) for qid, q, (title, text) in pairs]
    kept, ctx = run(recs, tmp_path=tmp_path)
    dropped = {d.id: d for d in ctx.rejections}
    assert len(kept) + len(dropped) == len(recs)
    assert len(dropped) <= most * len(recs), [r.query for r in recs if r.id in dropped]
    # the done-when: no kept query with half or more of its word 4-grams in its own passage
    assert all(four_gram_share(r.query, r.positive) < 0.5 for r in kept)
    assert all(d.reason in ("query-mostly-from-positive", "query-word-for-word-in-document") for d in dropped.values())


# --------------------------------------------------------------------------- negatives


def test_a_negative_that_copies_the_positive_is_dropped(tmp_path):
    title, text = GLACIER
    half = text[: len(text) // 2].replace("winter", "spring")  # half the positive, one word changed
    other = demo_doc("volcanoes")[1]
    rec = record("n", "Why do mountain glaciers carve U-shaped valleys?", title, text, negatives=[half, other])
    kept, ctx = run([rec], tmp_path=tmp_path)
    assert kept == [rec] and [n.text for n in rec.negatives] == [other]
    [drop] = ctx.rejections
    assert drop.reason == "negative-copies-positive" and drop.text == half
    assert drop.detail["index"] == 0 and drop.detail["field"] == "negative"
    assert drop.detail["containment"] >= 0.9 and drop.detail["ngram"] == 4 and drop.detail["threshold"] == 0.5
    # the whole-text Jaccard does not see it: only the guard does
    rec = record("n", "Why do mountain glaciers carve U-shaped valleys?", title, text, negatives=[half, other])
    assert run([rec], {"copy_containment": None}, tmp_path)[0][0].negatives[0].text == half


def test_sts_negatives_and_long_short_labels_may_copy_the_positive(tmp_path):
    sts = record("s", "A glacier forms where snow piles up.", None, "A glacier forms where more snow falls.",
                 family="sts", negatives=["It is not true that a glacier forms where more snow falls."])
    label = record("l", GLACIER[1], None, "a text about glaciers and ice", family="long-short",
                   negatives=["a text about glaciers and rivers"])  # 2 of its 3 word 4-grams in the positive
    kept, ctx = run([sts, label], tmp_path=tmp_path)
    assert kept == [sts, label] and ctx.rejections == []
    kept, ctx = run([label], {"copy_exempt_negatives": []}, tmp_path)
    assert kept == [] and [d.reason for d in ctx.rejections] == ["negative-copies-positive", "no-negatives-left"]


# --------------------------------------------------------------------------- parameters, funnel


@pytest.mark.parametrize("params,needle", [
    ({"copy_containment": 0}, "copy_containment must be in (0, 1]"),
    ({"copy_containment": 1.5}, "copy_containment must be in (0, 1]"),
    ({"copy_containment": True}, "copy_containment"),
    ({"copy_ngram": 1}, "copy_ngram must be a whole number >= 2"),
    ({"copy_ngram": True}, "copy_ngram"),
    ({"copy_ngram": "4"}, "copy_ngram"),
    ({"query_copy_min_words": 0}, "query_copy_min_words must be a whole number >= 1"),
])
def test_bad_parameters_are_refused(params, needle, tmp_path):
    with pytest.raises(CurateError) as e:
        run([record("r", "q w e r", None, "a passage of some words")], params, tmp_path)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_the_cli_refuses_a_bad_value_and_the_funnel_shows_the_guard(tmp_path):
    recs = [record(f"r{i}", q, *doc) for i, (q, doc) in enumerate([
        ("Question: How vaccines work", VACCINES),
        ("Who invented movable metal type in Mainz?", PRESS),
        (f"{GLACIER[0]} {GLACIER[1][:290]}, leaving ridges.", GLACIER),
        (PRESS[1].split(". ")[0], PRESS),  # a word-for-word copy: query-word-for-word-in-document
    ])]
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in recs), encoding="utf-8")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nsteps:\n  - heuristics: {copy_containment: 2}\n", encoding="utf-8")
    env = {"CURATE_CACHE_DIR": str(tmp_path / "cache"), "NO_COLOR": "1"}
    assert_one_line_error(run_curate("filter", "--in", str(inp), "--out", str(tmp_path / "x"), "--recipe", str(bad),
                                     env=env), "copy_containment")
    good = tmp_path / "good.yaml"
    good.write_text("name: good\nsteps:\n  - heuristics: {}\n", encoding="utf-8")
    out = tmp_path / "out"
    proc = run_curate("filter", "--in", str(inp), "--out", str(out), "--recipe", str(good), env=env)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["steps"][0]["records_dropped"] == {"query-mostly-from-positive": 2, "query-word-for-word-in-document": 1}
    f = funnel(report, out)
    assert f["steps"][0]["example"] == {"reason": "query-mostly-from-positive", "query": "Question: How vaccines work",
                                        "containment": 0.5}
    line = dict(enumerate(text for _, text in present(f).lines))[1]
    assert line == ("  heuristics: 1 of 4 kept, 3 dropped (query-mostly-from-positive 2, query-word-for-word-in-document 1), "
                    "e.g. query-mostly-from-positive: \"Question: How vaccines work\" (50% of its word n-grams in its "
                    "passage)")


def test_an_old_runs_drop_reasons_are_read_under_their_new_names(tmp_path):
    """`query-copied` and `query-copies-positive` read alike; their new names say what each found.
    A report written before the rename shows the new names in the funnel."""
    from curate.filter.main import funnel, present

    old = {"input": str(tmp_path / "gone.jsonl"), "records_in": 5, "records_kept": 2,
           "steps": [{"step": "heuristics", "records_in": 5, "records_kept": 2,
                      "records_dropped": {"query-copied": 1, "query-copies-positive": 2}}]}
    row = present(funnel(old, tmp_path))
    assert row.dropped == {"query-word-for-word-in-document": 1, "query-mostly-from-positive": 2}
    assert "query-mostly-from-positive 2, query-word-for-word-in-document 1" in row.lines[1][1]
