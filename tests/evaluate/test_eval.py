"""``curate eval``: metrics, the full SciFact score, the light set, fingerprints, errors.

One full SciFact test evaluation runs through the CLI (session fixture); every later test
reads its vectors from the same temporary cache instead of encoding the corpus again.
"""

from __future__ import annotations

import json
import math
import os
import time

import numpy as np
import pytest

from curate.datasets.beir import load_beir
from curate.embed.cache import EmbeddingCache
from curate.embed.teacher import Teacher
from curate.evaluate.light import LightSet, stratified_sample, stratum
from curate.evaluate.metrics import evaluate
from tests.helpers import SHARED_DATA, assert_one_line_error, run_curate

SCIFACT = SHARED_DATA / "scifact"
MTEB_SCIFACT_NDCG10 = 0.6451  # all-MiniLM-L6-v2 on MTEB SciFact (test)


# ---------------------------------------------------------------------------- metrics


def test_graded_ndcg_recall_mrr_by_hand():
    qrels = {"q1": {"a": 2, "b": 1, "c": 1, "z": 0},
             "q2": {"a": 0},  # nothing relevant: skipped
             "q3": {"b": 1},  # relevant docs, no ranking: zero everywhere
             "q4": {"d": 1}}  # its own id retrieved first: ignored (BEIR/MTEB)
    run = {"q1": ["x", "a", "c", "z", "y"], "q4": ["q4", "d"]}
    s = evaluate(run, qrels, metrics=(("ndcg@10", "ndcg", 10), ("ndcg@2", "ndcg", 2),
                                      ("recall@100", "recall", 100), ("recall@2", "recall", 2),
                                      ("mrr@10", "mrr", 10), ("mrr@1", "mrr", 1)))
    assert s.n_queries == 3 and set(s.per_query["ndcg@10"]) == {"q1", "q3", "q4"}
    # q1: gains 0, 2, 1, 0 at ranks 1-4; ideal 2, 1, 1
    dcg = 2 / math.log2(3) + 1 / math.log2(4)
    idcg = 2 + 1 / math.log2(3) + 1 / math.log2(4)
    q1 = {m: v["q1"] for m, v in s.per_query.items()}
    assert q1["ndcg@10"] == pytest.approx(dcg / idcg)
    assert q1["ndcg@2"] == pytest.approx((2 / math.log2(3)) / (2 + 1 / math.log2(3)))
    assert q1["recall@100"] == pytest.approx(2 / 3) and q1["recall@2"] == pytest.approx(1 / 3)
    assert q1["mrr@10"] == 0.5 and q1["mrr@1"] == 0.0
    assert all(v["q3"] == 0.0 for v in s.per_query.values())
    assert all(v["q4"] == 1.0 for v in s.per_query.values())
    assert s.means["ndcg@10"] == pytest.approx((dcg / idcg + 0 + 1) / 3)
    # without the BEIR convention the query's own id takes rank 1
    plain = evaluate(run, qrels, ignore_identical_ids=False)
    assert plain.per_query["mrr@10"]["q4"] == 0.5


# ---------------------------------------------------------------------------- SciFact, full


@pytest.fixture(scope="session")
def scifact_full(tmp_path_factory):
    cache = tmp_path_factory.mktemp("eval-cache")
    out = cache / "full.json"
    started = time.perf_counter()
    proc = run_curate("eval", "--data", str(SCIFACT), "--split", "test", "--out", str(out),
                      env={"CURATE_CACHE_DIR": str(cache)})
    assert proc.returncode == 0, proc.stderr
    return {"cache": cache, "report": json.loads(out.read_text()), "stdout": proc.stdout,
            "seconds": time.perf_counter() - started}


def _cached_vectors(cache):
    """The fixture run's SciFact vectors, read back from its cache (nothing re-encoded)."""
    data = load_beir(SCIFACT, "test")
    teacher = Teacher(cache=EmbeddingCache(cache / "embeddings"))
    doc_ids, qids = list(data.corpus), list(data.qrels)
    docs = teacher.encode_docs([data.corpus[d] for d in doc_ids])
    queries = teacher.encode_queries([data.queries[q] for q in qids])
    assert teacher.encoded == 0 and teacher.source._model is None
    return data, doc_ids, qids, docs, queries


