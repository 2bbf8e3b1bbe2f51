"""``relabel``: the pure application of verdicts, and every verdict path through ``curate filter``.

Records look like ``curate mine`` output (mined negatives with corpus ids and teacher scores,
``meta.query_id``), built from SciFact claims and abstracts. The scripted server
(tests/fake_llm_server.py) answers a verdict enum with its first value (``not_relevant``) unless
the candidate's text carries ``VERDICT[...]`` (one value per judge asking) or ``FAULTS[...]``;
the template puts the candidate after the query and the positive, so its marker is the one found.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curate.core.errors import CurateError
from curate.core.records import Negative, Positive, Record, TeacherScores
from curate.filter.base import FilterContext
from curate.filter.recipe import load_recipe
from curate.filter.steps.relabel import Decision, candidates, relabel, relabel_record
from curate.llm.cache import RequestCache
from curate.llm.client import ClientConfig, LLMClient
from curate.llm.templates import load_template, render
from tests.filter.common import recipe_error
from tests.helpers import assert_one_line_error, read_jsonl, run_curate, scifact_pairs

try:
    from tests.fake_llm_server import fake_llm_server
except ImportError:  # pragma: no cover - tests/ on sys.path without a package
    from fake_llm_server import fake_llm_server

TASK = "Given a scientific claim, retrieve research abstracts about it."
OTHER_TASK = "Given a health claim, retrieve abstracts that test it."
PAIRS = scifact_pairs(8)  # claims, and the first 8 abstracts as their positives
DOCS = [d for _, d in scifact_pairs(40)]  # abstracts 8.. are the negatives
FAST = ("--model", "fake", "--max-retries", "0", "--max-reasks", "1", "--backoff-base", "0")


def neg(k: int, marker: str = "", score: float | None = 0.5, level: int | None = None) -> Negative:
    return Negative(text=f"{marker} {DOCS[k]}" if marker else DOCS[k], level=level, teacher_score=score,
                    source="mined", doc_id=f"doc{k}")


def mined(q: int, negs: list[Negative], ranks: list[int] | None = None, stage: str | None = "mine",
          anchor: float = 0.8, task: str = TASK, query_id: bool = True) -> Record:
    """A record as ``curate mine --data`` writes it (``stage=None``: as filter's teacher steps do)."""
    claim, positive = PAIRS[q]
    scores = [n.teacher_score for n in negs]
    negs = [dataclasses.replace(n) for n in negs]  # one negative may serve two records (each has its own ranks)
    for k, n in enumerate(negs):  # each negative carries its teacher rank and mine's rank
        n.teacher_rank, n.mine_rank = (ranks[k] if ranks and k < len(ranks) else None), k + 3
    teacher = TeacherScores(model="teacher", positive=anchor, positive_rank=2, pool=100,
                            margin=anchor - max(scores) if negs else None,
                            positives=[anchor] if stage == "mine" else None, stage=stage)
    meta = {"source": "beir", "mine": {"method": "top-k"}}
    if query_id:
        meta["query_id"] = f"q{q}"
    return Record(id=f"rec-{q}", task_type="retrieval", task=task, query=claim, positive=positive,
                  positive_id=f"pos{q}", negatives=negs, teacher=teacher, meta=meta)


def verdicts(rec: Record) -> list[tuple[str, dict]]:
    """Each negative's relabel verdict, which it carries itself (``judges["relabel"]``)."""
    return [(n.doc_id, n.judges["relabel"]) for n in rec.negatives if "relabel" in (n.judges or {})]


def all_verdicts(out: Path, rec: Record) -> dict[str, dict]:
    """Every candidate's verdict by doc_id: on the negatives that stayed, in ``rejected.jsonl`` for
    those that left."""
    found = {r["detail"]["doc_id"]: {"verdict": r["detail"]["verdict"], "tier": r["detail"]["tier"]}
             for r in read_jsonl(out / "rejected.jsonl") if r["step"] == "relabel" and r["id"] == rec.id}
    return {**found, **dict(verdicts(rec))}


# --------------------------------------------------------------------------- the pure function


def test_relevant_leaves_the_negatives_for_the_positives():
    rec = mined(0, [neg(8, score=0.7), neg(9, score=0.6), neg(10, score=0.5)], ranks=[1, 2, 3])
    before = rec.to_dict()
    out = relabel_record(rec, [Decision(1, "relevant")])
    assert rec.to_dict() == before  # the input is left as it was
    assert [n.doc_id for n in out.negatives] == ["doc8", "doc10"]
    assert out.positives == [Positive(DOCS[9], "doc9")] and out.positive == PAIRS[0][1]
    t = out.teacher
    assert [n.teacher_rank for n in out.negatives] == [1, 3]
    assert [n.mine_rank for n in out.negatives] == [3, 5]
    assert t.positives == [0.8, 0.6]  # aligned with all_positives()
    assert t.positive == 0.6  # mine's anchor is the lowest labelled positive
    assert t.margin == pytest.approx(0.6 - 0.7)
    assert "relabel" not in out.meta and verdicts(out) == []  # the one judged left; rejected.jsonl has its verdict


@pytest.mark.parametrize("stage", [None, "mine"])
def test_better_becomes_the_positive(stage):
    rec = mined(0, [neg(8, score=0.85), neg(9, score=0.7), neg(10, score=0.6)], ranks=[1, 3, 4], stage=stage)
    out = relabel_record(rec, [Decision(0, "better"), Decision(1, "not_relevant")])
    assert (out.positive, out.positive_id) == (DOCS[8], "doc8")
    assert out.positives == [Positive(PAIRS[0][1], "pos0")]
    assert [n.doc_id for n in out.negatives] == ["doc9", "doc10"]
    t = out.teacher
    assert [n.teacher_rank for n in out.negatives] == [3, 4] and t.positive_rank == 1
    if stage == "mine":
        assert t.positive == 0.8 and t.positives == [0.85, 0.8]  # the anchor: still the lowest positive
    else:
        assert t.positive == 0.85 and t.positives is None  # the anchor: the record's own positive
    assert t.margin == pytest.approx(t.positive - 0.7)


def test_two_betters_the_higher_scored_wins_the_other_is_relevant():
    rec = mined(1, [neg(8, score=0.70), neg(9, score=0.4), neg(10, score=0.75)], ranks=[1, 2, 3])
    out = relabel_record(rec, [Decision(0, "better"), Decision(1, "not_relevant"), Decision(2, "better")])
    assert (out.positive, out.positive_id) == (DOCS[10], "doc10")
    assert out.positives == [Positive(PAIRS[1][1], "pos1"), Positive(DOCS[8], "doc8")]
    assert [n.doc_id for n in out.negatives] == ["doc9"]
    assert out.teacher.positives == [0.75, 0.8, 0.70] and out.teacher.positive == 0.70
    assert verdicts(out) == [("doc9", {"verdict": "not_relevant", "tier": 1})]  # on the negative that stays


def test_not_relevant_stays_unsure_goes_non_candidates_untouched():
    negs = [neg(8, score=0.7, level=1), neg(9, score=0.65, level=2), neg(10, score=0.6, level=3),
            neg(11, score=0.5, level=4)]
    rec = mined(2, negs, ranks=[2, 5, 30, 40])
    out = relabel_record(rec, [Decision(0, "not_relevant"), Decision(1, "unsure", tier=2)])
    assert [(n.doc_id, n.level, n.teacher_score) for n in out.negatives] == [
        ("doc8", 1, 0.7), ("doc10", 3, 0.6), ("doc11", 4, 0.5)]  # as they were, levels included
    assert out.negatives[1:] == rec.negatives[2:]
    assert out.positives == [] and out.positive == rec.positive  # unsure is no positive either
    assert [n.teacher_rank for n in out.negatives] == [2, 30, 40] and out.teacher.positive == 0.8
    assert out.teacher.margin == pytest.approx(0.8 - 0.7)
    assert [n.mine_rank for n in out.negatives] == [3, 5, 6]
    assert verdicts(out) == [("doc8", {"verdict": "not_relevant", "tier": 1})]  # unsure doc9 left, with its verdict


def test_nothing_moves_when_every_verdict_is_not_relevant():
    rec = mined(3, [neg(8, score=0.7), neg(9, score=0.6)], ranks=[1, 2])
    out = relabel_record(rec, [Decision(0, "not_relevant"), Decision(1, "not_relevant")])
    assert [dataclasses.replace(n, judges=None) for n in out.negatives] == rec.negatives and out.teacher == rec.teacher
    assert out.meta == rec.meta and [v["verdict"] for _, v in verdicts(out)] == ["not_relevant"] * 2


def test_records_that_kept_the_verdicts_in_meta_read_with_them_on_their_negatives():
    """The one-release reader: ``meta.relabel`` named each candidate by its index before the
    promoted and unsure ones left; reading moves each kept verdict onto its negative, and a verdict
    whose negative a later step dropped vouches for nothing."""
    rec = mined(4, [neg(8, score=0.7), neg(9, score=0.6), neg(10, score=0.5), neg(11, score=0.4)], ranks=[1, 2, 3, 4])
    new = relabel_record(rec, [Decision(0, "not_relevant"), Decision(1, "relevant"), Decision(2, "unjudged")])
    old = new.to_dict()
    for n in old["negatives"]:
        n.pop("judges", None)
    old["meta"]["relabel"] = [{"index": 0, "doc_id": "doc8", "verdict": "not_relevant", "tier": 1},
                              {"index": 1, "doc_id": "doc9", "verdict": "relevant", "tier": 1},
                              {"index": 2, "doc_id": "doc10", "verdict": "unjudged", "tier": 1, "error": "http-500"}]
    read = Record.from_dict(json.loads(json.dumps(old)))
    assert "relabel" not in read.meta and read.meta == new.meta
    assert verdicts(read) == [("doc8", {"verdict": "not_relevant", "tier": 1}),
                              ("doc10", {"verdict": "unjudged", "tier": 1, "error": "http-500"})]
    del old["negatives"][0]  # a later step dropped doc8: its verdict goes with it, doc10's is found by its id
    read = Record.from_dict(json.loads(json.dumps(old)))
    assert [d for d, _ in verdicts(read)] == ["doc10"] and read.negatives[1].judges is None


def test_a_record_may_end_without_negatives():
    rec = mined(4, [neg(8, score=0.7), neg(9, score=0.6)])  # no teacher ranks, as mine writes them
    out = relabel_record(rec, [Decision(0, "relevant"), Decision(1, "unsure")])
    assert out.negatives == [] and out.teacher.margin is None
    assert out.positives == [Positive(DOCS[8], "doc8")] and out.meta["mine"] == rec.meta["mine"]


def test_judge_answerable_verdicts_follow_the_negatives():
    rec = mined(5, [neg(8), neg(9), neg(10)])
    rec.scores = {"judges": {"answerable": {"positive": {"a": "yes"}}}}
    for n, v in zip(rec.negatives, ("no", "partly", "no")):
        n.judges = {"answerable": {"a": v}}
    out = relabel_record(rec, [Decision(1, "relevant")])
    assert [n.judges for n in out.negatives] == [{"answerable": {"a": "no"}}] * 2


def test_bad_decisions_are_refused():
    rec = mined(0, [neg(8)])
    with pytest.raises(ValueError, match="no negative 3"):
        relabel_record(rec, [Decision(3, "relevant")])
    with pytest.raises(ValueError, match="unknown verdict 'maybe'"):
        relabel_record(rec, [Decision(0, "maybe")])
    with pytest.raises(ValueError, match="two verdicts"):
        relabel_record(rec, [Decision(0, "relevant"), Decision(0, "unsure")])


def test_candidates_by_rank_else_by_position():
    negs = [neg(8, score=0.7), neg(9, score=0.65), neg(10, score=0.6), neg(11, score=0.5)]
    assert candidates(mined(0, negs, ranks=[3, 12, 7, 25]), 10) == [0, 2]
    assert candidates(mined(0, negs, ranks=[3, 12, 7, 25]), 10, min_score=0.65) == [0]
    assert candidates(mined(0, negs), 2) == [0, 1]  # no ranks: the first max_rank, hardest first
    assert candidates(mined(0, negs, ranks=[1, 2]), 3) == [0, 1, 2]  # a negative without a rank: the same
    assert candidates(mined(0, negs), 10, min_score=0.6) == [0, 1, 2]
    no_teacher = mined(0, negs)
    no_teacher.teacher = None
    assert candidates(no_teacher, 3) == [0, 1, 2]
    # per_record: the hardest of them by teacher rank (a record's negatives need not be in rank order),
    # else by position; indices stay in record order
    assert candidates(mined(0, negs, ranks=[7, 12, 3, 25]), 10, per_record=1) == [2]
    assert candidates(mined(0, negs, ranks=[7, 12, 3, 5]), 10, per_record=2) == [2, 3]
    assert candidates(mined(0, negs), 10, per_record=2) == [0, 1]
    assert candidates(mined(0, negs, ranks=[3, 12, 7, 25]), 10, min_score=0.65, per_record=3) == [0]


def test_template_renders_in_the_sandbox():
    text = render(load_template("judge/relabel.j2"),
                  {"task": "T-TASK", "query": "Q-QUERY {{ 7*7 }}", "positive": "P-POS", "passage": "C-CAND"})
    assert text.index("Q-QUERY {{ 7*7 }}") < text.index("P-POS") < text.index("C-CAND") and "49" not in text
    for verdict in ("relevant", "better", "not_relevant", "unsure"):
        assert f'"{verdict}"' in text
    with pytest.raises(CurateError, match="undefined"):
        render(load_template("judge/relabel.j2"), {"task": "t", "query": "q", "passage": "p"})


# --------------------------------------------------------------------------- parameters


@pytest.mark.parametrize("params, needle", [
    ("{max_rank: 0}", "step 1: relabel: max_rank must be a whole number of at least 1, got 0"),
    ("{max_rank: x}", "step 1 (relabel): max_rank: expected a whole number or null, got 'x'"),
    ("{max_rank: null}", "relabel: max_rank must be a whole number of at least 1, got None"),
    ("{per_record: 0}", "relabel: per_record must be a whole number of at least 1 or null, got 0"),
    ("{min_score: high}", "relabel: min_score must be a number or null, got 'high'"),
    ("{qrels: 5}", "relabel: qrels must be the path of a qrels file or null, got 5"),
    ("{cascade: [null]}", "relabel: cascade must be one judge config (a mapping) or null, got list"),
    ("{cascade: {params: 3}}", "relabel: cascade: judge 1: params must be a mapping"),
    ("{judges: []}", "relabel: judges must be a non-empty list"),
    ("{max_rnk: 3}", "unknown parameter 'max_rnk' (did you mean max_rank?)"),
    ("{on_error: keep}", "unknown parameter 'on_error'"),  # relabel always fails closed
])
def test_bad_parameters_are_one_line_at_load(tmp_path, params, needle):
    assert needle in recipe_error(tmp_path / "r.yaml", f"steps:\n  - relabel: {params}\n")


def test_shipped_recipe_loads_with_the_defaults():
    (step,) = load_recipe("filters/relabel.yaml").steps
    assert step.name == "relabel"
    assert {k: step.params[k] for k in ("max_rank", "min_score", "qrels", "cascade")} == {
        "max_rank": 10, "min_score": None, "qrels": None, "cascade": None}


def test_bad_parameter_through_the_cli_is_one_line(tmp_path):
    inp = tmp_path / "mined.jsonl"
    inp.write_text(json.dumps(mined(0, [neg(8)]).to_dict()) + "\n")
    recipe = tmp_path / "r.yaml"
    recipe.write_text("steps:\n  - relabel: {max_rank: -2}\n")
    proc = run_curate("filter", "--in", str(inp), "--out", str(tmp_path / "o"), "--recipe", str(recipe))
    assert_one_line_error(proc, "relabel: max_rank must be a whole number of at least 1, got -2")


# --------------------------------------------------------------------------- in process: a bench's scripted judge


class Factory:
    """ctx.llm_factory: one LLMClient per judge config (its base_url, else the default server)."""

    def __init__(self, url: str):
        self.url, self.calls = url, []

    @contextlib.asynccontextmanager
    async def __call__(self, cfg):
        self.calls.append(cfg)
        client = LLMClient(ClientConfig(base_urls=[(cfg or {}).get("base_url", self.url)], model="fake",
                                        backoff_base=0.01, max_retries=0, max_reasks=0), RequestCache(None))
        try:
            yield client
        finally:
            await client.close()


CANDIDATE_RE = re.compile(r"Candidate document:\n(.*?)\n\nChoose one verdict", re.S)


def test_a_judge_scripted_from_qrels_drives_the_step(tmp_path):
    """How a benchmark can stand in for the LLM: the server answers each request from code, here
    by looking the candidate up in qrels; with a perfect judge precision and recall are 1."""
    recs = [mined(0, [neg(8), neg(9), neg(10)]), mined(1, [neg(11), neg(12)]), mined(2, [neg(13)], query_id=False)]
    by_text = {n.text: (r.meta.get("query_id"), n.doc_id) for r in recs for n in r.negatives}
    relevant = {("q0", "doc9"), ("q1", "doc11")}
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t1\n" for q, d in sorted(relevant))
                     + "q0\tpos0\t1\nq1\tdoc12\t0\n")

    def from_qrels(body):
        text = CANDIDATE_RE.search(body["messages"][-1]["content"]).group(1)
        return {"reason": "from the labels", "verdict": "relevant" if by_text[text] in relevant else "not_relevant"}

    with fake_llm_server(responder=from_qrels) as srv:
        ctx = FilterContext(out_dir=tmp_path, llm_factory=Factory(srv.base_url))
        ctx.step_name = "relabel"
        out = asyncio.run(relabel(recs, {"qrels": str(qrels)}, ctx))
        assert len(srv.chat_requests) == 6
    assert [[p.doc_id for p in r.positives] for r in out] == [["doc9"], ["doc11"], []]
    note = ctx.notes["relabel"]
    assert note["verdicts"] == {"not_relevant": 4, "relevant": 2, "better": 0, "unsure": 0, "unjudged": 0}
    assert note["qrels"] == {"path": str(qrels), "records_matched": 2, "records_unmatched": 1, "candidates": 5,
                             "promoted": 2, "promoted_in_qrels": 2, "candidates_in_qrels": 2, "unsure_in_qrels": 0,
                             "kept_negative_in_qrels": 0, "precision": 1.0, "recall": 1.0}


