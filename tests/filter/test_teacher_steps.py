"""Teacher-based filter steps on real SciFact data with planted faults.

One module-level build (``world``): ~35 training claims, a ~200-document pool of their
labelled abstracts plus random ones, the bundled MiniLM teacher's brute-force scores over
that pool, and records made from them:

* clean records: the labelled positive (ranked in the teacher's top 5) and four graded
  negatives mined from the pool at falling similarity (levels 1..4, level 4 a far one);
* ``fn``: a claim with two labelled abstracts, the weaker one as positive and the stronger
  one planted as its level-1 negative (a false negative);
* ``swap``: a clean record whose positive is replaced by a random far document;
* ``inverted``: a clean record with its levels reversed (4, 3, 2, 1);
* ``easy``: a record whose only negative is a far document.

Each step runs on a deep copy and must catch exactly its faults, with the right reason and
with numbers that equal the brute-force numpy ranks and scores.
"""

from __future__ import annotations

import copy
import json
import random
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from curate.embed.cache import EmbeddingCache
from curate.embed.teacher import Teacher
from curate.filter.base import STEPS, FilterContext
from curate.filter.steps.false_negatives import threshold
from curate.filter.plots import write_plots
from curate.filter.teacher_scores import ensure_teacher_scores
from curate.core.records import Negative, Record, TeacherScores
from tests.helpers import SHARED_DATA

SCIFACT = SHARED_DATA / "scifact"
DOC_CHARS = 200  # abstracts cut short: the test is about the steps, and CPU time is scarce
N_CLEAN = 30
N_POOL = 200


def _doc_text(d: dict) -> str:
    text = f"{d['title']}. {d['text']}"
    return text[:DOC_CHARS].rsplit(" ", 1)[0]


