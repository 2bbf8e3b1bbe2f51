"""``relabel``: an LLM judge looks again at a record's hardest negatives and relabels them.

Mined negatives come from the top of a retriever's list, and that is exactly where relevant
documents nobody labelled sit: trained as negatives they teach the model to push away right
answers. This step asks the judges (configured as for the other judge steps) about each
*candidate*, a negative the teacher ranks at most ``max_rank`` (its list position when the
record has no teacher ranks; negatives are written hardest first), optionally only those scoring
at least ``min_score``. Each candidate gets one verdict from ``prompts/judge/relabel.j2``:

* ``relevant``: it answers the query too; it leaves the negatives and joins ``positives``;
* ``better``: it answers the query better than the record's positive; the best-scored such
  candidate becomes the positive (the old one joins ``positives``), any other is ``relevant``;
* ``not_relevant``: it stays a negative as it was;
* ``unsure``: it is dropped, neither negative nor positive.

Several judges must agree; a split vote is ``unsure`` (fail closed: a doubtful document is never
trained as a negative). A call that gave no valid answer (after the client's retries and
re-asks) is no verdict at all: the candidate is ``unjudged`` and stays a negative as it was, with
the error's text beside it. A ``cascade`` judge, when given, is asked about exactly the unsure and
unjudged candidates and has the last word; when its own call fails, the first tier's outcome
stands. Records are never dropped here, even when no negative is left. A candidate that stays a
negative carries its verdict itself, as the other judge checks' do: ``judges["relabel"]`` holds
``{verdict, tier}`` (and ``error`` for an unjudged one), so it goes wherever the negative goes; a
negative that left is logged in ``rejected.jsonl`` (``relabel-promoted`` / ``relabel-unsure``) with
its verdict and its judges' answers. (Records written before kept every verdict in
``meta["relabel"]``; reading them moves those onto the negatives, see ``curate.core.records``.)

A broken judge stops the run instead (``judges.CallLog``): refused credentials, a server that
answered none of its calls, or more than half of a server's calls failed.

With ``qrels`` (a BEIR qrels file; records carry their ``meta["query_id"]`` from ``curate mine
--data``) the report measures the promotions against those labels. The miner never takes a
labelled positive as a negative, so that only means something for labels it did not see (a
denser judgment set, or labels held back while mining).

A ``map`` step like the other judges; under a sharded executor the counts add up over shards,
while precision and recall are kept only where every shard has the same (else ``null``: rebuild
them from the counts beside them).
"""

from __future__ import annotations

import asyncio
import copy
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError
from curate.core.params import schema_from_defaults
from curate.core.records import Positive, Record, margin_of
from curate.filter.base import FilterContext, register
from curate.filter.steps.judges import (COMMON_DEFAULTS, CallLog, Judge, Verdict, _failed, _merge, _named,
                                        ask_judges, judging_plan, open_clients, parse_judges, short_error,
                                        verdict_task)
from curate.llm.batch import PENDING
from curate.llm.client import derive_seed

STEP = "relabel"
# The fake test server answers an enum with its first value: not_relevant first, so an unscripted
# candidate stays a negative there. The order means nothing to a real judge.
VERDICTS = ["not_relevant", "relevant", "better", "unsure"]
PROMOTED = ("relevant", "better")
UNJUDGED = "unjudged"  # no judge gave a verdict (its call failed): the negative stays as it was
OUTCOMES = [*VERDICTS, UNJUDGED]
STAYS = ("not_relevant", UNJUDGED)  # outcomes that leave the negative where it is

RELABEL_DEFAULTS: dict[str, Any] = {
    **{k: v for k, v in COMMON_DEFAULTS.items() if k != "on_error"},  # a failed call: always unjudged
    "template": "judge/relabel.j2",
    "max_rank": 10,  # candidates: negatives the teacher ranks at most this (else the first this many)
    "min_score": None,  # and, when set, whose teacher score is at least this
    "per_record": None,  # and at most this many a record, the hardest first (None: all of them)
    "qrels": None,  # a BEIR qrels TSV, for the report's precision/recall of promotions only
    "cascade": None,  # one judge config asked about the candidates the first judges left unsure
}


@dataclass
class Decision:
    """The final verdict on one candidate: ``index`` is its position in the record's negatives."""

    index: int
    verdict: str
    tier: int = 1  # 1: the judges; 2: the cascade judge
    judges: dict[str, str] = field(default_factory=dict)  # each judge's answer, "error" where it failed
    why: str | None = None  # how a first-tier "unsure"/"unjudged" came about: "disagree" or "error"
    errors: dict[str, str] = field(default_factory=dict)  # each failed judge's error text (short)
    first: str | None = None  # the first tier's outcome, when the cascade was asked

    @property
    def error(self) -> str | None:
        """The first failed judge's error text, if any."""
        return next(iter(self.errors.values()), None)


