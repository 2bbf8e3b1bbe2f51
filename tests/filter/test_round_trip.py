"""``round_trip`` on real SciFact data with the bundled teacher.

One module-level build (``world``): ~40 training claims standing in for generated queries,
each with its labelled abstract as the source passage; a ~300-document corpus of those
abstracts plus random ones (abstracts cut short: CPU time is scarce); the bundled MiniLM
teacher's brute-force numpy ranks of every positive against that corpus. Planted: a query
about baking bread whose "source passage" is a SciFact abstract, and records whose own
positive is the weaker of two labelled abstracts (the stronger one a further positive).

The step must keep exactly the records whose positive the numpy ranks put within ``top_k``,
drop the rest as ``round-trip`` with the same rank, and report counts that add up; with no
corpus it stops with one line before any model loads; through the CLI the shipped
``filters/from-corpus.yaml`` recipe does the same and needs ``--corpus``.
"""

from __future__ import annotations

import copy
import json
import random
import statistics

import pytest

from curate.core.errors import CurateError
from curate.core.records import Positive, Record
from curate.datasets.beir import load_beir
from curate.embed.cache import EmbeddingCache
from curate.embed.teacher import Teacher
from curate.filter.base import STEPS, FilterContext
from curate.filter.recipe import load_recipe
from curate.filter.steps.round_trip import NO_CORPUS, RoundTripParams
from curate.filter.teacher_scores import ensure_teacher_scores
from tests.helpers import SHARED_DATA, assert_one_line_error, read_jsonl, run_curate

SCIFACT = SHARED_DATA / "scifact"
DOC_CHARS = 500
N_SINGLE, N_MULTI, N_CORPUS = 34, 6, 300
TASK = "Given a scientific claim, retrieve research abstracts about it."
PLANTED = "planted-bread"


def _cut(text: str) -> str:
    return text if len(text) <= DOC_CHARS else text[:DOC_CHARS].rsplit(" ", 1)[0]


class World:
    pass


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    if not (SCIFACT / "corpus.jsonl").exists():
        pytest.skip("SciFact data not present")
    tmp = tmp_path_factory.mktemp("round-trip")
    data = load_beir(SCIFACT, "train")
    rng = random.Random(23)
    qids = sorted(q for q in data.qrels if q in data.queries)
    single = [q for q in qids if len(data.relevant(q)) == 1]
    multi = [q for q in qids if len(data.relevant(q)) >= 2]
    picked = rng.sample(single, N_SINGLE) + rng.sample(multi, N_MULTI)
    wanted = list(dict.fromkeys(d for q in picked for d in data.relevant(q)))
    others = sorted(set(data.corpus) - set(wanted))
    doc_ids = wanted + rng.sample(others, N_CORPUS - len(wanted))
    text = {d: _cut(data.corpus[d]) for d in doc_ids}
    corpus = [text[d] for d in doc_ids]
    assert len(set(corpus)) == len(corpus)

    teacher = Teacher(cache=EmbeddingCache(tmp / "cache" / "embeddings"))
    col = {t: i for i, t in enumerate(corpus)}
    D = teacher.encode_docs(corpus)

    def rank_of(query: str, doc: str, own: tuple[str, ...] = ()) -> int:
        """1 + the corpus documents scoring above ``doc``, the record's ``own`` other positives aside."""
        row = D @ teacher.encode_queries([query])[0]
        above = row > row[col[doc]]
        above[[col[o] for o in own]] = False
        return int(above.sum()) + 1

    records = []
    for q in picked[:N_SINGLE]:
        d = data.relevant(q)[0]
        records.append(Record(id=f"q{q}", task_type="short-long", task=TASK, query=data.queries[q],
                              positive=text[d], positive_id=d))
    for q in picked[N_SINGLE:]:
        rel = data.relevant(q)[:2]
        weak, strong = sorted(rel, key=lambda d: rank_of(data.queries[q], text[d]), reverse=True)
        records.append(Record(id=f"multi-q{q}", task_type="short-long", task=TASK, query=data.queries[q],
                              positive=text[weak], positive_id=weak, positives=[Positive(text[strong], strong)]))
    records.append(Record(id=PLANTED, task_type="short-long", task=TASK,  # a random abstract
                          query="Which oven temperature gives sourdough bread the crispiest crust?",
                          positive=corpus[-1], positive_id=doc_ids[-1]))

    w = World()
    w.tmp, w.teacher, w.corpus, w.records, w.doc_ids = tmp, teacher, corpus, records, doc_ids
    w.raw_rank = {r.id: rank_of(r.query, r.positive) for r in records}
    w.rank = {r.id: rank_of(r.query, r.positive, tuple(p.text for p in r.positives)) for r in records}
    w.best = {r.id: min(rank_of(r.query, p.text) for p in r.all_positives()) for r in records}
    return w


def run_step(w, params=None, records=None, corpus=None):
    ctx = FilterContext(out_dir=w.tmp, teacher_factory=lambda: w.teacher,
                        corpus=w.corpus if corpus is None else corpus)
    ctx.step_name = "round_trip"
    recs = copy.deepcopy(w.records if records is None else records)
    kept = STEPS.get("round_trip").fn(recs, params or {}, ctx)
    return kept, ctx