def test_no_candidates_no_client(tmp_path):
    recs = [mined(0, [neg(8)], ranks=[40])]
    factory = Factory("http://127.0.0.1:9/v1")
    ctx = FilterContext(out_dir=tmp_path, llm_factory=factory)
    ctx.step_name = "relabel"
    assert asyncio.run(relabel(recs, {}, ctx)) == recs and factory.calls == []
    assert ctx.notes["relabel"]["candidates"] == 0


# --------------------------------------------------------------------------- end to end: curate filter


def _write(path: Path, recs: list[Record]) -> Path:
    path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in recs), encoding="utf-8")
    return path


def _report(out: Path) -> dict:
    report = json.loads((out / "report.json").read_text())
    (row,) = [r for r in report["steps"] if r["step"] == "relabel"]
    return row


def _asked(srv, k: int) -> int:
    """How many requests showed abstract ``k`` as the candidate."""
    return sum(DOCS[k] in CANDIDATE_RE.search(r.last_user).group(1) for r in srv.chat_requests)


SHARED = neg(22, "VERDICT[relevant]", 0.62)  # promoted for rec-3; an untouched deep negative of rec-4


@pytest.fixture(scope="module")
def one_judge(tmp_path_factory):
    """One judge, every verdict; candidates by position (rec-0, 1, 3) and by teacher rank (rec-2, 4)."""
    tmp = tmp_path_factory.mktemp("relabel")
    recs = [
        mined(0, [neg(8, "VERDICT[relevant]", 0.70), neg(9, "VERDICT[not_relevant]", 0.69, level=2),
                  neg(10, "VERDICT[unsure]", 0.68), neg(11, "FAULTS[badschema]", 0.67),
                  neg(12, "FAULTS[500]", 0.66), neg(13, "VERDICT[relevant]", 0.65)]),  # the 6th: not a candidate
        mined(1, [neg(14, "VERDICT[better]", 0.70), neg(15, "VERDICT[better]", 0.75), neg(16, score=0.60),
                  neg(17, "VERDICT[maybe]", 0.55)]),  # "maybe" is no verdict: an invalid answer
        mined(2, [neg(18, "VERDICT[not_relevant]", 0.7), neg(19, "VERDICT[relevant]", 0.69), neg(20, score=0.68),
                  neg(21, "VERDICT[relevant]", 0.6)], ranks=[3, 12, 4, 25]),
        mined(3, [SHARED], task=OTHER_TASK, query_id=False),
        mined(4, [neg(23, score=0.6), SHARED], ranks=[1, 30], task=OTHER_TASK),
    ]
    inp = _write(tmp / "mined.jsonl", recs)
    qrels = tmp / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\n"
                     "q0\tpos0\t1\nq0\tdoc8\t1\nq0\tdoc10\t1\nq0\tdoc13\t1\n"
                     "q1\tpos1\t1\nq1\tdoc15\t2\nq1\tdoc16\t0\n"
                     "q2\tpos2\t1\nq2\tdoc20\t1\n"
                     "q4\tpos4\t1\n")
    recipe = tmp / "relabel.yaml"
    recipe.write_text(f"steps:\n  - relabel: {{max_rank: 5, qrels: {json.dumps(str(qrels))}}}\n")
    out = tmp / "out"
    with fake_llm_server(timeout_sleep=5) as srv:
        proc = run_curate("filter", "--in", str(inp), "--out", str(out), "--recipe", str(recipe),
                          "--base-url", srv.base_url, *FAST, env={"CURATE_CACHE_DIR": str(tmp / "cache")})
        assert proc.returncode == 0, proc.stderr
        asked = {k: _asked(srv, k) for k in range(8, 24)}
        faults = {m: srv.count_for(f"FAULTS[{m}]") for m in ("500", "badschema")}
    kept = {r["id"]: Record.from_dict(r) for r in read_jsonl(out / "filtered.jsonl")}
    return {"tmp": tmp, "recs": recs, "out": out, "kept": kept, "asked": asked, "faults": faults}


