"""`curate filter` on SciFact triplets with planted faults: each is caught by the right step.

Clean records are built from SciFact train (a claim, its labelled abstract, two near
negatives the teacher ranks high but below the positive, two random ones, levels ordered by
teacher score). Then one fault is planted per record, and the report, rejected.jsonl and
filtered.jsonl must show exactly those drops. Judges run on the scripted fake server.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from curate.datasets.beir import load_beir
from curate.embed.cache import EmbeddingCache
from curate.embed.teacher import Teacher
from curate.core.records import Negative, Record
from tests.fake_llm_server import fake_llm_server
from tests.helpers import SHARED_DATA, read_jsonl, run_curate

CLEAN_TASK = "Given a scientific claim, retrieve research abstracts about it."
REFUTE_TASK = "Given a scientific claim, retrieve a research abstract that refutes it."

RECIPE = """
name: test
steps:
  - heuristics: {}
  - minhash: {fields: [query, positive], threshold: 0.8}
  - teacher_rank: {positive_top: 10, negative_bottom: 100000, drop_if_negative_outranks: true}
  - false_negatives: {mode: percent, percent: 0.95}
  - granularity: {policy: drop-inverted}
  - sts_gap: {min_gap: 1.5}
  - judge_refute: {on_error: drop}
"""


pytestmark = pytest.mark.bench


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("scifact")
    data = load_beir(SHARED_DATA / "scifact", "train")
    rng = random.Random(0)
    all_qids = sorted(q for q in data.qrels if q in data.queries)
    # enough claims for 24 clean records, and every claim with two relevant abstracts
    # (candidates for the planted false negative); encoding stays small on 2 cores
    qids = all_qids[:70] + [q for q in all_qids[70:] if len(data.relevant(q)) > 1]
    relevant_ids = {d for q in all_qids for d in data.relevant(q)}
    others = sorted(set(data.corpus) - relevant_ids)
    pool_ids = sorted({d for q in qids for d in data.relevant(q)}) + rng.sample(others, 300)
    teacher = Teacher(cache=EmbeddingCache(tmp / "setup-cache"))
    d_emb = teacher.encode_docs([data.corpus[d] for d in pool_ids])
    q_emb = teacher.encode_queries([data.queries[q] for q in qids])
    scores = q_emb @ d_emb.T
    index = {d: i for i, d in enumerate(pool_ids)}

    clean, fn_candidate, used_pos = [], None, set()
    for qi, q in enumerate(qids):
        rel = data.relevant(q)
        pos = rel[0]
        row = scores[qi]
        pos_s = row[index[pos]]
        rank = int((row > pos_s).sum()) + 1
        order = [pool_ids[j] for j in np.argsort(-row) if pool_ids[j] not in rel]
        near = [d for d in order[:30] if row[index[d]] < 0.85 * pos_s][:2]
        rand = rng.sample(order[200:], 2)
        negs = sorted(near + rand, key=lambda d: -row[index[d]])
        if rank > 3 or len(near) < 2 or pos in used_pos:
            continue
        if fn_candidate is None and len(rel) > 1:
            second = rel[1]
            if 0.95 * pos_s <= row[index[second]] < pos_s:
                fn_candidate = (len(clean), second)
        used_pos.add(pos)
        clean.append(Record(
            id=f"q{q}", task_type="short-long", task=CLEAN_TASK, query=data.queries[q],
            positive=data.corpus[pos],
            negatives=[Negative(text=data.corpus[d], level=i + 1) for i, d in enumerate(negs)],
        ))
        if len(clean) >= 24 and fn_candidate is not None:
            break
    assert len(clean) >= 24 and fn_candidate is not None, "SciFact gives enough clean records"

    recs = clean
    faults = {}
    # an exact duplicate of record 0 under another id
    dup = Record.from_dict(json.loads(json.dumps(recs[0].to_dict())))
    dup.id = "dup-exact"
    faults[dup.id] = ("minhash", "near-duplicate-query")
    # a near-duplicate positive: record 1's abstract with one word changed, another claim
    near = Record.from_dict(json.loads(json.dumps(recs[1].to_dict())))
    near.id, near.query = "dup-near", data.queries[next(q for q in all_qids if q not in set(qids))]
    words = near.positive.split()
    words[len(words) // 2] = "modified"
    near.positive = " ".join(words)
    faults[near.id] = ("minhash", "near-duplicate-positive")
    # a self-explanation inside a negative
    recs[2].negatives[1].text += " Note: this passage is a hard negative and does not answer the query."
    faults[(recs[2].id, 2)] = ("heuristics", "self-explanation")
    # the query copied verbatim into the positive
    recs[3].positive = recs[3].query + " " + recs[3].positive
    faults[recs[3].id] = ("heuristics", "query-word-for-word-in-document")
    # a false negative: another abstract the qrels mark relevant, used as the hardest negative
    i, second = fn_candidate
    recs[i].negatives[0] = Negative(text=data.corpus[second], level=1)
    faults[(recs[i].id, 1)] = ("false_negatives", "false-negative")
    # inverted levels: easiest first
    j = 5 if i != 5 else 6
    texts = [n.text for n in recs[j].negatives][::-1]
    recs[j].negatives = [Negative(text=t, level=k + 1) for k, t in enumerate(texts)]
    faults[recs[j].id] = ("granularity", "levels-inverted")
    # a positive the teacher ranks far down: a random abstract
    recs[7].positive = data.corpus[others[-1]]
    faults[recs[7].id] = ("teacher_rank", "positive-rank")
    # an STS record whose hardest negative is scored too close to the positive
    recs[8].task_type = "sts"
    recs[8].positive_score = 9
    for n, s in zip(recs[8].negatives, (8, 6, 3, 2)):
        n.score = s
    faults[(recs[8].id, 1)] = ("sts_gap", "score-gap")
    # a refutation task whose positive supports (per the scripted judge), and one that refutes
    recs[9].task = "VERDICT[support] " + REFUTE_TASK
    faults[recs[9].id] = ("judge_refute", "positive-supports")
    recs[10].task = "VERDICT[refute] " + REFUTE_TASK

    inp = tmp / "generated.jsonl"
    inp.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in recs + [dup, near]))
    corpus = tmp / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": d, "text": data.corpus[d]}) + "\n" for d in pool_ids[-300:]))
    recipe = tmp / "recipe.yaml"
    recipe.write_text(RECIPE)
    cache = tmp / "filter-cache"
    runs = []
    with fake_llm_server() as srv:
        for k in range(2):
            out = tmp / f"out{k}"
            proc = run_curate("filter", "--in", str(inp), "--out", str(out), "--recipe", str(recipe),
                              "--corpus", str(corpus), "--base-url", srv.base_url, "--model", "fake",
                              env={"CURATE_CACHE_DIR": str(cache)})
            assert proc.returncode == 0, proc.stderr
            runs.append(out)
    return {"records": recs + [dup, near], "faults": faults, "out": runs[0], "rerun": runs[1]}


def test_each_planted_fault_is_caught_by_its_step(planted):
    rejected = read_jsonl(planted["out"] / "rejected.jsonl")
    got = {}
    for r in rejected:
        key = r["id"] if r["target"] == "record" else (r["id"], r["level"])
        got[key] = (r["step"], r["reason"])
    assert got == planted["faults"]
    assert all(r["detail"] for r in rejected if r["step"] != "heuristics"), "drops carry their numbers"


def test_report_counts_match_the_planted_faults(planted):
    report = json.loads((planted["out"] / "report.json").read_text())
    steps = {row["step"]: row for row in report["steps"]}
    expected_records, expected_negs = {}, {}
    for key, (step, reason) in planted["faults"].items():
        bucket = expected_negs if isinstance(key, tuple) else expected_records
        bucket.setdefault(step, {}).setdefault(reason, 0)
        bucket[step][reason] += 1
    for name, row in steps.items():
        assert row["records_dropped"] == expected_records.get(name, {}), name
        assert row["negatives_dropped"] == expected_negs.get(name, {}), name
    n_record_faults = sum(1 for k in planted["faults"] if not isinstance(k, tuple))
    assert report["records_in"] == len(planted["records"])
    assert report["records_kept"] == len(planted["records"]) - n_record_faults
    levels = steps["granularity"]["notes"]
    assert levels  # mean similarity per level is reported


def test_filtered_records_carry_teacher_scores(planted):
    kept = read_jsonl(planted["out"] / "filtered.jsonl")
    dropped = {k for k in planted["faults"] if not isinstance(k, tuple)}
    assert {r["id"] for r in kept} == {r.id for r in planted["records"]} - dropped
    for r in kept:
        t = r["teacher"]
        assert t["positive_rank"] <= 10
        assert all(n["teacher_score"] is not None and n["teacher_score"] < t["positive"] for n in r["negatives"])


def test_plots_are_written(planted):
    report = json.loads((planted["out"] / "report.json").read_text())
    assert report["plots"]
    for p in report["plots"]:
        with open(p, "rb") as fh:
            assert fh.read(8) == b"\x89PNG\r\n\x1a\n"


def test_second_run_encodes_nothing(planted):
    first = json.loads((planted["out"] / "report.json").read_text())["teacher"]
    second = json.loads((planted["rerun"] / "report.json").read_text())["teacher"]
    assert first["encoded"] > 0
    assert second["encoded"] == 0 and second["cache_hits"] > 0
    assert read_jsonl(planted["out"] / "filtered.jsonl") == read_jsonl(planted["rerun"] / "filtered.jsonl")