def _load_scifact():
    corpus = {}
    with open(SCIFACT / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            corpus[d["_id"]] = _doc_text(d)
    queries = {}
    with open(SCIFACT / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            q = json.loads(line)
            queries[q["_id"]] = q["text"]
    qrels: dict[str, list[str]] = defaultdict(list)
    with open(SCIFACT / "qrels" / "train.tsv", encoding="utf-8") as f:
        next(f)  # header
        for line in f:
            qid, did, _ = line.strip().split("\t")
            if did in corpus:
                qrels[qid].append(did)
    return corpus, queries, qrels


class World:
    pass


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    if not SCIFACT.exists():
        pytest.skip("SciFact data not present")
    corpus, queries, qrels = _load_scifact()
    rng = random.Random(7)
    single = sorted(q for q, ds in qrels.items() if len(ds) == 1 and q in queries)
    multi = sorted(q for q, ds in qrels.items() if len(ds) >= 2 and q in queries)
    picked = rng.sample(single, 38) + rng.sample(multi, 8)
    pool_ids = list(dict.fromkeys(d for q in picked for d in qrels[q]))
    others = [d for d in sorted(corpus) if d not in set(pool_ids)]
    pool_ids += rng.sample(others, N_POOL - len(pool_ids))
    pool = list(dict.fromkeys(corpus[d] for d in pool_ids))
    pos_of = {d: i for i, d in enumerate(pool_ids)}

    teacher = Teacher(cache=EmbeddingCache(tmp_path_factory.getbasetemp() / "emb-cache"))
    D = teacher.encode_docs(pool)
    Q = teacher.encode_queries([queries[q] for q in picked])
    S = Q @ D.T
    qrow = {q: i for i, q in enumerate(picked)}

    def rank(q, doc):
        row = S[qrow[q]]
        return int((row > row[doc]).sum()) + 1

    def graded(q, relevant, pos_doc):
        """Four negatives at falling similarity, all safely below 95% of the positive."""
        row = S[qrow[q]]
        cands = [j for j in np.argsort(-row) if j not in relevant and row[j] < 0.9 * row[pos_doc]]
        picks = [cands[0], cands[8], cands[25], cands[len(cands) - 1 - rng.randrange(40)]]
        return [Negative(text=pool[j], level=lv, source="mined") for lv, j in enumerate(picks, 1)]

    w = World()
    w.teacher, w.pool, w.S, w.qrow, w.rank, w.queries = teacher, pool, S, qrow, rank, queries
    w.doc_index = {t: i for i, t in enumerate(pool)}
    w.records, w.clean = [], []
    for q in picked[:38]:
        p = pos_of[qrels[q][0]]
        if rank(q, p) <= 5 and len(w.clean) < N_CLEAN + 3:
            rec = Record(id=f"clean-{q}", task_type="short-long", task="find evidence",
                         query=queries[q], positive=pool[p], negatives=graded(q, {p}, p))
            w.clean.append(rec)
    assert len(w.clean) >= 20, "too few SciFact claims with a top-5 positive"

    # a false negative: the other labelled abstract of the same claim, as a level-1 negative
    best = None
    for q in picked[38:]:
        docs = sorted((pos_of[d] for d in qrels[q]), key=lambda j: -S[qrow[q], j])
        strong, weak = docs[0], docs[1]
        if rank(q, weak) <= 10 and (best is None or rank(q, weak) < best[2]):
            best = (q, (strong, weak), rank(q, weak), set(docs))
    assert best is not None, "no two-abstract claim with both abstracts in the top 10"
    q, (strong, weak), _, rel = best
    negs = graded(q, rel, weak)
    negs[0] = Negative(text=pool[strong], level=1, source="mined")
    w.fn = Record(id="fn", task_type="short-long", task="find evidence", query=queries[q],
                  positive=pool[weak], negatives=negs)
    w.fn_q, w.fn_strong, w.fn_weak = q, strong, weak

    # a swapped positive: a far document in place of the labelled one
    swap_src = w.clean.pop()
    sq = next(k for k in picked if queries[k] == swap_src.query)
    far = [j for j in np.argsort(-S[qrow[sq]])[60:] if pool[j] not in
           {swap_src.positive, *(n.text for n in swap_src.negatives)}]
    w.swap = copy.deepcopy(swap_src)
    w.swap.id, w.swap.positive = "swap", pool[far[0]]
    w.swap_q, w.swap_doc = sq, far[0]

    # reversed levels
    inv_src = w.clean.pop()
    w.inverted = copy.deepcopy(inv_src)
    w.inverted.id = "inverted"
    for n in w.inverted.negatives:
        n.level = 5 - n.level

    # only a far negative
    easy_src = w.clean.pop()
    w.easy = copy.deepcopy(easy_src)
    w.easy.id = "easy"
    w.easy.negatives = [copy.deepcopy(easy_src.negatives[3])]

    w.records = w.clean + [w.fn, w.swap, w.inverted, w.easy]
    return w


def _run(w, step, params, tmp_path, records=None):
    recs = copy.deepcopy(records if records is not None else w.records)
    ctx = FilterContext(out_dir=tmp_path, teacher_factory=lambda: w.teacher, corpus=list(w.pool))
    ctx.step_name = step
    kept = STEPS.get(step).fn(recs, params, ctx)
    return kept, ctx


def _rejections(ctx, rid=None, reason=None):
    return [r for r in ctx.rejections
            if (rid is None or r.id == rid) and (reason is None or r.reason == reason)]


def test_annotation_matches_brute_force(world, tmp_path):
    w = world
    for depth in (100, 3):  # 3: most targets lie deeper than the search and take the exact path
        recs = copy.deepcopy(w.records)
        ctx = FilterContext(out_dir=tmp_path, teacher_factory=lambda: w.teacher, corpus=list(w.pool))
        ensure_teacher_scores(recs, ctx, depth=depth)
        for rec in recs:
            q = next(k for k, i in w.qrow.items() if w.queries[k] == rec.query)
            t = rec.teacher.to_dict()
            assert t["model"] == w.teacher.model_id and t["pool"] == len(w.pool)
            pos = w.doc_index[rec.positive]
            assert t["positive_rank"] == w.rank(q, pos)
            assert t["positive"] == pytest.approx(float(w.S[w.qrow[q], pos]), abs=1e-5)
            negs = [w.doc_index[n.text] for n in rec.negatives]
            assert [n.teacher_rank for n in rec.negatives] == [w.rank(q, j) for j in negs]
            for n, j in zip(rec.negatives, negs):
                assert n.teacher_score == pytest.approx(float(w.S[w.qrow[q], j]), abs=1e-5)
            assert t["margin"] == pytest.approx(t["positive"] - max(n.teacher_score for n in rec.negatives))


def test_blank_corpus_texts_change_no_rank_or_score(world, tmp_path):
    """Issue 52's pattern in filter's own pool: blank and whitespace-only documents in the corpus
    are no candidates, so every rank, score and margin is what the corpus without them gives."""
    w = world
    plain = copy.deepcopy(w.records)
    ensure_teacher_scores(plain, FilterContext(out_dir=tmp_path, teacher_factory=lambda: w.teacher,
                                               corpus=list(w.pool)))
    odd = copy.deepcopy(w.records)
    ensure_teacher_scores(odd, FilterContext(out_dir=tmp_path, teacher_factory=lambda: w.teacher,
                                             corpus=["", *w.pool[:5], " \n\t ", *w.pool[5:], ""]))
    for a, b in zip(plain, odd):
        assert b.teacher.to_dict() == a.teacher.to_dict()
        assert [(n.teacher_rank, n.teacher_score) for n in b.negatives] == \
            [(n.teacher_rank, n.teacher_score) for n in a.negatives]


def test_annotation_is_skipped_when_present(world, tmp_path):
    w = world
    recs = copy.deepcopy(w.records)
    ctx = FilterContext(out_dir=tmp_path, teacher_factory=lambda: w.teacher, corpus=list(w.pool))
    ctx.step_name = "a"
    ensure_teacher_scores(recs, ctx)
    before = (w.teacher.encoded, w.teacher.cache_hits)
    assert ctx.notes["a"]["texts_encoded"] == 0  # every vector came from the fixture's cache
    ensure_teacher_scores(recs, ctx)
    assert (w.teacher.encoded, w.teacher.cache_hits) == before


def test_teacher_rank_catches_planted_faults(world, tmp_path):
    w = world
    kept, ctx = _run(w, "teacher_rank", {"positive_top": 10, "negative_bottom": 50}, tmp_path)
    ids = {r.id for r in kept}

    [swap] = _rejections(ctx, "swap")
    assert swap.reason == "positive-rank" and swap.level is None
    assert swap.detail["rank"] == w.rank(w.swap_q, w.swap_doc) > 10
    assert swap.detail["score"] == pytest.approx(float(w.S[w.qrow[w.swap_q], w.swap_doc]), abs=1e-5)

    [fn] = _rejections(ctx, "fn", "negative-outranks-positive")
    assert fn.detail["negative_rank"] == w.rank(w.fn_q, w.fn_strong)
    assert fn.detail["positive_rank"] == w.rank(w.fn_q, w.fn_weak)
    assert fn.detail["negative_rank"] < fn.detail["positive_rank"]
    assert fn.detail["negative_level"] == 1

    assert [r.reason for r in _rejections(ctx, "easy")] == ["negative-too-easy", "no-negatives-left"]
    assert {"swap", "fn", "easy"}.isdisjoint(ids)

    # every clean record survives, keeping exactly its negatives ranked within the top 50
    assert {r.id for r in w.clean} | {"inverted"} == ids
    for rej in _rejections(ctx, reason="negative-too-easy"):
        assert rej.detail["rank"] > 50 and rej.text is not None
    for rec in kept:
        t = rec.teacher.to_dict()
        assert len(rec.negatives) >= 1 and all(n.teacher_rank <= 50 for n in rec.negatives)
        assert t["positive_rank"] <= 10
        assert t["margin"] == pytest.approx(t["positive"] - max(n.teacher_score for n in rec.negatives))
    assert ctx.reasons("teacher_rank")["negative-too-easy"] >= len(w.clean)  # the far level-4 ones


def test_false_negatives_percent_and_margin(world, tmp_path):
    w = world
    kept, ctx = _run(w, "false_negatives", {}, tmp_path)
    # the swapped record's positive is a far document, so its real negatives now score above
    # 95% of it: they go too, rightly; every other record loses nothing but the planted one
    [rej] = [r for r in ctx.rejections if r.id != "swap"]
    assert all(r.reason in ("false-negative", "no-negatives-left") for r in ctx.rejections)
    assert (rej.id, rej.reason, rej.level) == ("fn", "false-negative", 1)
    assert rej.text == w.pool[w.fn_strong]
    pos = float(w.S[w.qrow[w.fn_q], w.fn_weak])
    assert rej.detail["positive"] == pytest.approx(pos, abs=1e-5)
    assert rej.detail["threshold"] == pytest.approx(0.95 * pos, abs=1e-5)
    assert rej.detail["score"] >= rej.detail["threshold"]
    fn_kept = next(r for r in kept if r.id == "fn")
    assert len(fn_kept.negatives) == 3 and w.pool[w.fn_strong] not in {n.text for n in fn_kept.negatives}
    assert all(n.teacher_rank is not None for n in fn_kept.negatives)
    assert {r.id for r in w.records} - {r.id for r in kept} <= {"swap"}
    for rec in kept:
        if rec.id != "swap":
            assert len(rec.negatives) == len(next(r for r in w.records if r.id == rec.id).negatives) - (rec.id == "fn")

    kept, ctx = _run(w, "false_negatives", {"mode": "margin", "margin": 0.05}, tmp_path)
    fn_rej = _rejections(ctx, "fn")
    assert [r.reason for r in fn_rej] == ["false-negative"]
    assert fn_rej[0].detail["threshold"] == pytest.approx(pos - 0.05, abs=1e-5)
    for r in ctx.rejections:  # whatever else margin mode takes is really within 0.05
        if r.reason == "false-negative":
            assert r.detail["score"] >= r.detail["positive"] - 0.05 - 1e-9


def test_granularity_policies(world, tmp_path):
    w = world
    kept, ctx = _run(w, "granularity", {}, tmp_path)
    notes = ctx.notes["granularity"]
    assert len(kept) == len(w.records) and not ctx.rejections
    assert notes["inverted_records"] == 1
    assert notes["reference_mgh"] == {"1": 0.881, "2": 0.857, "3": 0.845, "4": 0.793}
    means = notes["mean_similarity_by_level"]
    assert set(means) == {"1", "2", "3", "4"}
    assert means["1"] > means["2"] > means["3"] > means["4"]  # built that way (one record reversed)
    assert next(r for r in kept if r.id == "inverted").scores["granularity"]["inverted"]

    kept, ctx = _run(w, "granularity", {"policy": "drop-inverted"}, tmp_path)
    [rej] = ctx.rejections
    assert (rej.id, rej.reason) == ("inverted", "levels-inverted")
    assert rej.detail["inverted_pairs"] == 6  # every pair of the four levels is reversed
    assert all(p["score"] < p["higher_score"] and p["level"] < p["higher_level"]
               for p in rej.detail["pairs"])
    assert "inverted" not in {r.id for r in kept}

    # a huge tolerance forgives every inversion
    kept, ctx = _run(w, "granularity", {"policy": "drop-inverted", "tolerance": 2.0}, tmp_path)
    assert not ctx.rejections and ctx.notes["granularity"]["inverted_records"] == 0

    kept, ctx = _run(w, "granularity", {"policy": "reorder"}, tmp_path)
    assert not ctx.rejections and ctx.notes["granularity"]["reordered_records"] == 1
    rec = next(r for r in kept if r.id == "inverted")
    assert [n.level for n in rec.negatives] == [1, 2, 3, 4]
    scores = [n.teacher_score for n in rec.negatives]
    assert scores == sorted(scores, reverse=True)
    assert rec.scores["granularity"]["original_levels"] == [4, 3, 2, 1]
    assert [n.teacher_rank for n in rec.negatives] == sorted(n.teacher_rank for n in rec.negatives)
    assert next(r for r in kept if r.id == "easy").negatives[0].level == 4  # not inverted: untouched

    # sequential renumbering on a record whose level-1 negative was lost: levels 4, 3 -> 1, 2
    rec = copy.deepcopy(w.inverted)
    rec.negatives = rec.negatives[:2]
    kept, ctx = _run(w, "granularity", {"policy": "reorder", "renumber": "sequential"}, tmp_path, [rec])
    assert [n.level for n in kept[0].negatives] == [1, 2]
    assert kept[0].scores["granularity"]["original_levels"] == [4, 3]


def test_steps_chain_and_plots(world, tmp_path):
    w = world
    recs = copy.deepcopy(w.records)
    ctx = FilterContext(out_dir=tmp_path, teacher_factory=lambda: w.teacher, corpus=list(w.pool))
    for name, params in (("teacher_rank", {}), ("false_negatives", {}),
                         ("granularity", {"policy": "drop-inverted"})):
        ctx.step_name = name
        recs = STEPS.get(name).fn(recs, params, ctx)
    assert {r.id for r in recs} == {r.id for r in w.clean}
    assert ctx.reasons("teacher_rank")["positive-rank"] == 1
    assert ctx.reasons("teacher_rank")["negative-outranks-positive"] == 1
    assert ctx.reasons("false_negatives") == {}  # teacher_rank already took the planted one
    assert ctx.reasons("granularity") == {"levels-inverted": 1}  # still reversed after pruning
    paths = write_plots(recs, tmp_path / "plots")
    assert [p.name for p in paths] == ["teacher_scores.png", "teacher_gap.png", "teacher_levels.png"]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


class _FakeTeacher:
    model_id = "fake"
    query_prompt = doc_prompt = ""
    encoded = cache_hits = 0

    def encode(self, *a, **k):  # pragma: no cover - must never be reached
        raise AssertionError("pre-annotated records must not be re-encoded")


def _annotated(pos: float, negs: list[float], ranks=None) -> Record:
    rec = Record(id="r", task_type="short-long", task="t", query="q", positive="p",
                 negatives=[Negative(text=f"n{i}", level=i + 1, teacher_score=s, teacher_rank=r)
                            for i, (s, r) in enumerate(zip(negs, ranks or range(2, 2 + len(negs))))])
    rec.teacher = TeacherScores(model="fake", positive=pos, positive_rank=1,
                                margin=pos - max(negs), pool=10)
    return rec


def test_false_negative_threshold_with_a_negative_positive_score(tmp_path):
    assert threshold(-0.2) == pytest.approx(-0.21)  # below the positive, not above it
    assert threshold(0.8) == pytest.approx(0.76)
    assert threshold(0.8, "margin", margin=0.05) == pytest.approx(0.75)
    rec = _annotated(-0.2, [-0.205, -0.25])
    ctx = FilterContext(out_dir=tmp_path, teacher_factory=_FakeTeacher)
    ctx.step_name = "false_negatives"
    kept = STEPS.get("false_negatives").fn([rec], {}, ctx)
    [rej] = ctx.rejections
    assert rej.reason == "false-negative" and rej.text == "n0"
    assert rej.detail["threshold"] == pytest.approx(-0.21)
    assert [n.text for n in kept[0].negatives] == ["n1"]
    assert [n.teacher_rank for n in kept[0].negatives] == [3]
    assert kept[0].teacher.margin == pytest.approx(0.05)

    rec = _annotated(0.5, [0.49, 0.48])
    ctx = FilterContext(out_dir=tmp_path, teacher_factory=_FakeTeacher)
    ctx.step_name = "false_negatives"
    assert STEPS.get("false_negatives").fn([rec], {}, ctx) == []
    assert [r.reason for r in ctx.rejections] == ["false-negative", "false-negative", "no-negatives-left"]