def test_every_verdict_through_the_cli(one_judge):
    kept, recs = one_judge["kept"], one_judge["recs"]
    assert list(kept) == [r.id for r in recs]  # no record is ever dropped
    r0 = kept["rec-0"]
    # not_relevant, the two whose calls failed (kept as they were: a failure is no verdict), the non-candidate
    assert [n.doc_id for n in r0.negatives] == ["doc9", "doc11", "doc12", "doc13"]
    assert r0.negatives[0].level == 2
    assert [dataclasses.replace(n, judges=None) for n in r0.negatives] == [recs[0].negatives[k] for k in (1, 3, 4, 5)]
    assert r0.positives == [Positive(recs[0].negatives[0].text, "doc8")]
    judged = all_verdicts(one_judge["out"], r0)
    assert {d: (v["verdict"], v["tier"]) for d, v in judged.items()} == {
        "doc8": ("relevant", 1), "doc9": ("not_relevant", 1), "doc10": ("unsure", 1), "doc11": ("unjudged", 1),
        "doc12": ("unjudged", 1)}
    assert "relabel" not in r0.meta
    errors = {d: v.get("error") for d, v in judged.items()}
    assert errors["doc11"].startswith("schema:") and errors["doc12"].startswith("http-500")
    assert errors["doc8"] is None and errors["doc10"] is None
    r1 = kept["rec-1"]
    assert (r1.positive, r1.positive_id) == (recs[1].negatives[1].text, "doc15")
    assert r1.positives == [Positive(PAIRS[1][1], "pos1"), Positive(recs[1].negatives[0].text, "doc14")]
    assert [n.doc_id for n in r1.negatives] == ["doc16", "doc17"]  # "maybe" is no verdict: doc17 stays
    r2 = kept["rec-2"]
    assert [n.doc_id for n in r2.negatives] == ["doc18", "doc19", "doc20", "doc21"]
    assert [n.teacher_rank for n in r2.negatives] == [3, 12, 4, 25] and r2.positives == []
    assert kept["rec-3"].negatives == [] and kept["rec-3"].positives == [Positive(SHARED.text, "doc22")]
    assert [n.doc_id for n in kept["rec-4"].negatives] == ["doc23", "doc22"]
    # the judge saw exactly the candidates: never a negative past max_rank, by rank or by position
    asked = one_judge["asked"]
    assert {k for k, n in asked.items() if n} == {8, 9, 10, 11, 12, 14, 15, 16, 17, 18, 20, 22, 23}
    assert one_judge["faults"] == {"500": 1, "badschema": 2}  # no retry; an invalid answer: one re-ask
    assert asked[17] == 2 and asked[12] == 1 and asked[22] == 1  # "maybe" is invalid too


