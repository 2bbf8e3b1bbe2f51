"""Records, JSONL I/O, templates, task specs and near-duplicate detection."""

from __future__ import annotations

import json
import random

import pytest

from curate.core.errors import CurateError
from curate.core.jsonl import JsonlAppender, atomic_write_bytes, read_jsonl, trim_partial_tail
from curate.dedup.near_dup import NearDupIndex
from curate.core.records import FAMILIES, SCHEMA_VERSION, Negative, Positive, Record, read_records
from curate.llm.taskspec import load_spec
from curate.llm.templates import load_template, render


def _record(**kw) -> Record:
    base = dict(id="a1", task_type="short-long", task="t", query="q", positive="p",
                negatives=[Negative(text=f"n{i}", level=i) for i in range(1, 5)])
    base.update(kw)
    return Record(**base)


def test_record_round_trips_through_json():
    r = _record(positive_score=9, meta={"seed": 3})
    again = Record.from_dict(json.loads(json.dumps(r.to_dict())))
    assert again == r
    assert "positive_title" not in r.to_dict() and "title" not in r.to_dict()["negatives"][0]  # only when known


def test_titles_round_trip_and_must_be_strings():
    r = _record(positive="A title. The body.", positive_title="A title.",
                positives=[Positive("B. More.", "d2", "B.")], negatives=[Negative("C. Text.", title="C.")])
    d = r.to_dict()
    assert (d["positive_title"], d["positives"][0]["title"], d["negatives"][0]["title"]) == ("A title.", "B.", "C.")
    assert Record.from_dict(json.loads(json.dumps(d))) == r
    with pytest.raises(ValueError, match="negative 1 'title' must be a string"):
        Record.from_dict({**d, "negatives": [{"text": "n", "title": 3}]})


def test_read_records_names_file_and_line_of_a_bad_record(tmp_path):
    p = tmp_path / "in.jsonl"
    p.write_text(json.dumps(_record().to_dict()) + "\n" + json.dumps({"id": "x"}) + "\n")
    with pytest.raises(CurateError, match=r"in\.jsonl:2: .*lacks task_type"):
        read_records(p)


@pytest.mark.parametrize("change, message", [
    ({"query": "   "}, "record 'query' is empty"),
    ({"positive": ""}, "record 'positive' is empty"),
    ({"query": 7}, "record 'query' must be a string"),
    ({"negatives": "n1"}, "'negatives' must be a list"),
    ({"negatives": [{"text": "n", "score": "nine"}]}, "negative 1 'score' must be a number (got 'nine')"),
    ({"negatives": [{"text": "n"}, {"text": "m", "level": "one"}]}, "negative 2 'level' must be 1, 2, 3 or 4"),
    ({"negatives": [{"text": "n", "level": 5}]}, "negative 1 'level' must be 1, 2, 3 or 4 (got 5)"),
    ({"negatives": [{"text": "n", "level": True}]}, "'level' must be 1, 2, 3 or 4"),
    ({"negatives": [{"text": " "}]}, "negative 1 'text' is empty"),
    ({"negatives": ["n"]}, "negative 1 must be an object"),
    ({"negatives": [{"text": "n", "teacher_score": [1]}]}, "'teacher_score' must be a number"),
    ({"negatives": [{"text": "n", "answerable": "no"}]}, "'answerable' must be true or false"),
    ({"meta": "str"}, "record 'meta' must be an object (got str)"),
    ({"scores": [1]}, "record 'scores' must be an object (got list)"),
    ({"positive_score": "high"}, "'positive_score' must be a number"),
    ({"schema_version": 9}, "'schema_version' 9 is not one this curate reads"),
    ({"positives": "another"}, "record field 'positives' must be a list"),
    ({"positives": [{"text": "ok"}, "p3"]}, "positive 3 must be an object with a 'text'"),
    ({"positives": [{"text": "  "}]}, "positive 2 'text' is empty"),
    ({"positives": [{"text": "ok", "doc_id": [1]}]}, "positive 2 'doc_id' must be a corpus id"),
    ({"positive_id": True}, "record 'positive_id' must be a corpus id"),
    ({"teacher": {"positive": 0.5}}, "record 'teacher' needs its 'model'"),
    ({"teacher": {"model": "m", "positive": "high"}}, "record 'teacher' 'positive' must be a number"),
    ({"teacher": {"model": "m", "negative_ranks": [1, 2.5]}}, "'negative_ranks' must be a list of integers"),
    ({"teacher": {"model": "m", "positive_rank": "1"}}, "record 'teacher' 'positive_rank' must be an integer"),
    ({"schema_version": 2, "scores": {"teacher": {"model": "m", "margin": []}}},
     "record 'scores.teacher' 'margin' must be a number"),
    # version 2 kept them in meta; they are checked as they are upgraded
    ({"schema_version": 2, "meta": {"positives": ["ok", 3]}}, "'meta.positives' must be a list of strings"),
    ({"schema_version": 2, "meta": {"positive_ids": [{"id": 1}]}}, "'meta.positive_ids' must be a list of corpus ids"),
])
def test_bad_fields_are_one_line_naming_file_and_line(tmp_path, change, message):
    p = tmp_path / "in.jsonl"
    p.write_text(json.dumps(_record().to_dict()) + "\n" + json.dumps({**_record().to_dict(), **change}) + "\n")
    with pytest.raises(CurateError) as err:
        read_records(p)
    assert str(err.value).startswith(f"{p}:2: not a curate record: ")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_bad_record_stops_filter_mine_and_export_with_file_and_line(tmp_path):
    from tests.helpers import assert_one_line_error, run_curate

    p = tmp_path / "in.jsonl"
    p.write_text(json.dumps(_record().to_dict()) + "\n" + json.dumps({**_record().to_dict(), "query": ""}) + "\n")
    for args in (["filter", "--in", str(p), "--out", str(tmp_path / "f")],
                 ["mine", "--in", str(p), "--corpus", str(p), "--out", str(tmp_path / "m")],
                 ["export", "--in", str(p), "--out", str(tmp_path / "e")]):
        assert_one_line_error(run_curate(*args), f"{p}:2", "'query' is empty")
        assert not (tmp_path / args[-1].rsplit("/", 1)[-1]).exists()  # nothing written, not even the folder


