"""The judges' checks for the reasoning and instruction-negatives specs: judge_answerable run
with another template, verdict list, negatives to read and family, from the shipped recipes
filters/reasoning.yaml and filters/instruction.yaml, against the scripted fake server
(``VERDICT[...]`` in a text scripts the verdict on it; tests/fake_llm_server.py)."""

from __future__ import annotations

import pytest

from curate.core.records import Negative, Record
from curate.filter.recipe import load_recipe
from curate.filter.steps.judges import judge_answerable
from curate.llm.templates import load_template, render
from tests.filter.common import recipe_error
from tests.filter.test_judges import ctx_for, reasons, run

STEP = "judge_answerable"
INSTRUCTION_TASK = "Given a query and an instruction, retrieve documents that answer the query and meet the instruction."
REASONING_TASK = "Given a description of a problem, retrieve documents whose knowledge helps reason it out."


def _params(recipe: str) -> dict:
    (step,) = [s for s in load_recipe(recipe).steps if s.name == STEP]
    return dict(step.params)


def instruction_record(rid: str, positive: str = "", level1: str = "") -> Record:
    query, instruction = f"cast iron pan rust {rid}", "Only documents written before 1950 are relevant."
    return Record(id=rid, task_type="instruction-negatives", task=INSTRUCTION_TASK, query=f"{query}. {instruction}",
                  positive=f"{positive} A 1932 household manual on seasoning a rusty skillet with lard.",
                  negatives=[Negative(text=f"{level1} A 2019 blog post on removing rust from a skillet.", level=1),
                             Negative(text="A 1940 note on enamel pans that does not mention rust.", level=2),
                             Negative(text="Rust on bicycle chains and how to oil them.", level=3),
                             Negative(text="The history of the Iron Age in northern Europe.", level=4)],
                  meta={"query_parts": {"query": query, "instruction": instruction}})


def reasoning_record(rid: str, positive: str = "", family: str = "reasoning") -> Record:
    return Record(id=rid, task_type=family, task=REASONING_TASK,
                  query=f"My bread dough rose fine in summer but barely rises in my cold kitchen now. Why? {rid}",
                  positive=f"{positive} Yeast metabolism slows sharply as temperature drops below about 20 C.",
                  negatives=[Negative(text=f"A kitchen dough recipe for summer bread number {k}.", level=k)
                             for k in range(1, 5)])


def test_the_shipped_recipes_load_as_entries_of_the_one_step():
    assert [s.name for s in load_recipe("reasoning").steps][-1] == STEP
    assert [s.name for s in load_recipe("instruction").steps][-1] == STEP
    r, i = _params("reasoning"), _params("instruction")
    assert (r["check"], r["families"], r["negatives"]) == ("reasoning", ["reasoning"], [])
    assert (i["check"], i["families"], i["negatives"]) == ("instruction", ["instruction-negatives"], [1])
    for p in (r, i):
        load_template(p["template"])


def test_a_negative_that_follows_the_instruction_is_dropped(srv, tmp_path):
    recs = [instruction_record("false-neg", "VERDICT[follows-instruction]", "VERDICT[follows-instruction]"),
            instruction_record("good", "VERDICT[follows-instruction]", "VERDICT[breaks-instruction]"),
            instruction_record("bad-positive", "VERDICT[breaks-instruction]"),
            instruction_record("off-topic-neg", "VERDICT[follows-instruction]", "VERDICT[off-topic]"),
            reasoning_record("other-family")]
    ctx, _ = ctx_for(srv.base_url, tmp_path, STEP)
    kept = run(judge_answerable, recs, _params("instruction"), ctx)
    assert [r.id for r in kept] == ["false-neg", "good", "off-topic-neg", "other-family"]
    assert reasons(ctx) == [("false-neg", "negative-fails-instruction", "negative"),
                            ("bad-positive", "positive-fails-instruction", "record")]
    assert ctx.rejections[0].level == 1
    false_neg, good = kept[0], kept[1]
    assert [n.level for n in false_neg.negatives] == [2, 3, 4], "the record keeps its other levels"
    assert [n.level for n in good.negatives] == [1, 2, 3, 4]
    assert good.scores["judges"]["instruction"] == {"positive": {"default": "follows-instruction"}}
    assert [n.judges for n in good.negatives] == [  # each negative carries its verdicts; levels 2-4 were not read
        {"instruction": {"default": "breaks-instruction"}}, None, None, None]
    assert [n.judges for n in false_neg.negatives] == [None, None, None]
    assert "judges" not in kept[3].scores, "another family is not judged"
    # the positive and the level-1 negative are asked (not the positive's negatives when it fails)
    assert len(srv.chat_requests) == 2 + 2 + 1 + 2
    req = srv.chat_requests[0]
    assert req.body["response_format"]["json_schema"]["schema"]["properties"]["verdict"]["enum"] == [
        "breaks-instruction", "follows-instruction", "off-topic"]
    prompt = req.last_user
    assert "Instruction:\nOnly documents written before 1950 are relevant." in prompt, "shown apart from the query"
    assert INSTRUCTION_TASK in prompt


