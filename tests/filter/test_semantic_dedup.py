"""``semantic_dedup`` on real SciFact claims with planted paraphrases (made by the rules of
bench/semantic_dedup.py: a closing phrase moved to the front, a claim asked as a question,
words from a small synonym list).

Seven real claims, three of them reworded once more as later records, each record with its own
passage and task: MinHash (every pass, defaults) drops nothing, ``semantic_dedup`` drops the
three rewordings and nothing else, logged with the kept record and the cosine. The keep rule,
the reuse of the teacher steps' encodings, the exhaustive pair search (also on Ray's shards)
and the parameter checks are tested on the same records.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from curate.core.errors import CurateError
from curate.core.records import Negative, Record, TeacherScores
from curate.embed.cache import EmbeddingCache
from curate.embed.teacher import Teacher
from curate.filter.base import STEPS, FilterContext
from curate.filter.recipe import Recipe, StepConfig, load_recipe
from curate.filter.run import run_steps
from curate.filter.steps.semantic_dedup import similar_pairs
from tests.filter.common import recipe_error
from tests.helpers import SHARED_DATA

QUERIES = SHARED_DATA / "scifact" / "queries.jsonl"
# SciFact claim id -> its rule-made paraphrase (cosine 0.96-0.98 with MiniLM)
PARAPHRASED = {
    "818": "In action potential propagation, myelin sheaths play a part.",
    "249": "Does chenodeosycholic acid therapy reduce whole-body energy expenditure?",
    "693": "In red blood cell transfusion, does leuko-reduced blood reduce infectious complications?",
}
DISTINCT = ("746", "997", "1367", "798")  # further claims, none close to another
TOPICS = ("volcanic soil", "medieval trade routes", "jazz harmony", "glacier retreat", "chess openings",
          "bridge engineering", "beekeeping", "orbital mechanics", "sourdough baking", "tax law")


@pytest.fixture(scope="module")
def claims():
    if not QUERIES.exists():
        pytest.skip("SciFact data not present")
    want = {*PARAPHRASED, *DISTINCT}
    out = {}
    with open(QUERIES, encoding="utf-8") as f:
        for line in f:
            q = json.loads(line)
            if q["_id"] in want:
                out[q["_id"]] = q["text"]
    return out


@pytest.fixture(scope="module")
def cached_teacher(tmp_path_factory):
    """The bundled teacher with an embedding cache of its own (the session one has none)."""
    return Teacher(cache=EmbeddingCache(tmp_path_factory.mktemp("emb") / "cache"))


def _records(claims) -> list[Record]:
    recs = [Record(id=f"sf-{i}", task_type="short-long", task=f"verify claim {i}", query=claims[i],
                   positive=f"A study of {TOPICS[n]}, abstract {i}.",
                   negatives=[Negative(text=f"Unrelated note number {n} on railway timetables.")])
            for n, i in enumerate([*PARAPHRASED, *DISTINCT])]
    recs += [Record(id=f"para-{i}", task_type="short-long", task=f"check statement {i}", query=text,
                    positive=f"Field notes on {TOPICS[7 + n]}.",
                    negatives=[Negative(text=f"Weather report {n} for the coast.")])
             for n, (i, text) in enumerate(PARAPHRASED.items())]
    return recs


def _run(step: str, records, params, teacher=None):
    ctx = FilterContext(out_dir=None, teacher_factory=(lambda: teacher) if teacher else None, step_name=step)
    kept = STEPS.get(step).fn(records, params, ctx)
    return kept, ctx


def test_paraphrases_are_dropped_and_minhash_misses_them(claims, cached_teacher):
    records = _records(claims)
    kept, ctx = _run("minhash", records, {}, cached_teacher)
    assert len(kept) == len(records) and not ctx.rejections  # word 3-grams: nothing in common enough

    kept, ctx = _run("semantic_dedup", records, {}, cached_teacher)
    assert [r.id for r in kept] == [r.id for r in records[:len(claims)]]
    drops = {d.id: d for d in ctx.rejections}
    assert set(drops) == {f"para-{i}" for i in PARAPHRASED}
    for i in PARAPHRASED:
        d = drops[f"para-{i}"]
        assert d.reason == "semantic-duplicate-query" and d.detail["kept"] == f"sf-{i}"
        a, b = cached_teacher.encode_queries([claims[i], PARAPHRASED[i]])
        assert d.detail["cosine"] == pytest.approx(float(a @ b), abs=1e-3) and d.detail["cosine"] >= 0.95
    assert ctx.notes["semantic_dedup"]["query_groups"] == 3


def test_keep_rule_best_margin_else_first(claims, cached_teacher):
    records = _records(claims)
    records[-1].teacher = TeacherScores(model="m", margin=0.4)  # para-693: later, but best margin
    records[2].teacher = TeacherScores(model="m", margin=0.1)  # sf-693
    records[-2].teacher = TeacherScores(model="m", margin=0.2)  # para-249: the only one with a margin
    _, ctx = _run("semantic_dedup", records, {"keep": "margin"}, cached_teacher)
    assert {d.id: d.detail["kept"] for d in ctx.rejections} == {
        "sf-693": "para-693", "sf-249": "para-249", "para-818": "sf-818"}
    _, ctx = _run("semantic_dedup", records, {"keep": "first"}, cached_teacher)
    assert sorted(d.id for d in ctx.rejections) == sorted(f"para-{i}" for i in PARAPHRASED)


def test_no_second_encoding_behind_teacher_rank(claims, cached_teacher):
    """teacher_rank then semantic_dedup through the filter's runner: the step's texts all come
    from the embedding cache, queries and positives both."""
    recipe = Recipe(name="t", path=None, steps=[
        StepConfig("teacher_rank", {"positive_top": 0, "negative_bottom": 0, "drop_if_negative_outranks": False}),
        StepConfig("semantic_dedup", {"fields": ["query", "positive"]})])
    ctx = FilterContext(out_dir=None, teacher_factory=lambda: cached_teacher)
    records = _records(claims)
    before = cached_teacher.encoded
    kept, _ = run_steps(records, recipe, ctx)
    notes = ctx.notes["semantic_dedup"]
    assert notes["texts_encoded"] == 0
    # every query, then the positives of the records the query pass kept
    assert notes["embeddings_from_cache"] == len(records) + len(records) - len(PARAPHRASED)
    # what the model ran on in the whole run is what teacher_rank asked for
    assert cached_teacher.encoded - before == ctx.notes["teacher_rank"]["texts_encoded"]
    assert len(kept) == len(records) - len(PARAPHRASED)


def test_every_pair_is_found_however_deep():
    """Rows whose k nearest are all above the threshold are searched deeper: a group of 30
    near-identical vectors searched with k=1 gives all 435 pairs, as brute force does."""
    rng = np.random.default_rng(0)
    base = rng.normal(size=(1, 16))
    vecs = np.vstack([base + 0.01 * rng.normal(size=(30, 16)), rng.normal(size=(40, 16))]).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    pairs, described = similar_pairs(vecs, 0.95, k=1, batch=7)
    s = vecs @ vecs.T
    truth = {(a, b) for a in range(len(vecs)) for b in range(a + 1, len(vecs)) if s[a, b] >= 0.95}
    assert set(pairs) == truth and len(truth) >= 435
    assert described["kind"] == "flat"


def test_sharded_search_on_ray_finds_the_same_pairs():
    pytest.importorskip("ray")
    from curate.core.executor import Executor

    rng = np.random.default_rng(1)
    vecs = rng.normal(size=(60, 8)).astype(np.float32)
    vecs[30:40] = vecs[0] + 0.05 * rng.normal(size=(10, 8))
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    here, _ = similar_pairs(vecs, 0.9, k=2)
    on_ray, described = similar_pairs(vecs, 0.9, k=2, executor=Executor("ray", 2))
    assert described["shards"] == [30, 30]
    assert on_ray.keys() == here.keys() and len(here) >= 45
    assert all(on_ray[key] == pytest.approx(here[key], abs=1e-5) for key in here)


@pytest.mark.parametrize("params, needle", [
    ({"threshold": 0}, "threshold must be above 0.0 and at most 1.0, got 0"),
    ({"threshold": 1.2}, "threshold must be above 0.0 and at most 1.0, got 1.2"),
    ({"fields": ["query", "task"]}, "fields: choose 'query' or 'positive', got 'task'"),
    ({"fields": []}, "fields must name at least one of query, positive"),
    ({"keep": "best"}, "keep: choose 'margin' or 'first', got 'best'"),
])
def test_bad_parameters_are_one_line(tmp_path, params, needle):
    assert needle in recipe_error(tmp_path / "r.yaml", "steps:\n  - semantic_dedup: " + json.dumps(params) + "\n")
    with pytest.raises(CurateError):
        STEPS.get("semantic_dedup").fn([], params, FilterContext(out_dir=None))


def test_good_parameters_load(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text("steps:\n  - semantic_dedup: {threshold: 1, fields: positive, keep: first}\n")
    assert load_recipe(str(recipe)).steps[0].params["threshold"] == 1
