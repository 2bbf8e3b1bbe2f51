"""False negatives on NFCorpus: mine with part of the qrels, check against all of them.

NFCorpus test qrels are graded: 2 = directly cited, 1 = indirectly relevant.  The miner sees
only the level-2 documents as positives (``--min-relevance 2``), so the level-1 documents
are real relevant documents it does not know about; ``--check-qrels`` with the full qrels
then says how many of them it mined as negatives.  A small subset keeps it fast: the first
20 test queries (with a level-2 document and at most 40 judged ones), every document judged
for them, and 60 other documents.
"""

from __future__ import annotations

import json

import pytest

from curate.datasets.beir import load_beir
from curate.embed.cache import EmbeddingCache
from curate.embed.teacher import Teacher
from curate.mine.main import MineOptions, run_mine
from tests.helpers import SHARED_DATA, read_jsonl, run_curate
from tests.mine_helpers import write_beir


@pytest.fixture(scope="module")
def nfc(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mine-nfcorpus")
    data = load_beir(SHARED_DATA / "nfcorpus", "test")
    qids = [q for q in data.qrels if 2 in data.qrels[q].values() and len(data.qrels[q]) <= 40][:20]
    judged = {d for q in qids for d in data.qrels[q]}
    others = [d for d in data.corpus if d not in judged][:60]
    order = {d: i for i, d in enumerate(data.corpus)}
    corpus = {d: data.corpus[d] for d in sorted(judged | set(others), key=order.get)}
    qrels = {q: data.qrels[q] for q in qids}
    folder = write_beir(tmp / "beir", corpus, {q: data.queries[q] for q in qids}, qrels, split="test")
    cache_root = tmp_path_factory.getbasetemp() / "mine-cache"  # CURATE_CACHE_DIR of the CLI run
    teacher = Teacher(cache=EmbeddingCache(cache_root / "embeddings"))
    return {"tmp": tmp, "beir": folder, "qrels": qrels, "corpus": corpus, "teacher": teacher, "cache": cache_root}


def _fn_by_hand(records, corpus, qrels):
    ids_of: dict[str, set[str]] = {}
    for d, t in corpus.items():
        ids_of.setdefault(t, set()).add(d)
    negs = fns = 0
    for rec in records:
        rel = {d for d, s in qrels[rec["meta"]["query_id"]].items() if s >= 1}
        for n in rec["negatives"]:
            negs += 1
            fns += bool(ids_of[n["text"]] & rel)
    return negs, fns


@pytest.mark.bench
def test_false_negative_rate_against_held_out_qrels(nfc):
    qrels_file = nfc["beir"] / "qrels" / "test.tsv"
    naive = run_mine(MineOptions(positive_top=0, out=str(nfc["tmp"] / "naive"), data=str(nfc["beir"]), split="test",
                                 min_relevance=2, method="naive", k=8, check_qrels=str(qrels_file)),
                     teachers=[nfc["teacher"]])
    proc = run_curate("mine", "--positive-top", "0", "--data", str(nfc["beir"]), "--split", "test", "--min-relevance", "2",
                      "--method", "percpos", "-k", "8", "--check-qrels", str(qrels_file),
                      "--out", str(nfc["tmp"] / "percpos"), env={"CURATE_CACHE_DIR": str(nfc["cache"])})
    assert proc.returncode == 0, proc.stderr
    assert "false negatives against" in proc.stderr
    percpos = json.loads((nfc["tmp"] / "percpos" / "report.json").read_text())
    assert percpos["teachers"][0]["texts_encoded"] == 0  # the corpus was encoded once, by the first run

    for name, report in (("naive", naive), ("percpos", percpos)):
        recs = read_jsonl(nfc["tmp"] / name / "mined.jsonl")
        fn = report["false_negatives"]
        negs, fns = _fn_by_hand(recs, nfc["corpus"], nfc["qrels"])
        assert fn["queries_checked"] == len(recs) == 20
        assert (fn["negatives_checked"], fn["false_negatives"]) == (negs, fns)
        assert fn["rate"] == pytest.approx(fns / negs, abs=1e-4)
        for rec in recs:  # the level-2 documents the miner knew are never mined
            known = {d for d, s in nfc["qrels"][rec["meta"]["query_id"]].items() if s == 2}
            assert not known & {n["doc_id"] for n in rec["negatives"]}
            assert {rec["positive_id"], *(p["doc_id"] for p in rec["positives"])} == known
    # the teacher's nearest unlabelled documents are often relevant; a threshold under the
    # positive's score leaves fewer of them
    assert naive["false_negatives"]["rate"] > 0.15
    assert percpos["false_negatives"]["rate"] < naive["false_negatives"]["rate"]
