"""A judge that fails its calls (issue 32): ``relabel`` and the judge filter steps against a server
that refuses the key, answers garbage or HTML, or times out, and one that fails only some calls.

A failed call is no verdict: relabel keeps the negative as it was (``unjudged``, its error beside
it), and a broken judge (refused credentials, nothing answered, more than half failed) stops the
run with one line naming the server, before anything is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from pathlib import Path

import pytest

from curate.core.errors import CurateError
from curate.core.records import Negative, Record, TeacherScores
from curate.filter.base import FilterContext
from curate.filter.steps.judges import EARLY_CALLS, judge_answerable, judge_query, judge_refute
from curate.filter.steps.relabel import relabel
from curate.llm.cache import RequestCache
from curate.llm.client import ClientConfig, LLMClient
from tests.helpers import assert_one_line_error, read_jsonl, run_curate, scifact_pairs

FAKE_LLM_TIMEOUT_SLEEP = 3  # the srv fixture's 'timeout' sleep; the client gives up long before
TASK = "Given a scientific claim, retrieve abstracts whose findings refute it."  # judge_refute asks about it
PAIRS = scifact_pairs(24)
DOCS = [d for _, d in scifact_pairs(60)][24:]
FAST = ("--model", "fake", "--max-retries", "0", "--max-reasks", "1", "--backoff-base", "0", "--timeout", "1")
KEY = "sk-test-secret-key-0123456789"


def mined(q: int, markers: list[str]) -> Record:
    """A record as ``curate mine`` writes it, one negative per marker ("" for none)."""
    claim, positive = PAIRS[q]
    negs = [Negative(text=f"{m} {DOCS[q + k]}".strip(), teacher_score=0.5 - k / 100, source="mined",
                     doc_id=f"doc{q}-{k}") for k, m in enumerate(markers)]
    return Record(id=f"rec-{q}", task_type="retrieval", task=TASK, query=claim, positive=positive,
                  positive_id=f"pos{q}", negatives=negs,
                  teacher=TeacherScores(model="teacher", positive=0.8, margin=0.3, stage="mine"),
                  meta={"query_id": f"q{q}"})


class Factory:
    """ctx.llm_factory: one LLMClient on ``url`` per judge config, quick to give up."""

    def __init__(self, url: str, api_key: str | None = None):
        self.url, self.api_key = url, api_key

    @contextlib.asynccontextmanager
    async def __call__(self, cfg):
        client = LLMClient(ClientConfig(base_urls=[(cfg or {}).get("base_url", self.url)], model="fake",
                                        api_key=self.api_key, backoff_base=0.01, max_retries=0, max_reasks=0,
                                        timeout=1.0), RequestCache(None))
        try:
            yield client
        finally:
            await client.close()


def run_step(step, name: str, records: list[Record], params: dict, url: str, tmp_path: Path,
             api_key: str | None = None) -> tuple[list[Record], FilterContext]:
    ctx = FilterContext(out_dir=tmp_path, llm_factory=Factory(url, api_key))
    ctx.step_name = name
    return asyncio.run(step(records, params, ctx)), ctx


def filter_cli(srv, tmp_path: Path, records: list[Record], out: Path, recipe: str = "relabel"):
    """``curate filter`` on ``records`` against the scripted server, with an API key set;
    ``recipe``: a shipped recipe's name or one step's YAML (``- judge_refute: {}``)."""
    if recipe.startswith("- "):
        (tmp_path / "recipe.yaml").write_text(f"steps:\n  {recipe}\n")
        recipe = str(tmp_path / "recipe.yaml")
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in records), encoding="utf-8")
    return run_curate("filter", "--in", str(inp), "--out", str(out), "--recipe", recipe,
                      "--base-url", srv.base_url, *FAST,
                      env={"CURATE_CACHE_DIR": str(tmp_path / "cache"), "OPENAI_API_KEY": KEY})


# --------------------------------------------------------------------------- relabel, through the CLI


@pytest.mark.parametrize("code", ["401", "403"])
def test_relabel_refused_key_stops_before_writing_and_keeps_old_outputs(srv, tmp_path, code):
    out = tmp_path / "out"
    good = filter_cli(srv, tmp_path, [mined(0, ["", ""])], out)
    assert good.returncode == 0, good.stderr
    before = (out / "filtered.jsonl").read_bytes()

    proc = filter_cli(srv, tmp_path, [mined(q, [f"FAULTS[{code}]", f"FAULTS[{code}]"]) for q in range(3)], out)
    assert_one_line_error(proc, "relabel: the judge server", srv.base_url, f"http-{code}", "API key")
    assert KEY not in proc.stderr + proc.stdout
    assert (out / "filtered.jsonl").read_bytes() == before  # the old run's outputs, intact
    assert not list(out.glob(".curate-staging-*"))


@pytest.mark.parametrize("fault,error", [("malformed", "invalid-json"), ("html", "bad-response"),
                                         ("timeout", "timeout")])
def test_relabel_server_that_answers_nothing_stops_the_run(srv, tmp_path, fault, error):
    recs = [mined(q, [f"FAULTS[{fault}]"] * 2) for q in range(2)]
    proc = filter_cli(srv, tmp_path, recs, tmp_path / "out")
    assert_one_line_error(proc, f"relabel: the judge server {srv.base_url} answered none of its 4 calls",
                          f"first error: {error}")
    assert not (tmp_path / "out" / "filtered.jsonl").exists()
    assert not list((tmp_path / "out").glob(".curate-staging-*"))


def test_relabel_more_than_half_failed_stops_the_run(srv, tmp_path):
    recs = [mined(0, ["FAULTS[500]", "FAULTS[500]", ""])]
    proc = filter_cli(srv, tmp_path, recs, tmp_path / "out")
    assert_one_line_error(proc, f"the judge server {srv.base_url} failed 2 of its 3 calls (more than 50%)",
                          "first error: http-500")
    assert not (tmp_path / "out" / "filtered.jsonl").exists()


def test_relabel_some_calls_fail_the_negatives_stay_unjudged(srv, tmp_path):
    recs = [mined(0, ["FAULTS[html]", "VERDICT[relevant]", ""]), mined(1, ["", "FAULTS[500]", "VERDICT[unsure]"])]
    out = tmp_path / "out"
    proc = filter_cli(srv, tmp_path, recs, out)
    assert proc.returncode == 0, proc.stderr
    kept = {r["id"]: Record.from_dict(r) for r in read_jsonl(out / "filtered.jsonl")}
    assert [n.doc_id for n in kept["rec-0"].negatives] == ["doc0-0", "doc0-2"]  # the failed one kept as it was
    failed = kept["rec-0"].negatives[0]
    assert dataclasses.replace(failed, judges=None) == recs[0].negatives[0]  # as it was, beside its verdict
    assert [n.doc_id for n in kept["rec-1"].negatives] == ["doc1-0", "doc1-1"]
    on = {n.doc_id: n.judges["relabel"] for r in kept.values() for n in r.negatives if "relabel" in (n.judges or {})}
    assert on["doc0-0"]["verdict"] == "unjudged" and on["doc0-0"]["error"].startswith("bad-response")
    assert on["doc1-1"]["verdict"] == "unjudged" and on["doc1-1"]["error"].startswith("http-500")
    report = json.loads((out / "report.json").read_text())
    (row,) = [s for s in report["steps"] if s["step"] == "relabel"]
    assert row["negatives_dropped"] == {"relabel-promoted": 1, "relabel-unsure": 1}  # no drop for a failure
    note = row["notes"]
    assert note["unjudged"] == 2 and note["verdicts"]["unjudged"] == 2 and note["judge_errors"] == 2
    assert note["judge_calls"] == 6 and note["judge_calls_failed"] == 2
    assert note["first_errors"] and all(e.startswith(("bad-response", "http-500")) for e in note["first_errors"])


# --------------------------------------------------------------------------- relabel, in process


def test_relabel_refused_key_stops_at_once(srv, tmp_path):
    """One record in flight at a time: the run stops at the first refusal instead of asking the rest."""
    recs = [mined(q, ["FAULTS[401]"]) for q in range(12)]
    with pytest.raises(CurateError) as e:
        run_step(relabel, "relabel", recs, {"concurrency": 1}, srv.base_url, tmp_path, api_key=KEY)
    assert srv.base_url in str(e.value) and "http-401" in str(e.value) and KEY not in str(e.value)
    assert "\n" not in str(e.value)
    assert len(srv.chat_requests) <= 2  # the one that failed, and the one started beside it


def test_relabel_cascade_failure_leaves_the_first_tier_outcome(srv, tmp_path):
    """The cascade shares the judges' server here, so one marker line scripts all three calls: the
    two judges split (unsure), then the cascade's call fails; the split vote stands and is dropped."""
    recs = [mined(0, ["VERDICT[relevant,not_relevant] FAULTS[ok,ok,500]", "", "", ""])]
    params = {"judges": [{"name": "a"}, {"name": "b"}], "cascade": {"name": "big", "params": {"temperature": 0.5}}}
    (rec,), ctx = run_step(relabel, "relabel", recs, params, srv.base_url, tmp_path)
    assert len(srv.chat_requests) == 9  # four candidates, two judges, and the cascade once
    detail = ctx.rejections[0].detail  # a candidate that left has its verdict in rejected.jsonl
    assert (detail["doc_id"], detail["verdict"], detail["tier"]) == ("doc0-0", "unsure", 2)
    assert [n.doc_id for n in rec.negatives] == ["doc0-1", "doc0-2", "doc0-3"]
    (drop,) = ctx.rejections
    assert drop.reason == "relabel-unsure" and drop.detail["why"] == "disagree"
    assert drop.detail["judges"]["big"] == "error" and drop.detail["errors"]["big"].startswith("http-500")
    note = ctx.notes["relabel"]
    assert note["verdicts_by_tier"]["tier2"]["unsure"] == 1 and note["judge_calls_failed"] == 1