def test_version_1_records_get_their_mined_ids_on_the_negatives():
    v1 = _record(negatives=[Negative(text="gen", level=1), Negative(text="m1", source="mined"),
                            Negative(text="m2", source="mined")],
                 meta={"mine": {"doc_ids": ["d1", "d2"]}}).to_dict()
    v1["schema_version"] = 1
    for neg in v1["negatives"]:
        del neg["doc_id"]
    rec = Record.from_dict(v1)
    assert [n.doc_id for n in rec.negatives] == [None, "d1", "d2"] and rec.schema_version == SCHEMA_VERSION
    # a v1 record whose mined negatives were pruned no longer lines up: no ids rather than wrong ones
    v1["negatives"] = v1["negatives"][:2]
    assert [n.doc_id for n in Record.from_dict(v1).negatives] == [None, None]


def test_read_jsonl_names_line_of_invalid_json(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"a": 1}\n\n{"a": \n')
    with pytest.raises(CurateError, match=r"bad\.jsonl:3: invalid JSON"):
        list(read_jsonl(p))


def test_partial_tail_is_cut_before_appending(tmp_path):
    p = tmp_path / "out.jsonl"
    p.write_text('{"id": 1}\n{"id": 2}\n{"id": 3, "tru')
    assert trim_partial_tail(p) == len('{"id": 3, "tru')
    with JsonlAppender(p) as w:
        w.write({"id": 4})
    assert [o["id"] for _, o in read_jsonl(p)] == [1, 2, 4]


def test_atomic_write_leaves_old_file_when_interrupted(tmp_path):
    p = tmp_path / "report.json"
    p.write_text("old")

    def chunks():
        yield b"new, half"
        raise RuntimeError("writing fails midway")

    with pytest.raises(RuntimeError):
        atomic_write_bytes(p, chunks())
    assert p.read_text() == "old"
    assert [x.name for x in tmp_path.iterdir()] == ["report.json"], "no temporary file left behind"


def test_strict_undefined_names_template_and_variable(tmp_path):
    (tmp_path / "t.j2").write_text("Hello {{ who }} and {{ missing_thing }}")
    tpl = load_template("t.j2", [tmp_path])
    with pytest.raises(CurateError, match=r"t\.j2.*missing_thing"):
        render(tpl, {"who": "x"})


def test_user_templates_run_in_the_sandbox(tmp_path):
    (tmp_path / "evil.j2").write_text("{{ ''.__class__.__mro__[1].__subclasses__() }}")
    with pytest.raises(CurateError, match="sandbox|undefined"):
        render(load_template("evil.j2", [tmp_path]), {})


def test_user_prompt_dir_overrides_shipped_template(tmp_path):
    (tmp_path / "generate").mkdir()
    (tmp_path / "generate" / "sts.j2").write_text("custom {{ task }}")
    assert render(load_template("generate/sts.j2", [tmp_path]), {"task": "x"}) == "custom x"


@pytest.mark.parametrize("family", FAMILIES)
def test_every_shipped_spec_loads_and_renders(family):
    spec = load_spec(family)
    assert spec.family == family and spec.n_negatives == 4
    variables = spec.generate.draw(random.Random(0))
    text = render(load_template(spec.generate.template), dict(task="T", n_negatives=4, task_type=family, **variables))
    assert "T" in text and "JSON" in text
    if spec.brainstorm:
        bvars = spec.brainstorm.draw(random.Random(0))
        assert render(load_template(spec.brainstorm.template), dict(n=5, task_type=family, **bvars))
    else:
        assert spec.fixed_tasks


def test_placeholder_draws_depend_only_on_the_item_seed():
    spec = load_spec("short-long")
    a = spec.generate.draw(random.Random(42))
    random.seed(999)  # global state must not matter
    b = spec.generate.draw(random.Random(42))
    assert a == b
    draws = {json.dumps(spec.generate.draw(random.Random(s)), sort_keys=True) for s in range(30)}
    assert len(draws) > 20, "different seeds give different prompts"


def test_spec_without_string_limit_is_rejected(tmp_path):
    (tmp_path / "fam.yaml").write_text(
        "family: fam\nfixed_tasks: [x]\ngenerate:\n  template: generate/sts.j2\n  schema:\n"
        "    type: object\n    properties: {query: {type: string}}\n    required: [query, positive, negatives]\n"
    )
    with pytest.raises(CurateError, match="maxLength"):
        load_spec(str(tmp_path / "fam.yaml"))


SPEC_TAIL = ("generate:\n  template: generate/sts.j2\n  schema:\n    type: object\n    properties:\n"
             "      query: {type: string, maxLength: 50}\n      positive: {type: string, maxLength: 50}\n"
             "      negatives: {type: array, minItems: 2, maxItems: 4, items: {type: string, maxLength: 50}}\n"
             "    required: [query, positive, negatives]\n")


@pytest.mark.parametrize("family", ["../../escape", "/tmp/abs", "a/b", "..", ""])
def test_spec_family_must_be_a_plain_name(tmp_path, family):
    (tmp_path / "fam.yaml").write_text(f"family: {json.dumps(family)}\nfixed_tasks: [x]\n" + SPEC_TAIL)
    if family == "":  # an empty family falls back to the file's name
        assert load_spec(str(tmp_path / "fam.yaml")).family == "fam"
        return
    with pytest.raises(CurateError, match=r"fam\.yaml: 'family' must be a plain name"):
        load_spec(str(tmp_path / "fam.yaml"))


@pytest.mark.parametrize("n, ok", [(0, False), (1, False), (2, True), (4, True), (9, False), ("4", False)])
def test_spec_n_negatives_must_fit_the_schema(tmp_path, n, ok):
    (tmp_path / "fam.yaml").write_text(f"family: fam\nn_negatives: {json.dumps(n)}\nfixed_tasks: [x]\n" + SPEC_TAIL)
    if ok:
        assert load_spec(str(tmp_path / "fam.yaml")).n_negatives == n
    else:
        with pytest.raises(CurateError, match="n_negatives"):
            load_spec(str(tmp_path / "fam.yaml"))


def test_spec_yaml_error_names_file_and_line(tmp_path):
    (tmp_path / "bad.yaml").write_text("family: x\ngenerate: [\n")
    with pytest.raises(CurateError, match=r"bad\.yaml:\d+: invalid YAML"):
        load_spec(str(tmp_path / "bad.yaml"))


def test_user_adds_a_family_with_only_a_spec_and_template(tmp_path):
    (tmp_path / "prompts" / "generate").mkdir(parents=True)
    (tmp_path / "prompts" / "generate" / "quotes.j2").write_text("Task {{ task }} in {{ mood }} mood.")
    spec_text = (
        "family: quotes\nfixed_tasks: [Find the quote]\ngenerate:\n  template: generate/quotes.j2\n"
        "  placeholders: {mood: [happy, sad]}\n  schema:\n    type: object\n    properties:\n"
        "      query: {type: string, maxLength: 50}\n      positive: {type: string, maxLength: 50}\n"
        "      negatives: {type: array, items: {type: object, properties: {text: {type: string, maxLength: 50}}}}\n"
        "    required: [query, positive, negatives]\n"
    )
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "quotes.yaml").write_text(spec_text)
    spec = load_spec("quotes", (tmp_path / "tasks",))
    text = render(load_template(spec.generate.template, [tmp_path / "prompts"]),
                  dict(task="Find the quote", **spec.generate.draw(random.Random(1))))
    assert text in ("Task Find the quote in happy mood.", "Task Find the quote in sad mood.")