@pytest.mark.bench
def test_full_scifact_matches_mteb(scifact_full):
    r = scifact_full["report"]
    assert r["mode"] == "full" and r["model"]["precision"] == "fp32"
    assert (r["queries"], r["docs"]) == (300, 5183)
    assert abs(r["metrics"]["ndcg@10"] - MTEB_SCIFACT_NDCG10) <= 0.01
    assert r["metrics"]["recall@100"] > r["metrics"]["ndcg@10"] > 0.5
    assert 0.5 < r["metrics"]["mrr@10"] <= 1
    assert r["encoded"] == 5183 + 300 and r["seconds"]["encode_docs"] > 0
    assert "NDCG@10" in scifact_full["stdout"] and "5183" in scifact_full["stdout"]
    results = list((scifact_full["cache"] / "eval" / "results").glob("scifact-test-*.json"))
    assert len(results) == 1  # filed for later light runs to compare against


@pytest.mark.bench
def test_metrics_match_sentence_transformers(scifact_full):
    from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator

    data, doc_ids, qids, docs, queries = _cached_vectors(scifact_full["cache"])
    scores = queries @ docs.T
    top = np.argsort(-scores, axis=1, kind="stable")[:, :100]
    results = [[{"corpus_id": doc_ids[j], "score": float(scores[i, j])} for j in row]
               for i, row in enumerate(top)]
    st = InformationRetrievalEvaluator(
        queries={q: data.queries[q] for q in qids}, corpus={d: "" for d in doc_ids},
        relevant_docs={q: set(data.qrels[q]) for q in qids}, precision_recall_at_k=[100])
    theirs = st.compute_metrics(results)
    ours = evaluate({q: [r["corpus_id"] for r in res] for q, res in zip(qids, results)}, data.qrels)
    assert ours.means["ndcg@10"] == pytest.approx(theirs["ndcg@k"][10], abs=1e-9)
    assert ours.means["mrr@10"] == pytest.approx(theirs["mrr@k"][10], abs=1e-9)
    assert ours.means["recall@100"] == pytest.approx(theirs["recall@k"][100], abs=1e-9)
    # and the CLI (FAISS top-k, trec_eval tie order) reported the same numbers
    for m, v in scifact_full["report"]["metrics"].items():
        assert v == pytest.approx(ours.means[m], abs=1e-4)


# ---------------------------------------------------------------------------- the light set


def test_stratified_sample_keeps_every_stratum_share():
    labels = {f"q{i}": ("a" if i < 50 else "b" if i < 80 else "c") for i in range(100)}
    picked = stratified_sample(labels, 0.2, seed=3)
    assert len(picked) == 20
    counts = {g: sum(labels[q] == g for q in picked) for g in "abc"}
    assert counts == {"a": 10, "b": 6, "c": 4}
    assert picked == stratified_sample(labels, 0.2, seed=3)  # seeded
    assert picked != stratified_sample(labels, 0.2, seed=4)
    assert stratum(1, 0.9) == "rel 1 / ndcg q4" and stratum(5, 0.0) == "rel 4-7 / ndcg q1"


@pytest.fixture(scope="session")
def scifact_light(scifact_full, tmp_path_factory):
    """A light run at fp32: the teacher and the model are the cached bundled MiniLM."""
    tmp = tmp_path_factory.mktemp("light")
    out, lset = tmp / "light.json", tmp / "set.json"
    proc = run_curate("eval", "--data", str(SCIFACT), "--light", "--precision", "fp32", "--light-set",
                      str(lset), "--out", str(out), env={"CURATE_CACHE_DIR": str(scifact_full["cache"])})
    assert proc.returncode == 0, proc.stderr
    return {"report": json.loads(out.read_text()), "set": lset, "tmp": tmp}