# --------------------------------------------------------------------------- the judge filter steps


def qrec(i: int, marker: str = "") -> Record:
    claim, doc = PAIRS[i]
    return Record(id=f"rec-{i}", task_type="short-long", task=TASK, query=f"{marker} {claim}".strip(),
                  positive=doc, negatives=[Negative(text=f"VERDICT[no] {DOCS[i]}", level=1)])


STEPS = [(judge_refute, "judge_refute"), (judge_answerable, "judge_answerable"), (judge_query, "judge_query")]


@pytest.mark.parametrize("step,name", STEPS)
def test_judge_step_refused_key_stops(srv, tmp_path, step, name):
    with pytest.raises(CurateError) as e:
        run_step(step, name, [qrec(0, "FAULTS[401]"), qrec(1)], {}, srv.base_url, tmp_path, api_key=KEY)
    msg = str(e.value)
    assert msg.startswith(f"{name}: the judge server {srv.base_url} refused") and "http-401" in msg
    assert KEY not in msg and "\n" not in msg


@pytest.mark.parametrize("step,name", STEPS)
@pytest.mark.parametrize("fault", ["malformed", "html", "timeout"])
def test_judge_step_that_answers_nothing_stops_instead_of_dropping_everything(srv, tmp_path, step, name, fault):
    recs = [qrec(i, f"FAULTS[{fault}]") for i in range(3)]
    with pytest.raises(CurateError, match=rf"^{name}: the judge server .* answered none of its 3 calls; first error"):
        run_step(step, name, recs, {}, srv.base_url, tmp_path)