def test_report_and_rejections(one_judge):
    row = _report(one_judge["out"])
    assert row["records_dropped"] == {}
    assert row["negatives_dropped"] == {"relabel-promoted": 4, "relabel-unsure": 1}
    note = row["notes"]
    assert note["candidates"] == 13 and note["records_judged"] == 5
    assert note["verdicts"] == {"relevant": 2, "better": 2, "not_relevant": 5, "unsure": 1, "unjudged": 3}
    assert note["first_tier_errors"] == 3 and note["judge_errors"] == 3 and note["first_tier_disagreements"] == 0
    assert note["judge_calls"] == 13 and note["judge_calls_failed"] == 3 and note["unjudged"] == 3
    assert len(note["first_errors"]) == 1 and note["first_errors"][0]  # one server: its first error's text
    assert note["records_changed"] == 3 and note["positives_replaced"] == 1
    assert note["promoted"] == 4 and note["dropped_unsure"] == 1 and "verdicts_by_tier" not in note
    q = note["qrels"]
    assert {k: q[k] for k in ("records_matched", "records_unmatched", "candidates", "promoted", "promoted_in_qrels",
                              "candidates_in_qrels", "unsure_in_qrels", "kept_negative_in_qrels")} == {
        "records_matched": 4, "records_unmatched": 1, "candidates": 12, "promoted": 3, "promoted_in_qrels": 2,
        "candidates_in_qrels": 4, "unsure_in_qrels": 1, "kept_negative_in_qrels": 1}
    assert q["precision"] == pytest.approx(2 / 3, abs=1e-4) and q["recall"] == 0.5
    rejected = [r for r in read_jsonl(one_judge["out"] / "rejected.jsonl") if r["step"] == "relabel"]
    assert all(r["target"] == "negative" for r in rejected)
    unsure = {r["detail"]["doc_id"]: r["detail"] for r in rejected if r["reason"] == "relabel-unsure"}
    assert set(unsure) == {"doc10"}  # a failed call drops nothing
    assert unsure["doc10"]["judges"] == {"default": "unsure"} and "why" not in unsure["doc10"]