@pytest.mark.bench
def test_light_set_properties(scifact_full, scifact_light):
    r = scifact_light["report"]
    lset = LightSet.from_json(json.loads(scifact_light["set"].read_text()), scifact_light["set"])
    assert r["light_set"]["built"] and r["encoded"] == 0  # everything came from the full run's cache
    assert len(lset.query_ids) == 60 == r["queries"]  # 20 % of 300
    for label, (n, sampled) in lset.strata.items():  # label-balanced: each stratum its share
        assert abs(sampled - 0.2 * n) < 1, label
    assert sum(n for n, _ in lset.strata.values()) == 300

    # the corpus is the teacher's top-50 union for the sampled queries plus their relevant docs
    data, doc_ids, qids, docs, queries = _cached_vectors(scifact_full["cache"])
    row = {q: i for i, q in enumerate(qids)}
    top = {doc_ids[j] for q in lset.query_ids for j in np.argsort(-(queries[row[q]] @ docs.T))[:50]}
    relevant = {d for q in lset.query_ids for d in data.qrels[q]}
    assert set(lset.doc_ids) == top | relevant and len(lset.doc_ids) == r["docs"]
    assert lset.relevant_added == len(relevant - top) > 0
    assert len(lset.doc_ids) < 0.6 * len(doc_ids)

    # the teacher is the evaluated model here: its known gap is the model's gap
    diff = r["difference"]
    assert diff["full"]["source"] == "cached"
    assert diff["model"] == pytest.approx(diff["teacher"], abs=1e-4)
    assert abs(diff["model"]["ndcg@10"]) <= 0.02
    assert diff["full"]["metrics"] == scifact_full["report"]["metrics"]


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    """A 1-layer MiniLM saved as a local folder: a quick stand-in for a trained checkpoint."""
    folder = tmp_path_factory.mktemp("tiny") / "model"
    model = Teacher(cache=False).model
    bert = model[0].auto_model
    bert.encoder.layer = bert.encoder.layer[:1]
    bert.config.num_hidden_layers = 1
    model.max_seq_length = 128
    model.save(str(folder))
    return folder


@pytest.mark.bench
def test_stored_light_set_is_reused_and_only_its_docs_encoded(scifact_light, tiny_model, tmp_path):
    out = tmp_path / "tiny.json"
    env = {"CURATE_CACHE_DIR": str(tmp_path / "fresh-cache")}
    args = ["eval", "--model", str(tiny_model), "--data", str(SCIFACT), "--light", "--precision", "int8",
            "--light-set", str(scifact_light["set"]), "--out", str(out)]
    proc = run_curate(*args, env=env)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(out.read_text())
    lset = scifact_light["report"]["light_set"]
    assert not r["light_set"]["built"] and r["model"]["precision"] == "int8"
    assert r["encoded"] == lset["docs"] + lset["queries"]  # the light set only, no teacher pass
    assert r["difference"]["model"] is None  # no full score of this model is known yet
    assert r["difference"]["teacher"] == pytest.approx(lset["teacher_scores"]["difference"], abs=1e-4)
    assert 0.2 < r["metrics"]["ndcg@10"] < scifact_light["report"]["metrics"]["ndcg@10"]

    # --compare-full runs the full fp32 evaluation once; a later light run finds it cached
    proc = run_curate(*args, "--compare-full", "--per-query", env=env)
    assert proc.returncode == 0, proc.stderr
    again = json.loads(out.read_text())
    assert again["encoded"] == 0  # its int8 light vectors were cached by the first run
    assert set(again["per_query"]["ndcg@10"]) == set(json.loads(scifact_light["set"].read_text())["query_ids"])
    full = again["difference"]["full"]
    assert full["source"] == "computed" and full["precision"] == "fp32"
    assert again["difference"]["model"]["ndcg@10"] == pytest.approx(
        again["metrics"]["ndcg@10"] - full["metrics"]["ndcg@10"], abs=2e-4)
    proc = run_curate(*args[:-2], env=env)  # no --out: the table alone
    assert proc.returncode == 0 and "cached" in proc.stdout and "light - full" in proc.stdout


@pytest.mark.bench
def test_prepare_light_set_builds_once_what_an_evaluation_uses(scifact_full, scifact_light, tmp_path, monkeypatch):
    """What ``curate ablate`` calls before its runs go to several workers: the set an evaluation
    would build, stored once and then only read."""
    from curate.evaluate.main import EvalOptions, prepare_light_set

    monkeypatch.setenv("CURATE_CACHE_DIR", str(scifact_full["cache"]))  # the teacher's vectors: no encoding
    target = tmp_path / "set.json"
    opts = EvalOptions(data=str(SCIFACT), split="test", light=True, light_set=str(target))
    assert prepare_light_set(opts) == target and target.is_file()
    made = target.stat().st_mtime_ns
    assert prepare_light_set(opts) == target and target.stat().st_mtime_ns == made  # read, not rebuilt
    ours, theirs = (json.loads(p.read_text()) for p in (target, scifact_light["set"]))
    assert ours["query_ids"] == theirs["query_ids"] and ours["doc_ids"] == theirs["doc_ids"]