def test_near_dup_index_drops_rewordings_keeps_distinct_tasks():
    idx = NearDupIndex(threshold=0.7)
    assert idx.add_if_new("Given a patient's symptom question, retrieve medical articles that answer it.")
    assert not idx.add_if_new("Given a patient's symptom question, retrieve medical articles that answer it!")
    assert not idx.add_if_new("given a patients symptom question retrieve medical articles that answer it")
    assert not idx.add_if_new("Given a patient's symptom question, retrieve the medical articles that answer it.")
    assert idx.add_if_new("Given a legal term, find court rulings that interpret it.")
    assert len(idx) == 2


def test_bounded_runs_each_item_once_with_at_most_limit_in_flight():
    import asyncio

    from curate.core.asyncrun import bounded

    state = {"now": 0, "peak": 0}

    async def work(i):
        state["now"] += 1
        state["peak"] = max(state["peak"], state["now"])
        await asyncio.sleep(0.001 * (i % 5))
        state["now"] -= 1
        if i == 97:
            raise ValueError("item 97")
        return i * i

    async def collect(items):
        return [(i, r) async for i, r in bounded(items, work, 8)]

    got = asyncio.run(collect(range(60)))
    assert sorted(got) == [(i, i * i) for i in range(60)]
    assert state["peak"] == 8
    with pytest.raises(ValueError, match="item 97"):
        asyncio.run(collect(range(100)))