def test_export_of_relabelled_records(one_judge):
    """sentence-transformers export of the output: it works, and a promoted document is never among
    its query's negatives, not even borrowed by rec-3 (left without negatives) from rec-4, its batch
    mate, which still has that document as a deep negative."""
    export = one_judge["tmp"] / "export"
    proc = run_curate("export", "--in", str(one_judge["out"] / "filtered.jsonl"), "--out", str(export),
                      "--format", "sentence-transformers", "--negatives-per-row", "all", "--batch-size", "2",
                      "--dev-fraction", "0")
    assert proc.returncode == 0, proc.stderr
    rows = [row for f in sorted(export.rglob("*.parquet")) for row in pq.read_table(f).to_pylist()]
    kept = one_judge["kept"]
    by_positive = {r.positive: r for r in kept.values()}
    assert sorted(by_positive[row["positive"]].id for row in rows) == sorted(kept)
    for row in rows:
        rec = by_positive[row["positive"]]
        negatives = [v for k, v in row.items() if k.startswith("negative_")]
        assert all(negatives)
        promoted = {p.text for p in rec.all_positives()}
        assert not promoted & set(negatives), rec.id
    (r3,) = [row for row in rows if by_positive[row["positive"]].id == "rec-3"]
    assert SHARED.text not in r3.values() and DOCS[23] in r3.values()


