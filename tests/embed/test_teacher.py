"""The embedding cache, the bundled teacher, and exact search."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from curate.core.errors import CurateError
from curate.embed.cache import EmbeddingCache, default_cache_dir, text_key
from curate.negatives.search import rank_targets, top_k
from curate.embed.teacher import BUNDLED_ID, Teacher, preset_prompts
from tests.helpers import REPO

# ---------------------------------------------------------------------------- the cache


def test_cache_roundtrip_and_counters(tmp_path):
    cache = EmbeddingCache(tmp_path)
    assert cache.path == tmp_path / "vectors.sqlite"
    rng = np.random.default_rng(0)
    texts = [f"document {i}" for i in range(1500)]  # more than one IN(...) chunk
    vecs = rng.standard_normal((1500, 16)).astype(np.float32)
    assert cache.get_many("m", "", texts[:3]) == [None, None, None]
    cache.put_many("m", "", texts, vecs)
    got = cache.get_many("m", "", texts[::-1] + ["never stored"])
    assert got[-1] is None
    np.testing.assert_array_equal(np.stack(got[:-1]), vecs[::-1])
    assert cache.stats() == {"hits": 1500, "misses": 4, "written": 1500}

    # the prompt and the model are part of the key
    assert cache.get_many("m", "query: ", texts[:2]) == [None, None]
    assert cache.get_many("other", "", texts[:2]) == [None, None]
    mat, mask = cache.get_matrix("m", "", ["document 7", "nope", "document 7"])
    assert mask.tolist() == [True, False, True]
    np.testing.assert_array_equal(mat[0], vecs[7])
    assert not mat[1].any()
    assert cache.count() == 1500 and cache.count("m", "") == 1500 and cache.count("x") == 0

    with pytest.raises(CurateError, match="holds 16-d vectors for m .*not 8-d"):
        cache.put_many("m", "", ["a"], np.ones((1, 8), dtype=np.float32))  # 16-d space
    with pytest.raises(ValueError):
        cache.put_many("m", "", ["a", "b"], np.zeros((1, 16), dtype=np.float32))
    with pytest.raises(ValueError):
        cache.put_many("m", "", ["a"], np.full((1, 16), np.nan, dtype=np.float32))
    cache.close()

    # a second process sees it all; a damaged blob is a miss, never a wrong-shaped vector
    db = sqlite3.connect(tmp_path / "vectors.sqlite")
    db.execute("UPDATE vectors SET v = ? WHERE h = ?", (b"\x00" * 10, text_key("document 3")))
    db.commit()
    db.close()
    again = EmbeddingCache(tmp_path / "vectors.sqlite")
    got = again.get_many("m", "", ["document 3", "document 4"])
    assert got[0] is None
    np.testing.assert_array_equal(got[1], vecs[4])


def test_cache_location(monkeypatch, tmp_path):
    monkeypatch.setenv("CURATE_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c" / "embeddings"
    assert EmbeddingCache().path == tmp_path / "c" / "embeddings" / "vectors.sqlite"
    monkeypatch.delenv("CURATE_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "curate" / "embeddings"


_WRITER = textwrap.dedent("""
    import sys, numpy as np
    from curate.embed.cache import EmbeddingCache
    c = EmbeddingCache(sys.argv[1])
    i = 0
    while True:
        texts = [f"t{j}" for j in range(i, i + 500)]
        c.put_many("m", "", texts, np.arange(i, i + 500, dtype=np.float32)[:, None].repeat(64, 1))
        i += 500
        if i == 1000:
            print("ready", flush=True)