def test_a_positive_that_needs_no_reasoning_drops_the_record(srv, tmp_path):
    recs = [reasoning_record("surface", "VERDICT[surface-match]"), reasoning_record("reasoned", "VERDICT[needs-reasoning]"),
            reasoning_record("unrelated", "VERDICT[unrelated]"), instruction_record("other-family")]
    ctx, _ = ctx_for(srv.base_url, tmp_path, STEP)
    kept = run(judge_answerable, recs, _params("reasoning"), ctx)
    assert [r.id for r in kept] == ["reasoned", "other-family"]
    assert reasons(ctx) == [("surface", "positive-fails-reasoning", "record"),
                            ("unrelated", "positive-fails-reasoning", "record")]
    assert ctx.rejections[0].detail["verdicts"] == {"default": "surface-match"}
    assert kept[0].scores["judges"]["reasoning"] == {"positive": {"default": "needs-reasoning"}}
    assert [n.judges for n in kept[0].negatives] == [None] * 4
    assert len(kept[0].negatives) == 4
    assert len(srv.chat_requests) == 3, "one call a record: the positive only"
    assert ctx.notes[STEP]["verdicts"] == {"positive:surface-match": 1, "positive:needs-reasoning": 1,
                                           "positive:unrelated": 1}


def test_the_default_check_is_unchanged(srv, tmp_path):
    recs = [reasoning_record("r", family="short-long")]
    ctx, _ = ctx_for(srv.base_url, tmp_path, STEP)
    kept = run(judge_answerable, recs, {}, ctx)  # the fake says "yes" to all: every negative answers
    assert kept == [] and reasons(ctx)[0] == ("r", "negative-answers", "negative")
    schema = srv.chat_requests[0].body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["verdict"]["enum"] == ["yes", "partly", "no"]


def test_a_later_drop_takes_each_negatives_verdicts_with_it():
    rec = instruction_record("x")
    rec.negatives[0].judges = {"instruction": {"j": "breaks-instruction"}}
    rec.keep_negatives([3, 0])
    assert [n.judges for n in rec.negatives] == [None, {"instruction": {"j": "breaks-instruction"}}]
    again = Record.from_dict(rec.to_dict())  # written and read back as a stage reads it
    assert [n.judges for n in again.negatives] == [None, {"instruction": {"j": "breaks-instruction"}}]


def test_version_3_verdicts_beside_the_negatives_are_moved_onto_them():
    rec = instruction_record("x").to_dict()
    rec["schema_version"] = 3
    rec["scores"] = {"judges": {"instruction": {"positive": {"j": "follows-instruction"},
                                                "negatives": [{"j": "breaks-instruction"}, None, None, None]}}}
    got = Record.from_dict(rec)
    assert got.scores["judges"] == {"instruction": {"positive": {"j": "follows-instruction"}}}
    assert [n.judges for n in got.negatives] == [{"instruction": {"j": "breaks-instruction"}}, None, None, None]


@pytest.mark.parametrize("params, needle", [
    ("{verdicts: [a, b], positive_fail: [c]}", "positive_fail names c, which is not one of the verdicts (a, b)"),
    ("{verdicts: [a, b], positive_fail: [a]}", "negative_fail names yes"),
    ("{negatives: [0]}", "negatives must be null (all) or a list of levels"),
    ("{check: Two Words}", "check must be a plain lower-case name"),
    ("{verdicts: [a, a]}", "verdicts must be a list of distinct names"),
])
def test_check_params_are_checked_at_load(tmp_path, params, needle):
    assert needle in recipe_error(tmp_path / "r.yaml", f"steps:\n  - judge_answerable: {params}\n")


def test_no_negatives_read_needs_no_negative_verdicts(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("steps:\n  - judge_answerable: {verdicts: [a, b], positive_fail: [b], negatives: []}\n")
    assert load_recipe(str(path)).steps[0].params["negatives"] == []


@pytest.mark.parametrize("name", ["judge/reasoning.j2", "judge/instruction.j2"])
def test_templates_render_in_the_sandbox(name):
    text = render(load_template(name), {"task": "T-TASK", "query": "Q-QUERY {{ 7*7 }}", "passage": "P-PASSAGE"})
    assert "Q-QUERY {{ 7*7 }}" in text and "P-PASSAGE" in text and "T-TASK" in text and "49" not in text
    parts = {"query": "Q-ALONE", "instruction": "I-ALONE"}
    text = render(load_template(name), {"task": "t", "query": "q", "passage": "p", "query_parts": parts})
    assert ("I-ALONE" in text) == (name == "judge/instruction.j2")