def test_judges_that_disagree_leave_the_candidate_unsure(tmp_path):
    recs = [mined(0, [neg(8, "VERDICT[relevant]"), neg(9, "VERDICT[relevant,not_relevant]"),
                      neg(10, "VERDICT[better,relevant]"), neg(11)])]
    inp = _write(tmp_path / "mined.jsonl", recs)
    recipe = tmp_path / "two.yaml"
    recipe.write_text("steps:\n  - relabel: {judges: [{name: a}, {name: b, params: {temperature: 0.2}}]}\n")
    with fake_llm_server(timeout_sleep=5) as srv:
        proc = run_curate("filter", "--in", str(inp), "--out", str(tmp_path / "out"), "--recipe", str(recipe),
                          "--base-url", srv.base_url, *FAST, env={"CURATE_CACHE_DIR": str(tmp_path / "cache")})
        assert proc.returncode == 0, proc.stderr
        assert len(srv.chat_requests) == 8  # each candidate, each judge
    (rec,) = [Record.from_dict(r) for r in read_jsonl(tmp_path / "out" / "filtered.jsonl")]
    assert [n.doc_id for n in rec.negatives] == ["doc11"] and [p.doc_id for p in rec.positives] == ["doc8"]
    assert {d: v["verdict"] for d, v in all_verdicts(tmp_path / "out", rec).items()} == {
        "doc8": "relevant", "doc9": "unsure", "doc10": "unsure", "doc11": "not_relevant"}
    note = _report(tmp_path / "out")["notes"]
    assert note["first_tier_disagreements"] == 2 and note["judges"] == ["a", "b"]
    rejected = {r["detail"]["doc_id"]: r["detail"] for r in read_jsonl(tmp_path / "out" / "rejected.jsonl")}
    assert rejected["doc9"]["why"] == "disagree"
    assert sorted(rejected["doc9"]["judges"].values()) == ["not_relevant", "relevant"]