@pytest.mark.parametrize("top_k", [None, 1, 10])
def test_keeps_exactly_the_records_whose_positive_ranks_within_top_k(world, top_k):
    k = RoundTripParams().top_k if top_k is None else top_k
    kept, ctx = run_step(world, {} if top_k is None else {"top_k": top_k})
    want_kept = {rid for rid, r in world.rank.items() if r <= k}
    assert {r.id for r in kept} == want_kept
    assert 0 < len(want_kept) < len(world.records)
    dropped = {rej.id: rej for rej in ctx.rejections}
    assert set(dropped) == set(world.rank) - want_kept
    for rid, rej in dropped.items():
        assert rej.step == "round_trip" and rej.reason == "round-trip" and rej.level is None
        assert rej.detail["rank"] == world.rank[rid] > k
        assert rej.detail["top_k"] == k and rej.detail["pool"] == len(world.corpus)
    for rec in kept:
        assert rec.teacher.positive_rank == world.raw_rank[rec.id] and world.rank[rec.id] <= k

    notes = ctx.notes["round_trip"]
    ranks = list(world.rank.values())
    buckets = ["rank_1", "rank_2_3", "rank_4_10", "rank_11_100", "rank_deeper"]
    assert sum(notes[b] for b in buckets) == notes["records_in"] == len(world.records)
    assert notes["rank_1"] == sum(r == 1 for r in ranks)
    assert notes["rank_2_3"] == sum(2 <= r <= 3 for r in ranks)
    assert notes["rank_4_10"] == sum(4 <= r <= 10 for r in ranks)
    assert notes["rank_11_100"] == sum(11 <= r <= 100 for r in ranks)
    assert notes["records_kept"] == len(kept) and notes["top_k"] == k
    assert notes["kept_share"] == round(len(kept) / len(ranks), 4)
    assert notes["median_rank"] == statistics.median(ranks)
    assert notes["pool"] == len(world.corpus) and notes["positives_not_in_corpus"] == 0


def test_top_share_cuts_at_a_share_of_the_pool(world):
    """top_share 0.05 of the 300-document pool: the top 15; never fewer than top_k."""
    for params, k in (({"top_share": 0.05}, 15), ({"top_share": 0.001, "top_k": 2}, 2)):
        kept, ctx = run_step(world, params)
        assert {r.id for r in kept} == {rid for rid, r in world.rank.items() if r <= k}
        assert all(rej.detail["top_k"] == k for rej in ctx.rejections)
        assert ctx.notes["round_trip"]["top_k"] == k and ctx.notes["round_trip"]["top_share"] == params["top_share"]
    assert len(run_step(world, {"top_share": 0.05})[0]) > len(run_step(world, {})[0])
    with pytest.raises(CurateError, match="top_share"):
        run_step(world, {"top_share": 1.5})


@pytest.mark.parametrize("pool, params, k", [
    (12, {}, 1), (20, {}, 2), (30, {}, 3), (300, {}, 3), (12_000, {}, 3),  # a random query passes <= 10%
    (12, {"top_share": 0.01}, 1), (7_727, {"top_share": 0.01}, 78),        # the share rules a large pool
    (12, {"max_chance": None}, 3), (12, {"top_k": 10, "max_chance": 0.5}, 6)])
def test_the_bar_follows_the_pool(pool, params, k):
    """The top 3 of 12 passages would pass one random query in four: on a small pool the bar is held
    to max_chance of it (at least rank 1); from 30 documents on top_k and top_share rule unchanged."""
    from curate.filter.steps.round_trip import bar

    assert bar(RoundTripParams(**params), pool) == k


def test_a_small_pool_needs_rank_one(world):
    """Twelve passages: a query's passage must come first (the demo folder's size)."""
    small = world.corpus[:12]
    texts = set(small)
    records = [r for r in world.records if r.positive in texts]
    assert len(records) >= 3
    kept, ctx = run_step(world, {}, records=records, corpus=small)
    assert ctx.notes["round_trip"]["top_k"] == 1 and ctx.notes["round_trip"]["pool"] == len(
        set(small) | {n.text for r in records for n in r.negatives})
    assert all(rec.teacher.positive_rank == 1 for rec in kept)
    assert all(rej.detail["rank"] > 1 for rej in ctx.rejections)


def test_unrelated_query_is_dropped_as_round_trip(world):
    kept, ctx = run_step(world)
    assert PLANTED not in {r.id for r in kept}
    rej = next(r for r in ctx.rejections if r.id == PLANTED)
    assert rej.reason == "round-trip" and rej.detail["rank"] == world.rank[PLANTED] > 10