def test_symmetry_has_one_definition_the_spec_field():
    from curate.llm.taskspec import is_symmetric

    def rec(family, **meta):
        return _record(task_type=family, meta=meta)

    # E5's grouping: sts and bitext are symmetric, the four retrieval shapes are not
    assert [is_symmetric(rec(f)) for f in ("sts", "bitext", "short-short", "long-long", "short-long")] == \
        [True, True, False, False, False]
    assert not is_symmetric(rec("classification")) and not is_symmetric(rec("a/../b"))
    # a record's own flag (generate writes its spec's) wins: a user family can be symmetric
    assert is_symmetric(rec("my-family", symmetric=True)) and not is_symmetric(rec("sts", symmetric=False))
    for family in FAMILIES:
        assert is_symmetric(rec(family)) == load_spec(family).symmetric


def test_every_positive_with_its_corpus_id_in_one_typed_reading():
    from curate.core.records import Positive

    rec = _record(positive="p0", positive_id="d0", positives=[Positive("p1", "d1"), Positive("p2")])
    assert rec.all_positives() == [Positive("p0", "d0"), Positive("p1", "d1"), Positive("p2", None)]
    again = Record.from_dict(json.loads(json.dumps(rec.to_dict())))
    assert again == rec and again.to_dict()["positives"] == [{"text": "p1", "doc_id": "d1"}, {"text": "p2", "doc_id": None}]
    assert _record(positive="p0").all_positives() == [Positive("p0", None)]