""")


def test_cache_survives_a_killed_writer(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path)], stdout=subprocess.PIPE,
                            text=True, cwd=str(REPO))
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    cache = EmbeddingCache(tmp_path)
    n = cache.count("m", "")
    assert n >= 1000 and n % 500 == 0  # whole batches only
    texts = [f"t{j}" for j in range(n + 500)]
    got = cache.get_many("m", "", texts)
    assert all(v is not None for v in got[:n]) and all(v is None for v in got[n:])
    for j in range(0, n, 97):
        assert got[j].shape == (64,) and (got[j] == j).all()


# ---------------------------------------------------------------------------- search


def _unit(rng, n, d):
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_top_k_equals_brute_force():
    rng = np.random.default_rng(1)
    docs, queries = _unit(rng, 700, 48), _unit(rng, 53, 48)
    scores, idx = top_k(queries, docs, 10)
    full = queries @ docs.T
    want = np.argsort(-full, axis=1, kind="stable")[:, :10]
    np.testing.assert_array_equal(idx, want)
    np.testing.assert_allclose(scores, np.take_along_axis(full, want, 1), atol=1e-5)
    assert idx.dtype == np.int64 and scores.dtype == np.float32
    s, i = top_k(queries[:2], docs[:4], 10)  # k larger than the corpus
    assert s.shape == i.shape == (2, 4)
    assert sorted(i[0].tolist()) == [0, 1, 2, 3]
    s, i = top_k(queries[:0], docs, 5)
    assert s.shape == (0, 5)


def test_rank_targets_equals_brute_force():
    rng = np.random.default_rng(2)
    docs, queries = _unit(rng, 300, 32), _unit(rng, 40, 32)
    targets = [rng.choice(300, size=int(rng.integers(1, 6)), replace=False).tolist() for _ in range(40)]
    exclude = [int(rng.integers(300)) if q % 3 == 0 else None for q in range(40)]
    scores, ranks = rank_targets(queries, docs, targets, exclude, max_cells=300 * 7)  # 7-query chunks
    full = queries @ docs.T
    for q in range(40):
        row = full[q].copy()
        if exclude[q] is not None:
            row[exclude[q]] = -np.inf
        for t, s, r in zip(targets[q], scores[q], ranks[q]):
            assert s == pytest.approx(full[q, t], abs=1e-5)
            assert r == int((row > full[q, t]).sum()) + 1


# ---------------------------------------------------------------------------- the teacher


@pytest.fixture(scope="module")
def teacher_cache(tmp_path_factory):
    return EmbeddingCache(tmp_path_factory.mktemp("teacher-cache"))


@pytest.fixture(scope="module")
def teacher(teacher_cache):
    return Teacher(cache=teacher_cache)


def test_bundled_teacher_is_sensible(teacher):
    assert teacher.model_id == BUNDLED_ID
    assert teacher.query_prompt == "" and teacher.doc_prompt == ""
    q = teacher.encode_queries(["A man is playing a guitar."])
    d = teacher.encode_docs(["Someone is strumming a guitar.", "The central bank raised interest rates.",
                             "A person plays an instrument."])
    assert q.dtype == np.float32 and d.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(d, axis=1), 1.0, atol=1e-5)
    s = (q @ d.T)[0]
    assert s[0] > 0.6 and s[0] > s[2] > s[1] and s[1] < 0.2
    assert teacher.encode([]).shape == (0, 384)


def test_cache_makes_the_second_encode_free(teacher, teacher_cache):
    texts = ["Aspirin lowers the risk of heart attack.", "Vitamin D deficiency is common in winter.",
             "Aspirin lowers the risk of heart attack.", "Exercise improves sleep quality."]
    e0, h0 = teacher.encoded, teacher.cache_hits
    first = teacher.encode_docs(texts)
    assert teacher.encoded - e0 == 3 and teacher.cache_hits == h0  # the duplicate encoded once
    np.testing.assert_array_equal(first[0], first[2])

    fresh = Teacher(cache=teacher_cache)  # a new run: nothing loaded, everything cached
    again = fresh.encode_docs(texts)
    assert fresh.encoded == 0 and fresh.cache_hits == 3 and fresh.source._model is None
    np.testing.assert_array_equal(again, first)

    # a different prompt is a different vector, encoded anew
    fresh2 = Teacher(cache=teacher_cache, query_prompt="query: ")
    fresh2.encode_queries(texts[:1])
    assert fresh2.encoded == 1


def test_batches_sorted_by_length_match_plain_encoding(teacher):
    texts = ["short", "a much longer sentence about protein folding in yeast cells " * 3, "mid length text"]
    plain = Teacher(cache=False)
    plain.source._model = teacher.model  # same weights, no cache: every text goes through the model
    ours = plain.encode(texts)
    assert plain.encoded == 3
    ref = teacher.model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    np.testing.assert_allclose(ours, ref, atol=1e-5)


def test_default_cache_is_opened_lazily(monkeypatch, tmp_path):
    monkeypatch.setenv("CURATE_CACHE_DIR", str(tmp_path))
    t = Teacher()
    assert not (tmp_path / "embeddings").exists()  # nothing opened before the first encode
    assert t.cache.path == tmp_path / "embeddings" / "vectors.sqlite"
    assert Teacher(cache=False).cache is None


def test_prompt_presets():
    assert preset_prompts("intfloat/e5-base-v2") == ("query: ", "passage: ")
    assert preset_prompts("intfloat/multilingual-e5-small") == ("query: ", "passage: ")
    q, d = preset_prompts("intfloat/e5-mistral-7b-instruct")
    assert q.startswith("Instruct: ") and q.endswith("Query: ") and d == ""
    assert preset_prompts("BAAI/bge-small-en-v1.5")[1] == ""
    assert preset_prompts("sentence-transformers/all-mpnet-base-v2") is None
    t = Teacher("intfloat/e5-small-v2", cache=False)  # not loaded: the prompts and id need no model
    assert (t.query_prompt, t.doc_prompt, t.model_id) == ("query: ", "passage: ", "intfloat/e5-small-v2")
    t = Teacher("intfloat/e5-small-v2", query_prompt="", doc_prompt="", cache=False)
    assert (t.query_prompt, t.doc_prompt) == ("", "")