def relabel_params(params: dict[str, Any] | None) -> tuple[dict[str, Any], list[Judge], Judge | None]:
    """The merged parameters, the judges and the cascade judge (None without one)."""
    p = _merge(STEP, params)
    m = p["max_rank"]
    if not isinstance(m, int) or isinstance(m, bool) or m < 1:
        raise CurateError(f"{STEP}: max_rank must be a whole number of at least 1, got {m!r}")
    s = p["min_score"]
    if s is not None and (not isinstance(s, (int, float)) or isinstance(s, bool)):
        raise CurateError(f"{STEP}: min_score must be a number or null, got {s!r}")
    n = p["per_record"]
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
        raise CurateError(f"{STEP}: per_record must be a whole number of at least 1 or null, got {n!r}")
    q = p["qrels"]
    if q is not None and (not isinstance(q, str) or not q.strip()):
        raise CurateError(f"{STEP}: qrels must be the path of a qrels file or null, got {q!r}")
    c = p["cascade"]
    if c is not None and not isinstance(c, dict):
        raise CurateError(f"{STEP}: cascade must be one judge config (a mapping) or null, got {type(c).__name__}")
    judges = parse_judges(STEP, p["judges"])
    cascade = parse_judges(f"{STEP}: cascade", [c])[0] if c is not None else None
    if cascade is not None and cascade.name in {j.name for j in judges}:
        cascade.name = f"cascade:{cascade.name}"  # its answers are labelled apart from the first tier's
    return p, judges, cascade


def candidates(rec: Record, max_rank: int, min_score: float | None = None,
               per_record: int | None = None) -> list[int]:
    """Indices of the negatives to judge: teacher rank at most ``max_rank`` (the first ``max_rank``
    negatives when one of them has no teacher rank), score at least ``min_score`` if set, and
    of those the ``per_record`` hardest: a judge's calls can go to just the negatives an export
    keeps (the hardest one with ``--negatives-per-row 1``)."""
    ranks = [n.teacher_rank for n in rec.negatives]
    if all(r is not None for r in ranks):
        picked = sorted((i for i, r in enumerate(ranks) if r <= max_rank), key=lambda i: (ranks[i], i))
    else:
        picked = list(range(min(max_rank, len(rec.negatives))))
    if min_score is not None:
        picked = [i for i in picked
                  if rec.negatives[i].teacher_score is not None and rec.negatives[i].teacher_score >= min_score]
    return sorted(picked[:per_record])


def first_tier(judges: Sequence[Judge], verdicts: Sequence[Verdict], index: int) -> Decision:
    """One verdict from the judges: theirs when they all agree, ``unsure`` when they do not (fail
    closed), ``unjudged`` when a call failed: a failure says nothing about the document."""
    named = _named(judges, verdicts)
    failed = {name: short_error(e) for name, e in _failed(judges, verdicts).items()}
    if failed:
        return Decision(index, UNJUDGED, 1, named, "error", failed)
    if len({v.verdict for v in verdicts}) > 1:
        return Decision(index, "unsure", 1, named, "disagree")
    return Decision(index, verdicts[0].verdict, 1, named)