def _v2(**meta) -> Record:
    d = _record(positive="p0").to_dict()
    for key in ("positives", "positive_id"):
        d.pop(key)
    return Record.from_dict({**d, "schema_version": 2, "meta": {"seed": 1, **meta}})


def test_version_2_positives_in_meta_are_upgraded_on_read():
    from curate.core.records import Positive

    rec = _v2(positives=["p1", "p2"], positive_ids=["d0", "d1", 7])
    assert rec.all_positives() == [Positive("p0", "d0"), Positive("p1", "d1"), Positive("p2", "7")]
    assert rec.meta == {"seed": 1} and rec.schema_version == SCHEMA_VERSION  # the old keys leave meta
    # ids that do not line up with the extra texts give the extra texts no id (never a wrong one)
    rec = _v2(positives=["p1"], positive_ids=["d0"])
    assert rec.all_positives() == [Positive("p0", "d0"), Positive("p1", None)]
    # a blank further positive (an empty corpus text) is skipped, and the ids stay matched
    rec = _v2(positives=[" ", "p2"], positive_ids=["d0", "d1", "d2"])
    assert rec.all_positives() == [Positive("p0", "d0"), Positive("p2", "d2")]


def test_teacher_numbers_are_one_typed_field_and_version_2_scores_move_there():
    from curate.core.records import TeacherScores

    mined = TeacherScores("mini", positive=0.61, positive_rank=3, margin=0.05, pool=100, positives=[0.7, 0.61],
                          stage="mine")
    rec = _record(teacher=mined, scores={"judges": {"refute": {"a": "refute"}}})
    again = Record.from_dict(json.loads(json.dumps(rec.to_dict())))
    assert again == rec and again.teacher.own_positive() == 0.7  # the record's own positive, not the anchor
    assert TeacherScores("f", positive=0.8).own_positive() == 0.8
    old = {**_record().to_dict(), "schema_version": 2, "teacher": None,
           "scores": {"teacher": {"model": "mini", "positive": 0.9, "negative_ranks": [2, 5, 6, 9], "margin": 0.1},
                      "judges": {}}}
    up = Record.from_dict(old)
    assert up.teacher == TeacherScores("mini", positive=0.9, margin=0.1)
    assert [n.teacher_rank for n in up.negatives] == [2, 5, 6, 9]  # each negative carries its own (version 4)
    assert up.scores == {"judges": {}}


def test_version_3_lists_beside_the_negatives_move_onto_them():
    """Schema 3 kept a negative's facts in lists beside the negatives; each one moves onto its
    negative, and a list that no longer lines up is dropped rather than misassigned."""
    negs = [Negative(text="llm", level=1), Negative(text="m1", source="mined", doc_id="d1"),
            Negative(text="m2", source="mined", doc_id="d2")]
    v3 = {**_record(negatives=negs, meta={"mine": {"method": "top-k", "ranks": [4, 9], "doc_ids": ["d1", "d2"],
                                                   "teachers": ["a", "b"]}}).to_dict(),
          "schema_version": 3, "teacher": {"model": "m", "positive": 0.9, "negative_ranks": [7, 2, 5]},
          "scores": {"judges": {"answerable": {"positive": {"j": "yes"},
                                               "negatives": [{"j": "no"}, None, {"j": "partly"}]}}}}
    rec = Record.from_dict(v3)
    assert [(n.teacher_rank, n.mine_rank, n.mined_by) for n in rec.negatives] == [
        (7, None, None), (2, 4, "a"), (5, 9, "b")]
    assert [n.judges for n in rec.negatives] == [{"answerable": {"j": "no"}}, None, {"answerable": {"j": "partly"}}]
    assert rec.meta["mine"] == {"method": "top-k"} and rec.scores["judges"] == {"answerable": {"positive": {"j": "yes"}}}
    rec.keep_negatives([2, 0])  # each negative's facts go where it goes
    assert [(n.text, n.teacher_rank, n.mine_rank) for n in rec.negatives] == [("m2", 5, 9), ("llm", 7, None)]
    assert Record.from_dict(json.loads(json.dumps(rec.to_dict()))) == rec
    v3["teacher"]["negative_ranks"] = [1, 2]  # out of line with the three negatives: says nothing
    assert [n.teacher_rank for n in Record.from_dict(v3).negatives] == [None, None, None]
