"""LLM judge steps against the scripted fake server (tests/fake_llm_server.py).

Records are built from real SciFact claims and abstracts. The fake server answers an enum
field with its first value unless the prompt carries ``VERDICT[a,b,...]`` (the Nth request with
that marker line gets the Nth value), and fails on ``FAULTS[...]``; the markers sit in the query
or a passage, so they reach the judge's prompt the way real text would.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from curate.core.errors import CurateError
from curate.filter.base import FilterContext
from curate.filter.steps.judges import DEFAULT_REFUTE_PATTERN, QUERY_SCORES, judge_answerable, judge_query, judge_refute
from curate.llm.cache import RequestCache
from curate.llm.client import ClientConfig, LLMClient
from curate.core.records import Negative, Record
from curate.llm.templates import load_template, render
from tests.filter.common import recipe_error
from tests.helpers import scifact_pairs

try:
    from tests.fake_llm_server import fake_llm_server
except ImportError:  # pragma: no cover - tests/ on sys.path without a package
    from fake_llm_server import fake_llm_server

REFUTE_TASK = "Given a scientific claim, retrieve abstracts whose findings refute it."
PLAIN_TASK = "Given a scientific claim, retrieve abstracts with evidence about it."


PAIRS = scifact_pairs(12)
DOCS = [d for _, d in scifact_pairs(20)]


def record(i: int, task: str = REFUTE_TASK, query_prefix: str = "", negatives: list[str] | None = None,
           family: str = "short-long") -> Record:
    claim, doc = PAIRS[i]
    negs = negatives if negatives is not None else DOCS[i + 1: i + 5]
    return Record(id=f"rec-{i}", task_type=family, task=task, query=f"{query_prefix}{claim}", positive=doc,
                  negatives=[Negative(text=t, level=k + 1) for k, t in enumerate(negs)])


class Factory:
    """ctx.llm_factory: an async context manager per judge config, yielding an LLMClient."""

    def __init__(self, default_url: str):
        self.default_url = default_url
        self.calls: list = []
        self.closed = 0

    @contextlib.asynccontextmanager
    async def __call__(self, cfg):
        self.calls.append(cfg)
        url = (cfg or {}).get("base_url", self.default_url)
        client = LLMClient(ClientConfig(base_urls=[url], model="fake", backoff_base=0.01, max_retries=1),
                           RequestCache(None))
        try:
            yield client
        finally:
            await client.close()
            self.closed += 1


def ctx_for(url: str, tmp_path: Path, step: str) -> tuple[FilterContext, Factory]:
    factory = Factory(url)
    ctx = FilterContext(out_dir=tmp_path, llm_factory=factory)
    ctx.step_name = step
    return ctx, factory


def run(step, records, params, ctx):
    return asyncio.run(step(records, params, ctx))


def reasons(ctx) -> list[tuple[str, str, str]]:
    return [(r.id, r.reason, "record" if r.level is None and r.text is None else "negative")
            for r in ctx.rejections]


# --------------------------------------------------------------------------- judge_refute


def test_refute_support_dropped_refute_kept_plain_not_judged(srv, tmp_path):
    recs = [record(0, query_prefix="VERDICT[support] "), record(1, query_prefix="VERDICT[refute] "),
            record(2, task=PLAIN_TASK), record(3, query_prefix="VERDICT[neutral] ")]
    ctx, factory = ctx_for(srv.base_url, tmp_path, "judge_refute")
    kept = run(judge_refute, recs, {}, ctx)
    assert [r.id for r in kept] == ["rec-1", "rec-2", "rec-3"]
    assert reasons(ctx) == [("rec-0", "positive-supports", "record")]
    assert ctx.rejections[0].detail["verdicts"] == {"default": "support"}
    assert kept[0].scores["judges"]["refute"] == {"default": "refute"}
    assert "judges" not in kept[1].scores  # the plain task was not judged
    # one request per judged record; none carries the plain task's claim
    reqs = srv.chat_requests
    assert len(reqs) == 3
    assert not any(PAIRS[2][0] in r.last_user for r in reqs)
    # the judge sees the claim, the positive and (as context) the task
    req = next(r for r in reqs if PAIRS[1][0] in r.last_user)
    assert PAIRS[1][1] in req.last_user and REFUTE_TASK in req.last_user
    schema = req.body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["verdict"]["enum"] == ["support", "refute", "neutral"]
    assert schema["properties"]["reason"]["maxLength"] == 300
    assert factory.calls == [None] and factory.closed == 1
    assert ctx.notes["judge_refute"]["judged"] == 3


def test_non_refute_tasks_send_no_request(srv, tmp_path):
    recs = [record(i, task=t) for i, t in enumerate([
        PLAIN_TASK,
        "Given a question about over-the-counter medicines, retrieve pharmacist answers.",
        "Given a denied insurance claim, retrieve the policy clause that applies.",
        "Given a word, retrieve its opposite.",
    ])]
    ctx, factory = ctx_for(srv.base_url, tmp_path, "judge_refute")
    kept = run(judge_refute, recs, {}, ctx)
    assert kept == recs and ctx.rejections == []
    assert srv.chat_requests == [] and factory.calls == []  # no client opened either


@pytest.mark.parametrize("task", [
    REFUTE_TASK,
    "Given a claim, find evidence that contradicts it.",
    "Retrieve counterarguments to a debate motion.",
    "Given an argument, retrieve a counter-argument.",
    "Find passages that disprove a common health myth.",
    "Given a statement, retrieve texts that deny it.",
    "Given an opinion, retrieve posts that disagree with it.",
    "Retrieve rebuttals of a political argument.",
    "Given a proposal, retrieve comments that oppose it.",
    "Given a hypothesis, find studies that reject it.",
    "Given a claim, retrieve arguments which counter it.",
])
def test_refute_pattern_matches(task):
    assert re.search(DEFAULT_REFUTE_PATTERN, task, re.IGNORECASE)


def test_marker_in_the_task_reaches_the_judge(srv, tmp_path):
    recs = [record(0, task="VERDICT[support] " + REFUTE_TASK), record(1, task="VERDICT[refute] " + REFUTE_TASK)]
    ctx, _ = ctx_for(srv.base_url, tmp_path, "judge_refute")
    kept = run(judge_refute, recs, {}, ctx)
    assert [r.id for r in kept] == ["rec-1"] and reasons(ctx) == [("rec-0", "positive-supports", "record")]


def test_judge_error_fails_closed_or_keeps(srv, tmp_path):
    recs = [record(0, query_prefix="FAULTS[500] "), record(1, query_prefix="VERDICT[refute] ")]
    ctx, _ = ctx_for(srv.base_url, tmp_path, "judge_refute")
    kept = run(judge_refute, recs, {}, ctx)
    assert [r.id for r in kept] == ["rec-1"]
    assert reasons(ctx) == [("rec-0", "judge-error", "record")]
    assert ctx.rejections[0].detail["errors"]["default"].startswith("http-500")
    assert srv.count_for("FAULTS[500]") == 2  # max_retries=1: two attempts, then an error verdict

    recs = [record(0, query_prefix="FAULTS[500] "), record(1, query_prefix="VERDICT[refute] ")]
    ctx, _ = ctx_for(srv.base_url, tmp_path, "judge_refute")
    kept = run(judge_refute, recs, {"on_error": "keep"}, ctx)
    assert [r.id for r in kept] == ["rec-0", "rec-1"] and ctx.rejections == []
    assert kept[0].scores["judges"]["refute"] == {"default": "error"}
    assert ctx.notes["judge_refute"]["kept_despite_errors"] == 1


def test_two_judges_any_support_drops(srv, tmp_path):
    # the same prompt line answers "refute" first, "support" second: one judge each
    recs = [record(0, query_prefix="VERDICT[refute,support] "), record(1, query_prefix="VERDICT[refute] ")]
    ctx, factory = ctx_for(srv.base_url, tmp_path, "judge_refute")
    params = {"judges": [{"name": "a"}, {"name": "b", "params": {"temperature": 0.3}}], "seed": 7}
    kept = run(judge_refute, recs, params, ctx)
    assert [r.id for r in kept] == ["rec-1"]
    assert reasons(ctx) == [("rec-0", "positive-supports", "record")]
    verdicts = ctx.rejections[0].detail["verdicts"]
    assert sorted(verdicts) == ["a", "b"] and sorted(verdicts.values()) == ["refute", "support"]
    assert kept[0].scores["judges"]["refute"] == {"a": "refute", "b": "refute"}
    assert factory.calls == [None]  # name/params are the step's; both on the run's backend: one client
    temps = sorted(r.body["temperature"] for r in srv.chat_requests)
    assert temps == [0.0, 0.0, 0.3, 0.3]
    seeds = {r.body["seed"] for r in srv.chat_requests}
    assert len(seeds) == 4  # each judge and record has its own seed


def test_judge_backends_go_to_the_factory(tmp_path):
    with fake_llm_server() as one, fake_llm_server() as two:
        recs = [record(0, query_prefix="VERDICT[refute] ")]
        ctx, factory = ctx_for(one.base_url, tmp_path, "judge_refute")
        params = {"judges": [None, {"name": "other", "base_url": two.base_url, "params": {"max_tokens": 64}}]}
        kept = run(judge_refute, recs, params, ctx)
        assert len(kept) == 1 and kept[0].scores["judges"]["refute"] == {"default": "refute", "other": "refute"}
        assert factory.calls == [None, {"base_url": two.base_url}]
        assert len(one.chat_requests) == 1 and len(two.chat_requests) == 1
        assert two.chat_requests[0].body["max_tokens"] == 64


def test_judge_steps_of_one_run_share_one_backend(srv, tmp_path):
    """Two judge steps in one recipe open the backend once (one embedded server per filter run)."""
    from curate.filter.recipe import Recipe, StepConfig
    from curate.filter.run import run_steps

    recs = [record(0, query_prefix="VERDICT[support,refute] "), record(1, task=PLAIN_TASK)]
    ctx, factory = ctx_for(srv.base_url, tmp_path, "")
    recipe = Recipe(name="two-judges", path=tmp_path / "r.yaml",
                    steps=[StepConfig("judge_refute", {}), StepConfig("judge_answerable", {"families": ["short-long"]})])
    kept, rows = run_steps(recs, recipe, ctx)
    assert [r["step"] for r in rows] == ["judge_refute", "judge_answerable"]
    assert rows[1]["records_kept"] == len(kept)
    assert len(srv.chat_requests) > 1  # both steps asked the judge
    assert factory.calls == [None] and factory.closed == 1  # opened once, closed once, at the end


def test_refute_needs_a_backend(tmp_path):
    ctx = FilterContext(out_dir=tmp_path)
    ctx.step_name = "judge_refute"
    with pytest.raises(CurateError, match="no LLM backend"):
        run(judge_refute, [record(0)], {}, ctx)
    with pytest.raises(CurateError, match="unknown parameter"):
        run(judge_refute, [record(0)], {"judge": []}, ctx)
    with pytest.raises(CurateError, match="on_error"):
        run(judge_refute, [record(0)], {"on_error": "ignore"}, ctx)


# --------------------------------------------------------------------------- judge_answerable


def test_answerable_positive_and_negatives(srv, tmp_path):
    # no marker: the fake answers "yes" (the enum's first value); "VERDICT[no]" in a text: "no"
    good = [f"VERDICT[no] {d}" for d in DOCS[1:5]]
    leaky = [f"VERDICT[no] {d}" for d in DOCS[5:8]] + [DOCS[8]]
    recs = [
        record(0, task=PLAIN_TASK, negatives=good),
        record(1, task=PLAIN_TASK, negatives=leaky),
        Record(id="rec-bad", task_type="short-long", task=PLAIN_TASK, query=PAIRS[2][0],
               positive=f"VERDICT[no] {PAIRS[2][1]}", negatives=[Negative(text=d) for d in DOCS[9:13]]),
        record(3, task=PLAIN_TASK, negatives=[f"VERDICT[partly] {d}" for d in DOCS[9:13]]),
    ]
    ctx, _ = ctx_for(srv.base_url, tmp_path, "judge_answerable")
    kept = run(judge_answerable, recs, {}, ctx)
    assert [r.id for r in kept] == ["rec-0", "rec-1", "rec-3"]
    assert reasons(ctx) == [("rec-1", "negative-answers", "negative"),
                            ("rec-bad", "positive-not-answering", "record")]
    assert ctx.rejections[0].text == DOCS[8] and ctx.rejections[0].detail["verdicts"] == {"default": "yes"}
    assert [n.text for n in kept[1].negatives] == leaky[:3]
    assert kept[0].scores["judges"]["answerable"] == {"positive": {"default": "yes"}}
    assert [n.judges for n in kept[0].negatives] == [{"answerable": {"default": "no"}}] * 4
    assert len(kept[2].negatives) == 4  # "partly" is not a false negative
    # a record whose positive fails has its negatives left unasked
    assert len(srv.chat_requests) == 5 + 5 + 1 + 5
    # the answerability judge does see the task
    assert PLAIN_TASK in srv.chat_requests[0].last_user


def test_answerable_errors(srv, tmp_path):
    negs = [f"VERDICT[no] {d}" for d in DOCS[1:4]] + [f"FAULTS[500] {DOCS[4]}"]
    recs = [record(0, task=PLAIN_TASK, negatives=negs), record(1, task=PLAIN_TASK, query_prefix="FAULTS[503] ")]
    ctx, _ = ctx_for(srv.base_url, tmp_path, "judge_answerable")
    kept = run(judge_answerable, recs, {}, ctx)
    assert reasons(ctx) == [("rec-0", "judge-error", "negative"), ("rec-1", "judge-error", "record")]
    assert [r.id for r in kept] == ["rec-0"] and len(kept[0].negatives) == 3

    healthy = record(2, task=PLAIN_TASK, negatives=[f"VERDICT[no] {d}" for d in DOCS[5:8]])
    recs = [record(0, task=PLAIN_TASK, negatives=negs), record(1, task=PLAIN_TASK, query_prefix="FAULTS[503] "),
            healthy]  # 6 of 14 calls fail: under half, so the run goes on
    ctx, _ = ctx_for(srv.base_url, tmp_path, "judge_answerable")
    kept = run(judge_answerable, recs, {"on_error": "keep"}, ctx)
    # rec-1: the positive's judge failed, so the negatives were asked too (and failed): all kept
    assert ctx.rejections == [] and [len(r.negatives) for r in kept] == [4, 4, 3]
    assert ctx.notes["judge_answerable"]["judge_calls"] == 14
    assert ctx.notes["judge_answerable"]["judge_calls_failed"] == 6


def test_answerable_all_negatives_answer(srv, tmp_path):
    recs = [record(0, task=PLAIN_TASK)]  # no markers: every text "answers"
    ctx, _ = ctx_for(srv.base_url, tmp_path, "judge_answerable")
    kept = run(judge_answerable, recs, {"families": ["short-long"]}, ctx)
    assert kept == []
    assert reasons(ctx) == [("rec-0", "negative-answers", "negative")] * 4 + [("rec-0", "no-negatives-left", "record")]
    # other families are left alone
    ctx, _ = ctx_for(srv.base_url, tmp_path, "judge_answerable")
    recs = [record(0, task=PLAIN_TASK)]
    assert run(judge_answerable, recs, {"families": ["sts"]}, ctx) == recs


# --------------------------------------------------------------------------- judge_query

FAKE = sys.modules[fake_llm_server.__module__]
SCORES_RE = re.compile(r"SCORES\[([^\]]*)\]")
FROM_CORPUS_TASK = "Given a web search query, retrieve passages that answer it."


@pytest.fixture
def scored(srv, monkeypatch):
    """The fake server answers an integer with its maximum (10 here); ``SCORES[r/s/c,...]`` in a
    prompt pins relevance/support/clarity instead, the Nth request with that marker line getting
    the Nth triple (the last repeats), the way ``VERDICT[...]`` scripts a verdict."""
    counts: Counter[str] = Counter()
    lock = threading.Lock()
    original = FAKE.request_schema

    def scripted(body):
        schema = original(body)
        key, triples = FAKE.find_marker(body.get("messages"), SCORES_RE)
        props = schema.get("properties") or {}
        if key is None or "relevance" not in props:
            return schema
        with lock:
            counts[key] += 1
            triple = triples[min(counts[key], len(triples)) - 1].split("/")
        pinned = {n: {**props[n], "const": int(v)} for n, v in zip(QUERY_SCORES, triple)}
        return {**schema, "properties": {**props, **pinned}}

    monkeypatch.setattr(FAKE, "request_schema", scripted)
    return srv


def qrecord(i: int, marker: str = "", family: str = "short-long") -> Record:
    return record(i, task=FROM_CORPUS_TASK, query_prefix=f"{marker} " if marker else "", negatives=[],
                  family=family)


def test_query_scores_keep_and_drop(scored, tmp_path):
    recs = [qrecord(0), qrecord(1, "SCORES[7/7/7]"), qrecord(2, "SCORES[9/6/9]")]
    ctx, factory = ctx_for(scored.base_url, tmp_path, "judge_query")
    kept = run(judge_query, recs, {}, ctx)
    assert [r.id for r in kept] == ["rec-0", "rec-1"]  # 7 is enough: the threshold is "at least"
    assert kept[0].scores["judges"]["query"] == {"default": {"relevance": 10, "support": 10, "clarity": 10}}
    assert kept[1].scores["judges"]["query"] == {"default": {"relevance": 7, "support": 7, "clarity": 7}}
    assert reasons(ctx) == [("rec-2", "query-below-threshold", "record")]
    numbers = ctx.rejections[0].detail
    assert numbers["scores"] == {"default": {"relevance": 9, "support": 6, "clarity": 9}}
    assert numbers["judges"] == ["default"] and numbers["min_score"] == 7
    assert isinstance(numbers["reasons"]["default"], str)
    # one request per record, with the query, the positive and the task, asking for three 1-10 ints
    reqs = scored.chat_requests
    assert len(reqs) == 3
    req = next(r for r in reqs if PAIRS[0][0] in r.last_user)
    assert PAIRS[0][1] in req.last_user and FROM_CORPUS_TASK in req.last_user
    schema = req.body["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["reason", "relevance", "support", "clarity"]
    assert all(schema["properties"][n] == {"type": "integer", "minimum": 1, "maximum": 10} for n in QUERY_SCORES)
    assert schema["properties"]["reason"]["maxLength"] == 300
    assert factory.calls == [None] and factory.closed == 1
    note = ctx.notes["judge_query"]
    assert note["judged"] == 3 and note["below_threshold"] == 1 and note["records_with_judge_errors"] == 0


def test_query_min_score_is_a_parameter(scored, tmp_path):
    recs = [qrecord(0, "SCORES[9/6/9]"), qrecord(1, "SCORES[4/4/4]")]
    ctx, _ = ctx_for(scored.base_url, tmp_path, "judge_query")
    kept = run(judge_query, recs, {"min_score": 5}, ctx)
    assert [r.id for r in kept] == ["rec-0"] and reasons(ctx) == [("rec-1", "query-below-threshold", "record")]


def test_query_invalid_answers_fail_closed_or_keep(scored, tmp_path):
    # an empty answer, one missing keys, and one out of range (a backend not held to the schema)
    markers = ["FAULTS[empty]", "FAULTS[badschema]", "SCORES[0/9/9]"]
    healthy = [qrecord(i) for i in (3, 4, 5)]  # half the calls answer: a judge that fails more stops the run
    recs = [qrecord(i, m) for i, m in enumerate(markers)] + healthy
    ctx, _ = ctx_for(scored.base_url, tmp_path, "judge_query")
    kept = run(judge_query, recs, {}, ctx)
    assert [r.id for r in kept] == ["rec-3", "rec-4", "rec-5"]
    assert reasons(ctx) == [(f"rec-{i}", "judge-error", "record") for i in range(3)]
    for rej in ctx.rejections:
        assert rej.detail["scores"] == {"default": "error"} and rej.detail["errors"]["default"]
    assert ctx.notes["judge_query"]["records_with_judge_errors"] == 3

    recs = [qrecord(i, m) for i, m in enumerate(markers)] + healthy
    ctx, _ = ctx_for(scored.base_url, tmp_path, "judge_query")
    kept = run(judge_query, recs, {"on_error": "keep"}, ctx)
    assert [r.id for r in kept] == [f"rec-{i}" for i in range(6)] and ctx.rejections == []
    assert all(r.scores["judges"]["query"] == {"default": "error"} for r in kept[:3])
    assert ctx.notes["judge_query"]["kept_despite_errors"] == 3


def test_query_other_families_pass_unasked(scored, tmp_path):
    recs = [qrecord(0, "SCORES[2/2/2]", family="short-long"), qrecord(1, "SCORES[2/2/2]", family="sts")]
    ctx, _ = ctx_for(scored.base_url, tmp_path, "judge_query")
    kept = run(judge_query, recs, {"families": "sts"}, ctx)
    assert [r.id for r in kept] == ["rec-0"] and reasons(ctx) == [("rec-1", "query-below-threshold", "record")]
    assert "judges" not in kept[0].scores  # untouched
    assert len(scored.chat_requests) == 1 and PAIRS[0][0] not in scored.chat_requests[0].last_user

    ctx, factory = ctx_for(scored.base_url, tmp_path, "judge_query")
    recs = [qrecord(0, family="short-long")]
    assert run(judge_query, recs, {"families": ["long-long"]}, ctx) == recs
    assert factory.calls == [] and len(scored.chat_requests) == 1  # no client, no new request


def test_query_two_judges_any_low_score_drops(scored, tmp_path):
    # the same prompt line gets 9/9/9 first and 9/4/9 second: one triple per judge
    recs = [qrecord(0, "SCORES[9/9/9,9/4/9]"), qrecord(1, "SCORES[8/8/8]")]
    ctx, factory = ctx_for(scored.base_url, tmp_path, "judge_query")
    kept = run(judge_query, recs, {"judges": [{"name": "a"}, {"name": "b"}]}, ctx)
    assert [r.id for r in kept] == ["rec-1"]
    assert kept[0].scores["judges"]["query"] == {n: {"relevance": 8, "support": 8, "clarity": 8} for n in "ab"}
    assert reasons(ctx) == [("rec-0", "query-below-threshold", "record")]
    numbers = ctx.rejections[0].detail
    low = numbers["judges"]
    assert len(low) == 1 and numbers["scores"][low[0]] == {"relevance": 9, "support": 4, "clarity": 9}
    other = ({"a", "b"} - set(low)).pop()
    assert numbers["scores"][other] == {"relevance": 9, "support": 9, "clarity": 9}
    assert factory.calls == [None] and len(scored.chat_requests) == 4


@pytest.mark.parametrize("params, needle", [
    ("{min_score: 11}", "step 1: judge_query: min_score must be a whole number from 1 to 10, got 11"),
    ("{min_score: 0}", "min_score must be a whole number from 1 to 10, got 0"),
    ("{min_score: x}", "step 1 (judge_query): min_score: expected a whole number or null, got 'x'"),
    ("{min_scor: 7}", "unknown parameter 'min_scor' (did you mean min_score?)"),
])
def test_query_recipe_params_are_checked_at_load(tmp_path, params, needle):
    assert needle in recipe_error(tmp_path / "r.yaml", f"steps:\n  - judge_query: {params}\n")


def test_query_recipe_loads_and_needs_a_backend(tmp_path):
    from curate.filter.recipe import load_recipe

    path = tmp_path / "r.yaml"
    path.write_text("steps:\n  - judge_query: {min_score: 8, families: [short-long]}\n")
    assert load_recipe(str(path)).steps[0].name == "judge_query"
    ctx = FilterContext(out_dir=tmp_path)
    ctx.step_name = "judge_query"
    with pytest.raises(CurateError, match="judge_query needs an LLM judge"):
        run(judge_query, [qrecord(0)], {}, ctx)


# --------------------------------------------------------------------------- templates


@pytest.mark.parametrize("name", ["judge/refute.j2", "judge/answerable.j2", "judge/query.j2"])
def test_templates_render_in_the_sandbox(name):
    text = render(load_template(name), {"task": "T-TASK", "query": "Q-QUERY {{ 7*7 }}", "passage": "P-PASSAGE"})
    assert "Q-QUERY {{ 7*7 }}" in text and "P-PASSAGE" in text  # values are data, never template code
    assert "49" not in text
    assert "T-TASK" in text
    with pytest.raises(CurateError, match="undefined"):
        render(load_template(name), {"query": "q"})