def test_judge_step_more_than_half_failed_stops(srv, tmp_path):
    recs = [qrec(0, "FAULTS[500]"), qrec(1, "FAULTS[500]"), qrec(2)]
    with pytest.raises(CurateError, match=r"failed 2 of its 3 calls \(more than 50%\); first error: http-500"):
        run_step(judge_refute, "judge_refute", recs, {}, srv.base_url, tmp_path)


def test_judge_step_some_calls_fail_counted_and_logged(srv, tmp_path):
    recs = [qrec(0, "FAULTS[html]"), qrec(1, "VERDICT[refute]"), qrec(2, "VERDICT[support]")]
    kept, ctx = run_step(judge_refute, "judge_refute", recs, {}, srv.base_url, tmp_path)
    assert [r.id for r in kept] == ["rec-1"]
    drops = {r.id: r for r in ctx.rejections}
    assert drops["rec-0"].reason == "judge-error" and drops["rec-0"].detail["errors"]["default"].startswith(
        "bad-response")
    note = ctx.notes["judge_refute"]
    assert note["judge_calls"] == 3 and note["judge_calls_failed"] == 1 and note["records_with_judge_errors"] == 1


def test_judge_step_early_stop_on_a_dead_server(srv, tmp_path):
    """A server that fails its first calls stops the run without waiting for every record."""
    recs = [qrec(i, "FAULTS[503]") for i in range(EARLY_CALLS + 8)]
    with pytest.raises(CurateError, match=f"answered none of its {EARLY_CALLS} calls"):
        run_step(judge_query, "judge_query", recs, {"concurrency": 1}, srv.base_url, tmp_path)
    assert len(srv.chat_requests) <= EARLY_CALLS + 1


def test_judge_step_refused_key_through_the_cli(srv, tmp_path):
    proc = filter_cli(srv, tmp_path, [qrec(0, "FAULTS[401]"), qrec(1)], tmp_path / "out",
                      recipe="- judge_refute: {}")
    assert_one_line_error(proc, "judge_refute: the judge server", srv.base_url, "http-401")
    assert KEY not in proc.stderr and not (tmp_path / "out" / "filtered.jsonl").exists()
