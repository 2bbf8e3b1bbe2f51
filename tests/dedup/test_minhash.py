"""curate.dedup.minhash (batch MinHash, LSH, union-find) and the ``minhash`` filter step."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from datasketch import MinHash

from curate.dedup import minhash as M
from curate.dedup.shingles import word_shingles
from curate.core.errors import CurateError
from curate.filter.base import FilterContext
from curate.filter.steps.minhash import minhash as minhash_step
from curate.core.records import Negative, Record, TeacherScores
from tests.helpers import SHARED_DATA

RNG_WORDS = [f"w{i}" for i in range(3000)]


def _random_text(rng: random.Random, n: int = 60) -> list[str]:
    return [rng.choice(RNG_WORDS) for _ in range(n)]


def _substitute(words: list[str], k: int, rng: random.Random) -> list[str]:
    out = list(words)
    for p in rng.sample(range(len(out)), k):
        out[p] = f"new{rng.randrange(10**9)}"
    return out


def _exact(a: str, b: str, ngram: int = 3) -> float:
    sa, sb = word_shingles(a, ngram), word_shingles(b, ngram)
    return len(sa & sb) / len(sa | sb)


def _ds_row(text: str, ngram: int = 3) -> np.ndarray:
    m = MinHash(num_perm=128, seed=1, hashfunc=M.shingle_hash32)
    m.update_batch([" ".join(s).encode() for s in word_shingles(text, ngram)])
    return m.hashvalues


# ---------------------------------------------------------------------------- signatures


def test_rows_equal_datasketch_minhash_with_the_same_shingle_hash():
    texts = [
        "The quick brown fox jumps over the lazy dog, again and again!",
        "Hello",
        "a b",
        "Café au lait — très bien, n'est-ce pas? Ünïcödé wörds_with_underscores 42",
        "line one\nline two\ttabbed   spaced",
        "x" * 300 + " tail",
        " ".join(f"word{i}" for i in range(9000)),  # longer than one kernel block
    ]
    for ngram in (1, 2, 3, 5):
        sig = M.signatures(texts, num_perm=128, ngram=ngram, workers=2)
        for t, row in zip(texts, sig):
            assert np.array_equal(row, _ds_row(t, ngram)), (ngram, t[:30])
    # the pure-Python reference hash is the one the vectorised path computes
    assert M.shingle_hash32(("quick", "brown", "fox")) == M.shingle_hash32("quick brown fox")


def test_empty_texts_get_the_empty_signature_and_are_never_grouped():
    sig = M.signatures(["", "  ...  ", "some words here"], ngram=3)
    assert M.is_empty(sig).tolist() == [True, True, False]
    assert M.find_duplicate_groups(["", "", "!!", "real text"], 0.8) == []


def test_estimated_jaccard_tracks_exact_jaccard():
    rng = random.Random(7)
    est, exact = [], []
    texts = []
    for _ in range(300):
        a = _random_text(rng)
        b = _substitute(a, rng.randrange(0, 12), rng)
        texts += [" ".join(a), " ".join(b)]
    sig = M.signatures(texts)
    for p in range(0, len(texts), 2):
        est.append(M.jaccard(sig, p, p + 1))
        exact.append(_exact(texts[p], texts[p + 1]))
    est, exact = np.array(est), np.array(exact)
    assert exact.min() < 0.4 and exact.max() == 1.0  # a spread of similarities
    err = est - exact
    # 128 permutations: standard deviation <= sqrt(0.25 / 128) = 0.044
    assert np.abs(err).mean() < 0.035
    assert abs(err.mean()) < 0.01  # unbiased
    assert np.abs(err).max() < 0.2


# ---------------------------------------------------------------------------- grouping


def _planted_corpus(n_base: int = 2000, seed: int = 3):
    rng = random.Random(seed)
    texts = [" ".join(_random_text(rng)) for _ in range(n_base)]
    planted = []
    for k in range(200):
        src = rng.randrange(n_base)
        copy = _substitute(texts[src].split(), 1, rng)  # word 3-gram Jaccard ~0.9
        texts.append(("  " + " ".join(copy).upper() + "!") if k % 2 else " ".join(copy))
        planted.append((src, len(texts) - 1))
    return texts, planted


def test_planted_near_duplicates_are_grouped_and_distinct_texts_are_not():
    texts, planted = _planted_corpus()
    groups = M.find_duplicate_groups(texts, threshold=0.8)
    label = {m: g for g, members in enumerate(groups) for m in members}
    found = sum(1 for a, b in planted if a in label and label[a] == label.get(b))
    assert found >= 0.97 * len(planted)
    for members in groups:  # every group is one original and its copies
        originals = [m for m in members if m < 2000]
        assert len(originals) == 1, members


def test_datasketch_lsh_and_numpy_banding_give_the_same_pairs():
    texts, _ = _planted_corpus(1000, seed=5)
    sig = M.signatures(texts)
    a = M.candidate_pairs(sig, 0.8, lsh="datasketch")
    b = M.candidate_pairs(sig, 0.8, lsh="numpy")
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert len(a[0]) >= 190


def test_lsh_false_positives_are_verified_away():
    # two texts sharing exactly one LSH band collide, but their estimated Jaccard is low
    sig = np.arange(3 * 128, dtype=np.uint32).reshape(3, 128)
    bands, rows = M.lsh_params(0.8, 128)
    sig[1, :rows] = sig[0, :rows]  # same first band, nothing else
    sig[2] = sig[0]
    sig[2, :20] += 1000  # 108/128 equal = 0.84, and several bands shared
    i, j = M.candidate_pairs(sig, 0.8, lsh="numpy")
    assert (0, 1) in set(zip(i.tolist(), j.tolist()))
    vi, vj, sim = M.similar_pairs(sig, 0.8, lsh="numpy")
    assert list(zip(vi.tolist(), vj.tolist())) == [(0, 2)]
    assert sim[0] == pytest.approx(108 / 128)


def test_short_texts_fall_back_to_all_their_words():
    texts = ["hello world", "Hello, world!", "hello there", "hi"]
    assert M.find_duplicate_groups(texts, 0.8, ngram=3) == [[0, 1]]


def test_union_find_groups_chains():
    i = np.array([5, 1, 7, 2, 9])
    j = np.array([6, 2, 8, 3, 7])
    assert M.union_find_groups(i, j) == [[1, 2, 3], [5, 6], [7, 8, 9]]
    assert M.union_find_groups(np.array([], dtype=int), np.array([], dtype=int)) == []


def test_resolve_group_keeps_the_best_and_both_ends_of_a_chain():
    # A ~ B (0.9), B ~ C (0.9), A vs C 0.8 < 0.85
    sig = np.zeros((3, 100), dtype=np.uint32)
    sig[1, :10] = 1
    sig[2, :10] = 1
    sig[2, 10:20] = 3
    rank_b_best = {0: 1, 1: 0, 2: 2}.__getitem__
    drops = M.resolve_group([0, 1, 2], rank_b_best, [(sig, 0.85)])
    assert [(d, k) for d, k, _ in drops] == [(0, 1), (2, 1)]
    drops = M.resolve_group([0, 1, 2], lambda m: 0, [(sig, 0.85)])  # first seen is best
    assert [(d, k) for d, k, _ in drops] == [(1, 0)]  # C is not a duplicate of A: kept


# ---------------------------------------------------------------------------- the step


def _rec(rid: str, query: str, positive: str, task: str = "Given a claim, find evidence",
         teacher_margin=None, pos_score=None, neg_scores=()) -> Record:
    r = Record(id=rid, task_type="short-long", task=task, query=query, positive=positive,
               negatives=[Negative(text=f"neg {rid} {k}", score=s) for k, s in enumerate(neg_scores)],
               positive_score=pos_score)
    if teacher_margin is not None:
        r.teacher = TeacherScores("t", margin=teacher_margin)
    return r


def _ctx(tmp_path) -> FilterContext:
    ctx = FilterContext(out_dir=tmp_path)
    ctx.step_name = "minhash"
    return ctx


DOC = ("Vitamin D supplementation in older adults did not reduce the incidence of hip fractures "
       "in a randomised trial of two thousand participants followed for five years, although "
       "serum levels rose markedly in the treated group compared with placebo controls.")


def test_step_keeps_the_largest_teacher_margin_not_the_first(tmp_path):
    recs = [
        _rec("a", "does vitamin d prevent hip fractures", DOC + " One.", teacher_margin=0.05),
        _rec("b", "Does vitamin D prevent hip fractures?", DOC + " Two.", teacher_margin=0.30),
        _rec("c", "does vitamin d prevent hip fractures", DOC + " Three.", teacher_margin=0.10),
        _rec("d", "is coffee linked to heart disease", "Coffee intake and heart disease "
             "were studied in a cohort of nurses over two decades with no association found."),
    ]
    ctx = _ctx(tmp_path)
    kept = minhash_step(recs, {"fields": ["query"]}, ctx)
    assert [r.id for r in kept] == ["b", "d"]
    rej = {r.id: r for r in ctx.rejections}
    assert set(rej) == {"a", "c"}
    for r in rej.values():
        assert r.reason == "near-duplicate-query" and r.step == "minhash"
        assert r.detail["kept"] == "b" and r.detail["similarity"] == 1.0
    assert ctx.notes["minhash"]["query_groups"] == 1
    assert ctx.notes["minhash"]["query_dropped"] == 2


def test_step_falls_back_to_generator_margin_then_first_seen(tmp_path):
    q = "what are the effects of statins on muscle pain in elderly people"
    recs = [
        _rec("a", q, DOC, pos_score=9, neg_scores=(8, 7)),  # margin 1
        _rec("b", q, DOC, pos_score=9, neg_scores=(4, 2)),  # margin 5
        _rec("c", q, DOC),  # no scores
    ]
    ctx = _ctx(tmp_path)
    assert [r.id for r in minhash_step(recs, {"fields": ["positive"]}, ctx)] == ["b"]
    assert {r.reason for r in ctx.rejections} == {"near-duplicate-positive"}
    ctx = _ctx(tmp_path)
    assert [r.id for r in minhash_step(recs, {"fields": ["positive"], "keep": "first"}, ctx)] == ["a"]


def test_step_positive_near_duplicate_with_small_edits(tmp_path):
    edited = DOC.replace("two thousand", "2000").replace("markedly", "sharply")
    assert 0.6 < _exact(DOC, edited) < 0.8  # two edits in 37 words: not near-verbatim at 0.8
    recs = [_rec("a", "q one about vitamins", DOC), _rec("b", "another query on bones", edited)]
    assert len(minhash_step(recs, {"fields": ["positive"]}, _ctx(tmp_path))) == 2
    assert len(minhash_step(recs, {"fields": ["positive"], "threshold": 0.6}, _ctx(tmp_path))) == 1


def test_step_task_field_needs_task_and_query_words_to_collide(tmp_path):
    recs = [
        _rec("a", "vitamin d hip fracture risk in older adults", DOC + " A"),
        _rec("b", "hip fracture risk in older adults vitamin d", DOC + " B"),  # same words
        _rec("c", "statin use and muscle pain in elderly people", DOC + " C"),  # same task only
        _rec("d", "vitamin d hip fracture risk in older adults", DOC + " D",
             task="Retrieve news articles about a health topic"),  # same words, other task
    ]
    ctx = _ctx(tmp_path)
    kept = minhash_step(recs, {"fields": ["task"]}, ctx)
    assert [r.id for r in kept] == ["a", "c", "d"]
    (rej,) = ctx.rejections
    assert rej.id == "b" and rej.reason == "near-duplicate-task"
    assert rej.detail["kept"] == "a" and rej.detail["similarity"] == 1.0
    assert rej.detail["query_similarity"] == 1.0
    # the word 3-gram query pass drops d (a's query verbatim) but does not see b as a copy
    assert [r.id for r in minhash_step(recs, {"fields": ["query"]}, _ctx(tmp_path))] == ["a", "b", "c"]


def test_step_rejects_bad_params(tmp_path):
    for bad in ({"fields": ["title"]}, {"threshold": 1.5}, {"keep": "best"}, {"ngram": 0},
                {"colour": 1}, {"threshold": {"title": 0.5}}):
        with pytest.raises(CurateError):
            minhash_step([], bad, _ctx(tmp_path))


# ---------------------------------------------------------------------------- real text


def _scifact_docs(n: int) -> list[str]:
    path = SHARED_DATA / "scifact" / "corpus.jsonl"
    if not path.exists():
        pytest.skip("SciFact corpus not available")
    docs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            text = f"{d.get('title', '')} {d.get('text', '')}".strip()
            if len(text.split()) >= 80:
                docs.append(text)
            if len(docs) == n:
                break
    return docs


def test_edited_copies_of_scifact_abstracts_are_caught():
    docs = _scifact_docs(400)
    rng = random.Random(11)
    texts = list(docs)
    planted = []
    for src in rng.sample(range(len(docs)), 40):
        words = docs[src].split()
        # one substituted word per ~60, a dropped sentence-final word, changed case
        for p in rng.sample(range(len(words)), max(1, len(words) // 60)):
            words[p] = "edited"
        copy = " ".join(words[:-1])
        texts.append(copy.lower() if src % 2 else copy)
        planted.append((src, len(texts) - 1))
    groups = M.find_duplicate_groups(texts, threshold=0.8)
    label = {m: g for g, members in enumerate(groups) for m in members}
    assert all(_exact(texts[a], texts[b]) >= 0.85 for a, b in planted)
    caught = sum(1 for a, b in planted if a in label and label[a] == label.get(b))
    assert caught >= 39
    for members in groups:  # nothing else merged: every pair in a group is truly similar
        for m in members[1:]:
            assert _exact(texts[members[0]], texts[m]) >= 0.7


def test_without_stored_scores_the_teacher_picks_the_member_to_keep(tmp_path):
    """Duplicates met before the ranking steps: the teacher's margin decides, not file order."""
    from curate.embed.cache import EmbeddingCache
    from curate.embed.teacher import Teacher

    query = "How do honey bees communicate the location of flowers to the hive?"
    good = "Forager honey bees perform a waggle dance whose angle and length tell nestmates the direction and distance of a food source."
    off = "The stock market closed higher on Tuesday as technology shares rallied after strong earnings."
    neg = Negative(text="Bumblebees are larger than honey bees and nest in the ground.", level=1)
    worse = Record(id="worse", task_type="short-long", task="t", query=query, positive=off, negatives=[neg])
    better = Record(id="better", task_type="short-long", task="t", query=query, positive=good,
                    negatives=[Negative(text=neg.text, level=1)])
    ctx = FilterContext(out_dir=tmp_path, teacher_factory=lambda: Teacher(cache=EmbeddingCache(tmp_path / "c")))
    ctx.step_name = "minhash"
    kept = minhash_step([worse, better], {"fields": ["query"]}, ctx)
    assert [r.id for r in kept] == ["better"]
    assert ctx.rejections[0].id == "worse" and ctx.rejections[0].detail["kept"] == "better"