def relabel_record(rec: Record, decisions: Sequence[Decision]) -> Record:
    """A copy of ``rec`` with the verdicts applied (``rec`` itself is left as it was).

    Negatives not named in ``decisions`` are untouched, and each keeps its own facts (teacher
    rank, mine's rank, judges' verdicts). The teacher's numbers are brought in line with the new positives: the anchor score
    of a mined record (its lowest positive) can only fall, a new own positive brings its own score
    and rank, and the margin is measured again against the negatives that are left."""
    out = copy.deepcopy(rec)
    negs = out.negatives
    for d in decisions:
        if not 0 <= d.index < len(negs):
            raise ValueError(f"record {rec.id}: no negative {d.index} (it has {len(negs)})")
        if d.verdict not in OUTCOMES:
            raise ValueError(f"record {rec.id}: unknown verdict {d.verdict!r}")
    if len({d.index for d in decisions}) != len(decisions):
        raise ValueError(f"record {rec.id}: a negative has two verdicts")
    for d in decisions:  # on the negative, like every judge's verdict: it follows the negative wherever it goes
        if d.verdict in STAYS:
            negs[d.index].judges = {**(negs[d.index].judges or {}), STEP: {
                "verdict": d.verdict, "tier": d.tier, **({"error": d.error} if d.verdict == UNJUDGED and d.error else {})}}
    gone = {d.index for d in decisions if d.verdict not in STAYS}
    if not gone:
        return out

    def score(k: int) -> float:
        s = negs[k].teacher_score
        return float("-inf") if s is None else s

    better = [d.index for d in decisions if d.verdict == "better"]
    best = max(better, key=lambda k: (score(k), -k)) if better else None  # ties: the harder one
    promoted = [d.index for d in decisions if d.verdict in PROMOTED and d.index != best]

    t = out.teacher
    pos_scores = (list(t.positives) if t is not None and t.positives is not None
                  and len(t.positives) == 1 + len(out.positives) else None)

    def add(positive: Positive, s: float | None) -> None:
        nonlocal pos_scores
        if positive.text == out.positive or any(p.text == positive.text for p in out.positives):
            return  # already a positive: listed once
        out.positives.append(positive)
        if pos_scores is not None:
            pos_scores = pos_scores + [s] if s is not None else None

    if best is not None:
        old, old_score = Positive(out.positive, out.positive_id, out.positive_title), pos_scores[0] if pos_scores else None
        new = negs[best]
        out.positive, out.positive_id, out.positive_title = new.text, new.doc_id, new.title
        if pos_scores is not None:
            pos_scores = [new.teacher_score, *pos_scores[1:]] if new.teacher_score is not None else None
        out.positives = [p for p in out.positives if p.text != new.text]  # it was listed there as well
        if pos_scores is not None and len(pos_scores) != 1 + len(out.positives):
            pos_scores = None
        add(old, old_score)
    for k in promoted:
        add(Positive(negs[k].text, negs[k].doc_id, negs[k].title), negs[k].teacher_score)

    if t is not None:
        if t.positives is not None:
            t.positives = pos_scores
        new_scores = [negs[k].teacher_score for k in [*promoted, *([best] if best is not None else [])]]
        if t.stage == "mine":  # the anchor is the lowest labelled positive: new positives may lower it
            if t.positive is not None:
                t.positive = min([t.positive, *(s for s in new_scores if s is not None)])
            if best is not None:
                t.positive_rank = negs[best].teacher_rank
        elif best is not None:  # the anchor is the record's own positive, which changed
            t.positive = negs[best].teacher_score
            t.positive_rank = negs[best].teacher_rank

    out.keep_negatives([i for i in range(len(negs)) if i not in gone])
    if t is not None:
        left = [n.teacher_score for n in out.negatives]
        t.margin = (margin_of(t.positive, left) if t.positive is not None and all(s is not None for s in left)
                    else None)
    return out


async def _decide(ctx: FilterContext, records: list[Record], todo: dict[int, list[int]], judges: list[Judge],
                  cascade: Judge | None, task, p: dict[str, Any], log: CallLog) -> dict[int, list[Decision]]:
    """Every candidate's decision, by record index: the judges first, the cascade on the unsure and
    unjudged. ``log`` counts the calls and stops the run when a judge is broken."""
    async with open_clients(STEP, ctx, judges + ([cascade] if cascade is not None else [])) as clients:
        async def verdicts(rec: Record, k: int, tier_judges: list[Judge], tier_clients: list, tier: int):
            return await ask_judges(log, tier_judges, tier_clients, task, rec, rec.negatives[k].text,
                                    lambda judge: derive_seed(p["seed"], STEP, rec.id, tier, judge.name, k),
                                    {"positive": rec.positive})

        async def work(i: int) -> list[Decision]:
            rec, ks = records[i], todo[i]
            answers = await asyncio.gather(*(verdicts(rec, k, judges, clients[:len(judges)], 1) for k in ks))
            decisions = [first_tier(judges, vs, k) for k, vs in zip(ks, answers)]
            if cascade is None or any(v.error == PENDING for vs in answers for v in vs):
                return decisions  # (a batch run's pass: the cascade waits for the first tier's answers)
            again = [d for d in decisions if d.verdict in ("unsure", UNJUDGED)]
            answers = await asyncio.gather(*(verdicts(rec, d.index, [cascade], clients[len(judges):], 2)
                                             for d in again))
            for d, (v,) in zip(again, answers):
                d.tier, d.first = 2, d.verdict
                if v.error is None:
                    d.verdict = d.judges[cascade.name] = v.verdict
                else:  # no last word: the first tier's outcome stands
                    d.judges[cascade.name] = "error"
                    d.errors[cascade.name] = short_error(v.error)
            return decisions

        return await log.collect(list(todo), work, p["concurrency"], clients)