def test_own_positive_decides_and_own_further_positives_do_not_push_it_down(world):
    """The further positive outranks the record's own one by construction: the own one decides,
    ranked among the documents that are not the record's positives (a multi-hop query whose
    other bundle passages come first found what it was written for)."""
    multi = [r for r in world.records if r.positives]
    assert all(world.raw_rank[r.id] == world.rank[r.id] + 1 > world.best[r.id] for r in multi)
    k = 1  # the raw rank is at least 2 for every one of them: the old rule would drop them all
    kept, ctx = run_step(world, {"top_k": k}, records=multi)
    assert {r.id for r in kept} == {r.id for r in multi if world.rank[r.id] <= k}
    assert kept, "some own positive is first once its sibling positive is set aside"
    for rej in ctx.rejections:
        assert rej.detail["rank"] == world.rank[rej.id]


def test_records_scored_against_another_pool_are_ranked_again(world):
    """A file scored earlier without the corpus carries ranks against its own few documents."""
    recs = copy.deepcopy(world.records)
    ensure_teacher_scores(recs, FilterContext(out_dir=world.tmp, teacher_factory=lambda: world.teacher))
    assert all(r.teacher.pool < len(world.corpus) for r in recs)
    kept, ctx = run_step(world, records=recs)
    k = RoundTripParams().top_k
    assert {r.id for r in kept} == {rid for rid, r in world.rank.items() if r <= k}
    assert all(r.teacher.positive_rank == world.raw_rank[r.id] and r.teacher.pool == len(world.corpus) for r in kept)
    assert all(rej.detail["rank"] == world.rank[rej.id] for rej in ctx.rejections)


def test_no_corpus_is_one_line_before_any_model_loads(world):
    def no_model():
        raise AssertionError("the teacher was loaded")

    ctx = FilterContext(out_dir=world.tmp, teacher_factory=no_model)
    with pytest.raises(CurateError) as err:
        STEPS.get("round_trip").fn(copy.deepcopy(world.records), {}, ctx)
    assert str(err.value) == NO_CORPUS == (
        "round_trip searches the documents the queries were written from: give them with --corpus")


def test_shipped_recipe_runs_heuristics_minhash_round_trip():
    recipe = load_recipe("from-corpus")
    assert [s.name for s in recipe.steps] == ["heuristics", "minhash", "round_trip"]
    assert "query" in recipe.steps[1].params["fields"] and "positive" not in recipe.steps[1].params["fields"]
    assert recipe.teacher == {"model": None, "query_prompt": None, "doc_prompt": None}
    assert recipe.steps[0].params == {"copy_containment": 0.5}, "the copy guard is on (docs: Benchmarks)"


def _cli_inputs(w, n=14):
    """A small file: the first records, the planted one, and a reworded copy of one claim."""
    recs = [r for r in w.records if not r.positives][:n] + [r for r in w.records if r.id == PLANTED]
    src = max(recs[:n], key=lambda r: len(r.query.split()))
    words = src.query.split()
    twin = Record(id="twin", task_type=src.task_type, task=src.task,
                  query=" ".join(words[:-1] + ["indeed", words[-1]]), positive=src.positive)
    path = w.tmp / "generated.jsonl"
    path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in [*recs, twin]), encoding="utf-8")
    corpus = w.tmp / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": d, "text": t}) + "\n" for d, t in zip(w.doc_ids, w.corpus)),
                      encoding="utf-8")
    return recs, path, corpus


def test_cli_from_corpus_recipe_names_round_trip_drops(world):
    recs, inp, corpus = _cli_inputs(world)
    out = world.tmp / "filtered"
    proc = run_curate("filter", "--in", str(inp), "--out", str(out), "--recipe", "filters/from-corpus.yaml",
                      "--corpus", str(corpus), env={"CURATE_CACHE_DIR": str(world.tmp / "cache")}, timeout=900)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "report.json").read_text())
    rows = {row["step"]: row for row in report["steps"]}
    assert rows["heuristics"]["records_dropped"] == {}
    assert sum(rows["minhash"]["records_dropped"].values()) == 1  # the reworded twin
    rejected = read_jsonl(out / "rejected.jsonl")
    assert [r["id"] for r in rejected if r["step"] == "minhash"] == ["twin"]
    k = RoundTripParams().top_k
    round_trip = {r["id"]: r for r in rejected if r["step"] == "round_trip"}
    assert set(round_trip) == {r.id for r in recs if world.rank[r.id] > k} and PLANTED in round_trip
    for rid, r in round_trip.items():
        assert r["reason"] == "round-trip" and r["detail"]["rank"] == world.rank[rid]
    kept = {r["id"] for r in read_jsonl(out / "filtered.jsonl")}
    assert kept == {r.id for r in recs if world.rank[r.id] <= k}
    notes = rows["round_trip"]["notes"]
    assert notes["records_in"] == len(recs) and notes["records_kept"] == len(kept)
    assert notes["embeddings_from_cache"] > 0


def test_cli_without_corpus_is_one_line(world):
    _, inp, _ = _cli_inputs(world)
    out = world.tmp / "no-corpus"
    proc = run_curate("filter", "--in", str(inp), "--out", str(out), "--recipe", "filters/from-corpus.yaml",
                      env={"CURATE_CACHE_DIR": str(world.tmp / "cache")}, timeout=900)
    assert_one_line_error(proc, NO_CORPUS)
    assert proc.returncode == 2 and not out.exists()  # a user's fault; nothing half-written