def test_the_cascade_sees_only_what_the_first_judges_left_unsure(tmp_path):
    recs = [mined(0, [neg(8, "VERDICT[relevant]", 0.7), neg(9, "VERDICT[better,not_relevant]", 0.69),
                      neg(10, "VERDICT[unsure]", 0.68), neg(11, "FAULTS[500]", 0.67), neg(12, score=0.66)])]
    inp = _write(tmp_path / "mined.jsonl", recs)

    def second_look(body):  # the stronger judge settles what the first ones called unsure
        return {"reason": "second look", "verdict": "relevant"} if DOCS[10] in body["messages"][-1]["content"] else None

    with fake_llm_server(timeout_sleep=5) as first, fake_llm_server(healthy=True, responder=second_look) as big:
        recipe = tmp_path / "cascade.yaml"
        recipe.write_text("steps:\n  - relabel:\n      judges: [{name: a}, {name: b}]\n"
                          f"      cascade: {{name: big, base_url: '{big.base_url}', model: fake}}\n")
        proc = run_curate("filter", "--in", str(inp), "--out", str(tmp_path / "out"), "--recipe", str(recipe),
                          "--base-url", first.base_url, *FAST, env={"CURATE_CACHE_DIR": str(tmp_path / "cache")})
        assert proc.returncode == 0, proc.stderr
        assert len(first.chat_requests) == 10  # five candidates, two judges, no retry of the 500
        assert sorted(_asked(big, k) for k in range(8, 13)) == [0, 0, 1, 1, 1]
        assert {k for k in range(8, 13) if _asked(big, k)} == {9, 10, 11}
        assert all(r.body["model"] == "fake" for r in big.chat_requests)
    (rec,) = [Record.from_dict(r) for r in read_jsonl(tmp_path / "out" / "filtered.jsonl")]
    assert {d: (v["verdict"], v["tier"]) for d, v in all_verdicts(tmp_path / "out", rec).items()} == {
        "doc8": ("relevant", 1), "doc9": ("better", 2), "doc10": ("relevant", 2), "doc11": ("not_relevant", 2),
        "doc12": ("not_relevant", 1)}
    assert rec.positive_id == "doc9" and [p.doc_id for p in rec.positives] == ["pos0", "doc8", "doc10"]
    assert [n.doc_id for n in rec.negatives] == ["doc11", "doc12"]
    note = _report(tmp_path / "out")["notes"]
    assert note["cascade"] == "big" and note["sent_to_cascade"] == 3
    assert note["verdicts_by_tier"] == {
        "tier1": {"not_relevant": 1, "relevant": 1, "better": 0, "unsure": 2, "unjudged": 1},
        "tier2": {"not_relevant": 1, "relevant": 1, "better": 1, "unsure": 0, "unjudged": 0}}
    assert note["verdicts"] == {"not_relevant": 2, "relevant": 2, "better": 1, "unsure": 0, "unjudged": 0}
    assert note["first_tier_errors"] == 1 and note["first_tier_disagreements"] == 1 and note["judge_errors"] == 2
    rejected = {r["detail"]["doc_id"]: r["detail"] for r in read_jsonl(tmp_path / "out" / "rejected.jsonl")}
    assert rejected["doc10"]["judges"] == {"a": "unsure", "b": "unsure", "big": "relevant"}


