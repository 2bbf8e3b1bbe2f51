"""`curate mine` on SciFact train against sentence-transformers' ``mine_hard_negatives``.

A subset keeps the test short on 2 cores: the first 150 train claims (in qrels order), all
their labelled abstracts, and the first other abstracts of the corpus up to 500 documents,
no text cut.  Both miners use the same bundled all-MiniLM-L6-v2 model object; its ``encode``
remembers each text, so the second miner gets bit-identical vectors without encoding again
(the comparison is about the mining).  Conventions both share: the corpus deduplicated by
text, positives appended to it, every positive of a query excluded, thresholds from the
lowest positive, "drop candidates scoring above".  Theirs is asked for ``labeled-list``
output (one row per (query, positive) with every negative found, even when fewer than k)
and a ``range_max`` deep enough for each setting; ours searches deeper only where needed.

Scores come from different arithmetic (FAISS here, a torch matmul there), about 1e-7 apart,
so two documents whose scores tie at that level may come out in either order; the check
allows exactly that and nothing else.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from curate.datasets.beir import load_beir
from curate.embed.cache import EmbeddingCache
from curate.embed.teacher import Teacher
from curate.mine.main import MineOptions, run_mine
from tests.helpers import SHARED_DATA, read_jsonl, run_curate
from tests.mine_helpers import memo_model, write_beir, write_jsonl

N_QUERIES = 150
N_DOCS = 500
TIE = 1e-5


@pytest.fixture(scope="module")
def scifact(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mine-scifact")
    data = load_beir(SHARED_DATA / "scifact", "train")
    qids = list(data.qrels)[:N_QUERIES]
    pos_ids = list(dict.fromkeys(d for q in qids for d in data.qrels[q]))
    taken = set(pos_ids)
    others = [d for d in data.corpus if d not in taken][:N_DOCS - len(pos_ids)]
    order = {d: i for i, d in enumerate(data.corpus)}
    doc_ids = sorted(taken | set(others), key=order.get)
    corpus = {d: data.corpus[d] for d in doc_ids}
    rows = [(data.queries[q], data.corpus[d]) for q in qids for d in data.qrels[q]]
    write_jsonl(tmp / "corpus.jsonl", ({"_id": d, "text": t} for d, t in corpus.items()))
    write_jsonl(tmp / "pairs.jsonl", ({"query": q, "positive": p} for q, p in rows))
    write_beir(tmp / "beir", corpus, {q: data.queries[q] for q in qids}, {q: data.qrels[q] for q in qids})
    cache_root = tmp_path_factory.getbasetemp() / "mine-cache"  # CURATE_CACHE_DIR of the CLI runs
    cache_dir = cache_root / "embeddings"
    teacher = Teacher(cache=EmbeddingCache(cache_dir))
    memo_model(teacher.model)
    return {"tmp": tmp, "rows": rows, "corpus": list(corpus.values()), "teacher": teacher, "cache": cache_root,
            "qids": qids, "data": data}


def _ours(path) -> dict[str, tuple[list[str], list[float]]]:
    return {r["query"]: ([n["text"] for n in r["negatives"]], [n["teacher_score"] for n in r["negatives"]])
            for r in read_jsonl(path)}


def _theirs(sf, **kwargs) -> dict[str, tuple[list[str], list[float]]]:
    from datasets import Dataset
    from sentence_transformers.util import mine_hard_negatives

    ds = Dataset.from_dict({"query": [q for q, _ in sf["rows"]], "positive": [p for _, p in sf["rows"]]})
    res = mine_hard_negatives(ds, sf["teacher"].model, corpus=sf["corpus"], num_negatives=4,
                              output_format="labeled-list", output_scores=True, verbose=False, batch_size=64,
                              **kwargs)
    out: dict[str, tuple[list[str], list[float]]] = {}
    for row in res:
        negs = (row["positive"][1:], row["scores"][1:])  # [positive, negatives...] per row
        assert out.setdefault(row["query"], negs) == negs  # one row per positive, the same negatives
    return out


def _same(ours, theirs) -> int:
    """Assert the two results agree; return how many queries agree only up to score ties."""
    assert set(ours) == set(theirs)
    tied = 0
    for q, (texts, scores) in ours.items():
        t_texts, t_scores = theirs[q]
        assert len(texts) == len(t_texts), q
        np.testing.assert_allclose(scores, t_scores, rtol=0, atol=TIE)
        if texts == t_texts:
            continue
        tied += 1
        for i, (a, b) in enumerate(zip(texts, t_texts)):
            if a != b:  # a different document here must tie with a neighbour in score
                near = [scores[j] for j in (i - 1, i + 1) if 0 <= j < len(scores)]
                assert any(abs(scores[i] - s) < TIE for s in near), (q, i)
        if set(texts) != set(t_texts):  # only a tie at the cut-off may swap a document in or out
            assert abs(scores[-1] - t_scores[-1]) < TIE
    return tied


@pytest.mark.bench
def test_naive_top_k_equals_sentence_transformers(scifact):
    out = scifact["tmp"] / "naive"
    report = run_mine(MineOptions(positive_top=0, out=str(out), pairs=str(scifact["tmp"] / "pairs.jsonl"),
                                  corpus=str(scifact["tmp"] / "corpus.jsonl"), method="naive", k=4),
                      teachers=[scifact["teacher"]])
    ours = _ours(out / "mined.jsonl")
    theirs = _theirs(scifact, range_max=100)
    tied = _same(ours, theirs)
    assert tied <= 3
    assert report["queries_short"] == 0 and report["negatives"] == 4 * len(ours)
    assert len(ours) == len({q for q, _ in scifact["rows"]})  # a query per distinct claim text


def test_percpos_equals_relative_margin(scifact):
    out = scifact["tmp"] / "percpos"
    # a first window of 5 forces the deeper search wherever the top candidates are rejected
    report = run_mine(MineOptions(positive_top=0, out=str(out), pairs=str(scifact["tmp"] / "pairs.jsonl"),
                                  corpus=str(scifact["tmp"] / "corpus.jsonl"), method="percpos", relative_margin=0.05,
                                  k=4, depth=5), teachers=[scifact["teacher"]])
    ours = _ours(out / "mined.jsonl")
    n_unique = len(dict.fromkeys(scifact["corpus"] + [p for _, p in scifact["rows"]]))
    max_pos = 5  # SciFact train: at most 5 positives per claim
    theirs = _theirs(scifact, relative_margin=0.05, range_max=n_unique - max_pos)
    tied = _same(ours, theirs)
    assert tied <= 3
    assert report["teachers"][0]["queries_searched_deeper"] > 0
    assert report["rejected_candidates"]["above_threshold"] > 0
    for rec in read_jsonl(out / "mined.jsonl"):
        t = rec["teacher"]
        assert t["positive"] == min(t["positives"])
        assert all(n["teacher_score"] <= 0.95 * t["positive"] + 1e-9 for n in rec["negatives"])


def test_cli_beir_folder_matches_pairs_run(scifact):
    out = scifact["tmp"] / "cli"
    proc = run_curate("mine", "--positive-top", "0", "--data", str(scifact["tmp"] / "beir"), "--split", "train", "--method", "percpos",
                      "--relative-margin", "0.05", "-k", "4", "--out", str(out),
                      env={"CURATE_CACHE_DIR": str(scifact["cache"])})
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["teachers"][0]["texts_encoded"] == 0  # every vector came from the shared cache
    assert report["queries_in"] == N_QUERIES and report["method"] == {"name": "percpos", "relative_margin": 0.05}
    assert (out / "mine_scores.png").exists() and (out / "mine_gap.png").exists()
    pairs_run = _ours(scifact["tmp"] / "percpos" / "mined.jsonl")
    recs = read_jsonl(out / "mined.jsonl")
    data = scifact["data"]
    for rec in recs:
        qid = rec["meta"]["query_id"]
        assert rec["query"] == data.queries[qid]
        assert rec["positive"] == data.corpus[next(iter(data.qrels[qid]))]  # the first labelled positive
        assert [rec["positive_id"], *(p["doc_id"] for p in rec["positives"])] == list(data.qrels[qid])
        assert [n["text"] for n in rec["negatives"]] == pairs_run[rec["query"]][0]
        assert not {n["doc_id"] for n in rec["negatives"]} & set(data.qrels[qid])
    assert "curate: error" not in proc.stderr


def test_hybrid_scores_keep_the_teachers_picks_and_rescore_them(scifact):
    """``--scores hybrid``: the same negatives in the same order as the teacher's run, with BM25
    mixed into every score (the positive's too) at the weight the report gives, chosen on these
    queries' own positives; the records name the mix as their scores' model."""
    out = scifact["tmp"] / "cli-hybrid"
    proc = run_curate("mine", "--positive-top", "0", "--data", str(scifact["tmp"] / "beir"), "--split", "train",
                      "--scores", "hybrid", "--out", str(out), env={"CURATE_CACHE_DIR": str(scifact["cache"])})
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "report.json").read_text())
    chosen = report["scores_from"]
    mrr = {float(w): m for w, m in chosen["mrr_by_weight"].items()}
    assert chosen["kind"] == "hybrid" and mrr[chosen["weight"]] == max(mrr.values())
    plain = {r["id"]: r for r in read_jsonl(scifact["tmp"] / "cli" / "mined.jsonl")}
    recs = read_jsonl(out / "mined.jsonl")
    assert len(recs) == len(plain)
    moved = 0
    for rec in recs:
        before = plain[rec["id"]]
        assert [n["text"] for n in rec["negatives"]] == [n["text"] for n in before["negatives"]]
        assert rec["teacher"]["model"].startswith(f"hybrid(bm25 {chosen['weight']:g})")
        moved += rec["teacher"]["positive"] != pytest.approx(before["teacher"]["positive"], abs=1e-6)
    assert moved == (len(recs) if chosen["weight"] > 0 else 0)
    said = f"scores: BM25 mixed in at weight {chosen['weight']:g}" if chosen["weight"] else "the teacher's cosine alone"
    assert said in proc.stdout + proc.stderr
    bad = run_curate("mine", "--data", str(scifact["tmp"] / "beir"), "--split", "train", "--scores", "hybrid",
                     "--cross-encoder", "some/model", "--out", str(scifact["tmp"] / "bad"))
    assert bad.returncode != 0 and "--scores hybrid" in bad.stderr and "Traceback" not in bad.stderr
    assert not (scifact["tmp"] / "bad").exists()  # refused before any run folder opens


def test_mined_records_keep_each_documents_title(tmp_path):
    """SciFact's documents have titles: a mined record's texts are title and body as one (what
    every stage encodes), and each document's title is kept beside it for the formats that have
    a title field."""
    from tests.mine_helpers import HashTeacher

    run_mine(MineOptions(out=str(tmp_path / "m"), data=str(SHARED_DATA / "scifact"), split="train", method="naive",
                         k=4, limit=30, positive_top=0, plots=False), teachers=[HashTeacher("hash", dim=64)])
    data = load_beir(SHARED_DATA / "scifact", "train")
    recs = read_jsonl(tmp_path / "m" / "mined.jsonl")
    assert len(recs) == 30
    docs = [(r["positive"], r["positive_id"], r.get("positive_title")) for r in recs]
    docs += [(n["text"], n["doc_id"], n.get("title")) for r in recs for n in r["negatives"]]
    docs += [(p["text"], p["doc_id"], p.get("title")) for r in recs for p in r["positives"]]
    assert sum(title is not None for _, _, title in docs) > 0.9 * len(docs)
    for text, doc_id, title in docs:
        assert text == data.corpus[doc_id] and title == data.titles.get(doc_id)
        assert title is None or text.startswith(title + " ")
