"""The cheap filter steps (heuristics, sts_gap) on records built from real SciFact documents.

Each test plants one fault in otherwise clean records (real SciFact claims as queries, the
abstract that qrels pairs with the claim as the positive, abstracts of other claims as
negatives) and checks that the right reason fires on the right target, and that clean records
come back untouched.
"""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path

import pytest

from curate.core.errors import CurateError
from curate.filter.base import FilterContext
from curate.filter.steps.heuristics import heuristics
from curate.filter.steps.sts_gap import sts_gap
from curate.core.records import Negative, Record
from tests.filter.common import four_gram_share
from tests.helpers import SHARED_DATA

SCIFACT = SHARED_DATA / "scifact"

pytestmark = pytest.mark.skipif(not (SCIFACT / "corpus.jsonl").exists(), reason="SciFact data not available")


def _load():
    docs = {}
    with open(SCIFACT / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            docs[d["_id"]] = d["text"]
    queries = {}
    with open(SCIFACT / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            q = json.loads(line)
            queries[q["_id"]] = q["text"]
    with open(SCIFACT / "qrels" / "train.tsv", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t"))[1:]
    pairs, seen = [], set()
    for qid, did, _ in rows:  # one pair per claim and per abstract, so negatives are all distinct
        if qid in seen or did in seen or did not in docs or qid not in queries:
            continue
        seen.update((qid, did))
        pairs.append((queries[qid], docs[did]))
    return pairs


_PAIRS = None


def pairs():
    global _PAIRS
    if _PAIRS is None:
        _PAIRS = _load()
    return _PAIRS


def words(text: str) -> int:
    return len(text.split())


def make_records(n: int, *, num_words=None, family="short-long", lo=150, hi=300) -> list[Record]:
    """n clean records: claim, its abstract, and 4 abstracts of the next claims as negatives."""
    usable = [(q, d) for q, d in pairs() if lo <= words(d) <= hi and len(q.split()) >= 6]
    assert len(usable) >= n + 4
    out = []
    for i in range(n):
        q, d = usable[i]
        negs = [Negative(text=usable[i + k][1], level=k, score=8 - k, answerable=False) for k in range(1, 5)]
        meta = {"placeholders": {"num_words": num_words}} if num_words is not None else {}
        out.append(Record(id=f"scifact-{i}", task_type=family,
                          task="Given a scientific claim, retrieve abstracts with evidence about it.",
                          query=q, positive=d, negatives=negs, positive_score=9,
                          positive_answerable=True, meta=meta))
    return out


def run(step, records, params=None, tmp_path=Path(".")):
    ctx = FilterContext(out_dir=tmp_path)
    ctx.step_name = step.__name__
    kept = step(records, params or {}, ctx)
    return kept, ctx


def reasons(ctx) -> list[tuple[str, str, str]]:
    return [(r.id, r.reason, "record" if r.level is None and r.text is None else "negative")
            for r in ctx.rejections]


# --------------------------------------------------------------------------- clean data


def test_clean_scifact_records_pass_untouched(tmp_path):
    # a few hundred real abstracts: none of the default patterns or checks may fire on them
    usable = [(q, d) for q, d in pairs() if words(d) >= 20]
    recs = []
    for i in range(0, min(len(usable) - 4, 400)):
        q, d = usable[i]
        recs.append(Record(id=f"r{i}", task_type="short-long", task="t", query=q, positive=d,
                           negatives=[Negative(text=usable[i + k][1], level=k) for k in range(1, 5)]))
    # SciFact has claims written from an abstract's first sentence: the claim copied word for
    # word is exactly the query-word-for-word-in-document fault; a claim with half or more of its word 4-grams in
    # the abstract (one word changed: "decreases" for the abstract's finding) is the copy guard's.
    # Those two are the only things that may fire here.
    copied = {r.id for r in recs if r.query.lower().rstrip(".") in r.positive.lower()}
    near = {r.id for r in recs if r.id not in copied and four_gram_share(r.query, r.positive) >= 0.5}
    assert copied and near  # the corpus really holds such cases (e.g. the LDL-cholesterol claim)
    assert len(near) <= 0.02 * len(recs)  # bench/results/copy-guard.txt: 1.4% of SciFact's claims
    before = {r.id: r.to_dict() for r in recs}
    kept, ctx = run(heuristics, recs, tmp_path=tmp_path)
    assert sorted(reasons(ctx)) == sorted([(rid, "query-word-for-word-in-document", "record") for rid in copied]
                                          + [(rid, "query-mostly-from-positive", "record") for rid in near])
    gone = copied | near
    assert [r.to_dict() for r in kept] == [d for rid, d in before.items() if rid not in gone]
    assert all(r is recs[int(r.id[1:])] for r in kept)
    assert ctx.notes["heuristics"]["records_kept"] == len(recs) - len(gone)


def test_clean_with_word_target(tmp_path):
    recs = make_records(6, num_words=150)
    before = copy.deepcopy([r.to_dict() for r in recs])
    kept, ctx = run(heuristics, recs, tmp_path=tmp_path)
    assert reasons(ctx) == [] and [r.to_dict() for r in kept] == before
    assert ctx.notes["heuristics"]["records_with_word_target"] == 6


# --------------------------------------------------------------------------- planted faults


def test_length_off_positive_and_negative(tmp_path):
    recs = make_records(4, num_words=150)
    short_pos = " ".join(recs[0].positive.split()[:40])  # 40 < 0.5 * 150
    recs[0].positive = short_pos
    recs[1].negatives[2].text = " ".join(recs[1].negatives[2].text.split()[:30])
    recs[2].meta["placeholders"]["num_words"] = 50  # abstracts of 150-300 words: > 3 x 50
    recs[3].meta["placeholders"]["num_words"] = "at least 50"  # not a number: no length check
    kept, ctx = run(heuristics, recs, tmp_path=tmp_path)
    got = reasons(ctx)
    assert ("scifact-0", "length-off", "record") in got
    assert ("scifact-1", "length-off", "negative") in got
    assert ("scifact-2", "length-off", "record") in got
    assert [r.id for r in kept] == ["scifact-1", "scifact-3"]
    assert len(kept[0].negatives) == 3 and len(kept[1].negatives) == 4
    rej = {(r.id, r.reason): r for r in ctx.rejections}
    assert rej[("scifact-0", "length-off")].detail["words"] == 40
    assert rej[("scifact-0", "length-off")].detail["requested"] == 150
    assert rej[("scifact-2", "length-off")].detail["ratio"] > 3
    assert rej[("scifact-1", "length-off")].level == 3  # the planted negative, not another one


def test_length_tolerance_param(tmp_path):
    recs = make_records(1, num_words=150)
    recs[0].positive = " ".join(recs[0].positive.split()[:80])  # 0.53 x requested
    kept, ctx = run(heuristics, copy.deepcopy(recs), tmp_path=tmp_path)
    assert len(kept) == 1
    kept, ctx = run(heuristics, copy.deepcopy(recs), {"length_tolerance": 0.6}, tmp_path=tmp_path)
    assert kept == [] and reasons(ctx) == [("scifact-0", "length-off", "record")]


def test_query_copied(tmp_path):
    recs = make_records(3)
    q = recs[0].query
    # verbatim copy, with case and spacing changed: still a copy
    recs[0].positive = recs[0].positive + "  " + q.upper().replace(" ", "   ")
    recs[1].negatives[0].text = recs[1].query + " " + recs[1].negatives[0].text
    kept, ctx = run(heuristics, recs, tmp_path=tmp_path)
    got = reasons(ctx)
    assert got == [("scifact-0", "query-word-for-word-in-document", "record"), ("scifact-1", "query-word-for-word-in-document", "negative")]
    assert [r.id for r in kept] == ["scifact-1", "scifact-2"]
    assert ctx.rejections[0].detail["query_words"] >= 4


def test_query_copy_needs_enough_words(tmp_path):
    recs = make_records(1)
    recs[0].query = "insulin resistance"
    recs[0].negatives[1].text += " Insulin resistance was measured."
    kept, ctx = run(heuristics, recs, tmp_path=tmp_path)
    assert reasons(ctx) == [] and len(kept[0].negatives) == 4


def test_sts_negatives_may_contain_the_query(tmp_path):
    q = pairs()[0][0]
    rec = Record(id="sts-0", task_type="sts", task="Retrieve semantically similar text.", query=q,
                 positive="A rephrased sentence that says the same thing in other words.",
                 negatives=[Negative(text=f"It is not true that {q.lower()}", level=1),
                            Negative(text="A sentence about something else entirely.", level=2)])
    kept, ctx = run(heuristics, [rec], tmp_path=tmp_path)
    assert reasons(ctx) == [] and len(kept[0].negatives) == 2


@pytest.mark.parametrize("phrase", [
    "This is a hard negative for the query.",
    "This passage is not relevant to the query.",
    "Unlike the positive, it discusses mice rather than humans.",
    "Note: this document is irrelevant to the query.",
    "This passage does not answer the question.",
    "(Level 3)",
])
def test_self_explanation_in_negative(tmp_path, phrase):
    recs = make_records(2)
    recs[0].negatives[1].text += " " + phrase
    kept, ctx = run(heuristics, recs, tmp_path=tmp_path)
    assert reasons(ctx) == [("scifact-0", "self-explanation", "negative")]
    assert ctx.rejections[0].detail["pattern"] and ctx.rejections[0].detail["matched"]
    assert len(kept) == 2 and len(kept[0].negatives) == 3 and len(kept[1].negatives) == 4


def test_self_explanation_in_positive_and_custom_patterns(tmp_path):
    recs = make_records(2)
    recs[0].positive = "Level 1: " + recs[0].positive
    kept, ctx = run(heuristics, copy.deepcopy(recs), tmp_path=tmp_path)
    assert reasons(ctx) == [("scifact-0", "self-explanation", "record")]
    # a level mentioned in running text is not a leak
    recs[0].positive = recs[0].positive[len("Level 1: "):] + " Patients in level 3 trauma centres did better."
    kept, ctx = run(heuristics, copy.deepcopy(recs), tmp_path=tmp_path)
    assert reasons(ctx) == []
    # user-supplied patterns replace the defaults
    recs[1].positive += " As an AI language model, I wrote this."
    kept, ctx = run(heuristics, copy.deepcopy(recs), {"self_explanation_patterns": [r"as an ai language model"]},
                    tmp_path=tmp_path)
    assert reasons(ctx) == [("scifact-1", "self-explanation", "record")]


def test_negative_equal_or_near_equal_to_positive_and_duplicates(tmp_path):
    recs = make_records(3)
    recs[0].negatives[0].text = "  " + recs[0].positive.upper() + "  "  # same text, other case
    tokens = recs[1].positive.split()
    tokens[len(tokens) // 2] = "remarkably"  # one word changed: near-equal
    recs[1].negatives[3].text = " ".join(tokens)
    recs[2].negatives[2].text = recs[2].negatives[0].text + " "  # repeats an earlier negative
    kept, ctx = run(heuristics, recs, tmp_path=tmp_path)
    got = reasons(ctx)
    assert got == [("scifact-0", "negative-equals-positive", "negative"),
                   ("scifact-1", "negative-equals-positive", "negative"),
                   ("scifact-2", "duplicate-negative", "negative")]
    near = ctx.rejections[1].detail
    assert 0.9 <= near["similarity"] < 1.0
    assert ctx.rejections[2].detail["similarity"] == 1.0 and ctx.rejections[2].level == 3
    assert [len(r.negatives) for r in kept] == [3, 3, 3]
    # the first copy stays, the repeat goes
    assert kept[2].negatives[0].level == 1 and [n.level for n in kept[2].negatives] == [1, 2, 4]


def test_empty_and_too_short(tmp_path):
    recs = make_records(4)
    recs[0].query = "   "
    recs[1].negatives[1].text = ""
    recs[2].negatives[0].text = "Too short."
    recs[3].positive = "Short text."
    kept, ctx = run(heuristics, recs, tmp_path=tmp_path)
    assert reasons(ctx) == [("scifact-0", "empty-text", "record"),
                            ("scifact-1", "empty-text", "negative"),
                            ("scifact-2", "too-short", "negative"),
                            ("scifact-3", "too-short", "record")]
    assert ctx.rejections[2].detail == {"index": 0, "field": "negative", "chars": 10, "min_chars": 20}
    assert [r.id for r in kept] == ["scifact-1", "scifact-2"]


def test_short_labels_pass_in_long_short(tmp_path):
    q = pairs()[0][1]  # an abstract as the input text, labels as documents
    rec = Record(id="ls-0", task_type="long-short", task="Classify the study design of an abstract.",
                 query=q, positive="RCT", negatives=[Negative(text=t, level=i + 1) for i, t in
                                                      enumerate(["cohort", "case report", "review", "meta-analysis"])],
                 meta={"placeholders": {"num_words": "at least 100"}})
    kept, ctx = run(heuristics, [rec], tmp_path=tmp_path)
    assert reasons(ctx) == [] and len(kept) == 1
    kept, ctx = run(heuristics, [rec], {"min_chars": {"document": 20}, "min_chars_by_family": {}},
                    tmp_path=tmp_path)
    assert ("ls-0", "too-short", "record") in reasons(ctx)


def test_no_negatives_left(tmp_path):
    recs = make_records(2)
    for neg in recs[0].negatives:
        neg.text = recs[0].positive
    kept, ctx = run(heuristics, recs, tmp_path=tmp_path)
    got = reasons(ctx)
    assert got.count(("scifact-0", "negative-equals-positive", "negative")) == 4
    assert got[-1] == ("scifact-0", "no-negatives-left", "record")
    assert [r.id for r in kept] == ["scifact-1"]


def test_unknown_parameter_is_an_error(tmp_path):
    with pytest.raises(CurateError, match="unknown parameter"):
        run(heuristics, make_records(1), {"min_char": 3}, tmp_path=tmp_path)
    with pytest.raises(CurateError, match="regex"):
        run(heuristics, make_records(1), {"self_explanation_patterns": ["(unclosed"]}, tmp_path=tmp_path)


# --------------------------------------------------------------------------- sts_gap


def _sts(rid: str, pos_score, neg_scores, family="sts") -> Record:
    q, d = pairs()[0]
    return Record(id=rid, task_type=family, task="Retrieve semantically similar text.", query=q, positive=d,
                  positive_score=pos_score,
                  negatives=[Negative(text=f"negative {i}", level=i + 1, score=s) for i, s in enumerate(neg_scores)])


def test_sts_gap_drops_close_negatives(tmp_path):
    recs = [_sts("a", 9, [8, 7.5, 7, 2]), _sts("b", 9, [9, 10]), _sts("c", None, [9]),
            _sts("d", 9, [9], family="short-long"), _sts("e", 8, [None, 3])]
    kept, ctx = run(sts_gap, recs, tmp_path=tmp_path)
    got = reasons(ctx)
    assert got == [("a", "score-gap", "negative"),
                   ("b", "score-gap", "negative"), ("b", "score-gap", "negative"),
                   ("b", "no-negatives-left", "record")]
    assert [n.score for n in kept[0].negatives] == [7.5, 7, 2]  # a gap of exactly 1.5 stays
    assert ctx.rejections[0].detail == {"index": 0, "positive": 9.0, "negative": 8.0, "gap": 1.0, "min_gap": 1.5}
    assert [r.id for r in kept] == ["a", "c", "d", "e"]
    assert len(kept[3].negatives) == 2  # an unscored negative passes
    note = ctx.notes["sts_gap"]
    assert note["unscored_records"] == 1 and note["unscored_negatives"] == 1 and note["records_checked"] == 3


def test_sts_gap_params(tmp_path):
    kept, ctx = run(sts_gap, [_sts("a", 9, [7, 6])], {"min_gap": 3}, tmp_path=tmp_path)
    assert [n.score for n in kept[0].negatives] == [6]
    kept, ctx = run(sts_gap, [_sts("a", 9, [9]), _sts("b", 9, [9], family="bitext")],
                    {"families": ["bitext"]}, tmp_path=tmp_path)
    assert reasons(ctx) == [("b", "score-gap", "negative"), ("b", "no-negatives-left", "record")]
    with pytest.raises(CurateError):
        run(sts_gap, [], {"min_gap": "wide"}, tmp_path=tmp_path)