def test_prompts_dir_gives_the_judges_a_template_of_your_own(tmp_path):
    """``filter --prompts-dir`` is searched for a judge's template (after the step's own
    prompt_dirs, before the shipped prompts/), and a changed folder is a changed run."""
    recs = [mined(0, [neg(8), neg(9)])]
    inp = _write(tmp_path / "mined.jsonl", recs)
    recipe = tmp_path / "one.yaml"
    recipe.write_text("steps:\n  - relabel: {}\n")
    own = tmp_path / "mine" / "judge"
    own.mkdir(parents=True)
    shipped = load_template("judge/relabel.j2").filename
    own.joinpath("relabel.j2").write_text("HOUSE STYLE\n" + Path(shipped).read_text(encoding="utf-8"), encoding="utf-8")
    with fake_llm_server(timeout_sleep=5) as srv:
        args = ("filter", "--in", str(inp), "--out", str(tmp_path / "out"), "--recipe", str(recipe),
                "--base-url", srv.base_url, *FAST)
        env = {"CURATE_CACHE_DIR": str(tmp_path / "cache")}
        proc = run_curate(*args, env=env)
        assert proc.returncode == 0, proc.stderr
        assert not any("HOUSE STYLE" in r.body["messages"][-1]["content"] for r in srv.chat_requests)
        sent = len(srv.chat_requests)
        proc = run_curate(*args, "--prompts-dir", str(tmp_path / "mine"), env=env)
        assert proc.returncode == 0, proc.stderr
        asked = srv.chat_requests[sent:]
        assert len(asked) == 2, "the folder changed the run: both candidates judged again"
        assert all(r.body["messages"][-1]["content"].startswith("HOUSE STYLE") for r in asked)