def qrels_report(records: list[Record], decided: dict[int, list[Decision]], qrels: dict[str, dict[str, int]],
                 path: str) -> dict[str, Any]:
    """Promotions measured against the labels: precision (promoted and labelled relevant, over all
    promoted) and recall (promoted and labelled relevant, over all labelled-relevant candidates).
    Records whose ``meta["query_id"]`` the qrels do not hold are counted, not measured."""
    c: Counter[str] = Counter()
    for i, decisions in decided.items():
        rec = records[i]
        qid = rec.meta.get("query_id") if isinstance(rec.meta, dict) else None
        if qid is None or str(qid) not in qrels:
            c["records_unmatched"] += 1
            continue
        c["records_matched"] += 1
        relevant = {d for d, s in qrels[str(qid)].items() if s > 0}
        for d in decisions:
            labelled = rec.negatives[d.index].doc_id in relevant
            promoted = d.verdict in PROMOTED
            c["candidates"] += 1
            c["promoted"] += promoted
            c["candidates_in_qrels"] += labelled
            c["promoted_in_qrels"] += promoted and labelled
            c["unsure_in_qrels"] += labelled and d.verdict == "unsure"
            c["kept_negative_in_qrels"] += labelled and d.verdict == "not_relevant"
    keys = ("records_matched", "records_unmatched", "candidates", "promoted", "promoted_in_qrels",
            "candidates_in_qrels", "unsure_in_qrels", "kept_negative_in_qrels")
    out: dict[str, Any] = {"path": path, **{k: c[k] for k in keys}}
    out["precision"] = round(c["promoted_in_qrels"] / c["promoted"], 4) if c["promoted"] else None
    out["recall"] = round(c["promoted_in_qrels"] / c["candidates_in_qrels"], 4) if c["candidates_in_qrels"] else None
    return out


@register(STEP, schema_from_defaults("RelabelParams", RELABEL_DEFAULTS), relabel_params, kind="map")
async def relabel(records: list[Record], params: dict[str, Any], ctx: FilterContext) -> list[Record]:
    p, judges, cascade = relabel_params(params)
    qrels = None
    if p["qrels"] is not None:
        from curate.datasets.beir import read_qrels

        qrels = read_qrels(Path(p["qrels"]))  # read before any request: a bad file stops the run at once
    todo = {i: ks for i, rec in enumerate(records)
            if (ks := candidates(rec, p["max_rank"], p["min_score"], p["per_record"]))}
    base = {"records_in": len(records), "records_judged": len(todo), "judges": [j.name for j in judges],
            "cascade": cascade.name if cascade is not None else None}
    if not todo:
        ctx.note(**base, candidates=0)
        return records

    task = verdict_task(p["template"], VERDICTS, [*p["prompt_dirs"], *ctx.prompt_dirs])
    task.check()
    asked = [(records[i], records[i].negatives[k].text, {"positive": records[i].positive})
             for i, ks in todo.items() for k in ks]
    in_flight = round(min(p["concurrency"], len(todo)) * len(asked) / len(todo)) * len(judges)
    log = CallLog(STEP, ctx.price, judging_plan(STEP, task, judges, asked, in_flight, ctx.price))  # the first tier's
    decided = await _decide(ctx, records, todo, judges, cascade, task, p, log)

    final: Counter[str] = Counter({v: 0 for v in OUTCOMES})
    tiers: dict[str, Counter[str]] = {"tier1": Counter(), "tier2": Counter()}
    why: Counter[str] = Counter()
    errors = changed = replaced = 0
    out: list[Record] = []
    for i, rec in enumerate(records):
        if i not in decided:
            out.append(rec)
            continue
        decisions = decided[i]
        for d in decisions:
            final[d.verdict] += 1
            tiers[f"tier{d.tier}"][d.verdict] += 1
            if d.tier == 2:
                tiers["tier1"][d.first] += 1  # what the first tier said before handing it on
            why[d.why or ""] += 1
            errors += sum(v == "error" for v in d.judges.values())
            if d.verdict not in STAYS:
                neg = rec.negatives[d.index]
                ctx.reject(rec, "relabel-unsure" if d.verdict == "unsure" else "relabel-promoted",
                           {"index": d.index, "doc_id": neg.doc_id, "verdict": d.verdict, "tier": d.tier,
                            "judges": d.judges, **({"why": d.why} if d.why else {}),
                            **({"errors": d.errors} if d.errors else {})}, negative=neg)
        new = relabel_record(rec, decisions)
        changed += any(d.verdict not in STAYS for d in decisions)
        replaced += new.positive != rec.positive
        out.append(new)

    note: dict[str, Any] = {
        **base, "candidates": sum(final.values()), "verdicts": dict(final),
        "first_tier_disagreements": why["disagree"], "first_tier_errors": why["error"], "judge_errors": errors,
        "records_changed": changed, "positives_replaced": replaced,
        "promoted": final["relevant"] + final["better"], "dropped_unsure": final["unsure"],
        "unjudged": final[UNJUDGED], **log.note(),
    }
    if cascade is not None:
        note["sent_to_cascade"] = sum(tiers["tier2"].values())
        note["verdicts_by_tier"] = {"tier1": {v: tiers["tier1"][v] for v in OUTCOMES},
                                    "tier2": {v: tiers["tier2"][v] for v in OUTCOMES}}
    if qrels is not None:
        note["qrels"] = qrels_report(records, decided, qrels, p["qrels"])
    ctx.note(**note)
    return out