def test_auto_precision():
    from curate.evaluate.main import native_bf16, resolve_precision

    assert resolve_precision("auto", light=False, device=None) == "fp32"
    assert resolve_precision("auto", light=True, device="cuda:0") == "fp16"
    assert resolve_precision("auto", light=True, device="cpu") == ("bf16" if native_bf16() else "int8")
    assert resolve_precision("int8", light=False, device=None) == "int8"


def test_fingerprint_follows_the_weights(tiny_model):
    first = Teacher(str(tiny_model), cache=False)
    assert first.model_id.startswith(str(tiny_model.resolve()) + "#")
    assert Teacher(str(tiny_model), cache=False).model_id == first.model_id
    assert Teacher(str(tiny_model), cache=False, precision="int8").model_id == first.model_id + "@int8"
    weights = tiny_model / "model.safetensors"
    blob = weights.read_bytes()
    st = weights.stat()
    weights.write_bytes(blob)  # retrained in place: same path, same size, new mtime
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert Teacher(str(tiny_model), cache=False).model_id != first.model_id
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert Teacher(str(tiny_model), cache=False).model_id == first.model_id


# ---------------------------------------------------------------------------- errors


def test_bad_inputs_are_one_line_errors(tmp_path):
    assert_one_line_error(run_curate("eval", "--data", str(tmp_path / "nope")), "no such folder")
    assert_one_line_error(run_curate("eval", "--data", str(SCIFACT), "--split", "dev"),
                          "dev.tsv", "no such split", "test", "train")
    assert_one_line_error(run_curate("eval", "--data", str(SCIFACT), "--model", str(tmp_path / "no-model")),
                          "no such model folder")
    bad = tmp_path / "set.json"
    bad.write_text('{"version": 1, "query_ids": ["nope"], "doc_ids": []}')
    assert_one_line_error(run_curate("eval", "--data", str(SCIFACT), "--light", "--light-set", str(bad)),
                          str(bad), "not a light set")


@pytest.mark.bench
def test_the_hybrid_teacher_is_evaluated_from_the_same_vectors(scifact_full):
    """``--bm25-weight``: the ranking mine's hybrid scores give (BM25 mixed into the cosine), from the
    vectors the dense run cached; filed apart from the dense result, never over it."""
    cache = scifact_full["cache"]
    out = cache / "hybrid.json"
    proc = run_curate("eval", "--data", str(SCIFACT), "--split", "test", "--bm25-weight", "0.3", "--per-query",
                      "--out", str(out), env={"CURATE_CACHE_DIR": str(cache)})
    assert proc.returncode == 0, proc.stderr
    r = json.loads(out.read_text())
    assert r["encoded"] == 0 and r["model"]["bm25_weight"] == 0.3  # every vector from the dense run's cache
    assert "BM25 at 0.3" in proc.stdout
    dense = scifact_full["report"]["metrics"]
    # BM25 knows SciFact's vocabulary: the mix ranks its positives well above the model alone
    assert r["metrics"]["ndcg@10"] > dense["ndcg@10"] + 0.03
    assert r["metrics"]["recall@100"] >= dense["recall@100"]
    results = sorted((cache / "eval" / "results").glob("scifact-test-*.json"))
    assert len(results) == 2  # the hybrid's result beside the model's
    # by hand: the same mix over every document, for the first queries
    from curate.negatives.hybrid import bm25_index, lexical_share, mix
    import bm25s

    data, doc_ids, qids, docs, queries = _cached_vectors(cache)
    index = bm25_index([data.corpus[d] for d in doc_ids])
    tokens = bm25s.tokenize([data.queries[q] for q in qids[:20]], stopwords="en", return_ids=False,
                            show_progress=False)
    run = {q: [doc_ids[j] for j in np.argsort(-mix(docs @ queries[i], lexical_share(index, tokens[i], len(docs)),
                                                   0.3), kind="stable")[:11]] for i, q in enumerate(qids[:20])}
    by_hand = evaluate(run, {q: data.qrels[q] for q in qids[:20]})
    per_query = r["per_query"]["ndcg@10"]
    assert [per_query[q] for q in qids[:20]] == pytest.approx([by_hand.per_query["ndcg@10"][q] for q in qids[:20]],
                                                              abs=1e-6)
