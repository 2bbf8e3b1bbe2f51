"""The held-out set is split by document and leaks nothing into training: not a held-out passage,
not a near-copy of one in another document; a corpus too small to hold one out trains on all."""

from __future__ import annotations

import json

from curate.core.records import Negative, Record
from curate.core.stage import run_stage
from curate.datasets.beir import load_beir
from curate.holdout.main import STAGE, HoldoutOptions
from curate.train.main import TrainOptions, eval_sets
from tests.helpers import read_jsonl, scifact_pairs


def _world(tmp_path, n_docs=10):
    """``n_docs`` documents of two passages each (real SciFact abstracts), a query for each first
    passage, and a document Z of no query whose passages copy each first passage with a word changed."""
    texts = [d for _, d in scifact_pairs(2 * n_docs, max_chars=400)]
    corpus, records = [], []
    for i in range(n_docs):
        for k in range(2):
            corpus.append({"_id": f"doc{i}#{k}", "title": "", "text": texts[2 * i + k], "source": f"doc{i}.md"})
        records.append(Record(id=f"q{i}", task_type="from-corpus", task="t", query=f"question {i}",
                              positive=texts[2 * i], positive_id=f"doc{i}#0",
                              negatives=[Negative(text="an llm negative", level=1)]))
    for i in range(n_docs):  # the same paragraph pasted into another file, one word changed
        corpus.append({"_id": f"Z#{i}", "title": "", "text": texts[2 * i].replace(" the ", " a ", 1), "source": "Z.md"})
    records.append(Record(id="qz", task_type="from-corpus", task="t", query="about the copy",
                          positive=corpus[-1]["text"], positive_id=f"Z#{n_docs - 1}"))
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(c) + "\n" for c in corpus), encoding="utf-8")
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r.to_dict()) + "\n" for r in records), encoding="utf-8")
    return corpus


def test_held_out_documents_and_their_copies_reach_no_training_file(tmp_path):
    corpus = _world(tmp_path)
    opts = HoldoutOptions(inp=str(tmp_path / "in.jsonl"), corpus=str(tmp_path / "corpus.jsonl"),
                          out=str(tmp_path / "h"), share=0.3)
    report, _ = run_stage(STAGE, opts, quiet=True)
    held = set(report["held_out"])
    assert len(held) == 3 and "Z.md" not in held, "0.3 of the 11 documents with queries"
    barred_text = {c["text"] for c in corpus if c["source"] in held}
    copies = {c["_id"] for c in corpus if c["source"] == "Z.md" and c["text"].replace(" a ", " the ", 1) in barred_text}
    assert copies, "the world plants copies of held-out passages"
    train = read_jsonl(tmp_path / "h" / "train.jsonl")
    kept_corpus = read_jsonl(tmp_path / "h" / "corpus.jsonl")
    assert not {c["_id"] for c in kept_corpus} & copies, "a near-copy of a held-out passage is no training passage"
    assert not {c["text"] for c in kept_corpus} & barred_text
    assert all(c["source"] not in held for c in kept_corpus)
    assert all(r["positive"] not in barred_text and r["positive_id"] not in copies for r in train)
    data = load_beir(tmp_path / "h" / "eval", "test")  # what curate train and curate eval read
    assert len(data.corpus) == len(corpus), "every passage competes"
    assert {d.split("#")[0] + ".md" for rel in data.qrels.values() for d in rel} == held
    assert len(data.qrels) == report["eval_queries"] == 3
    dropped = read_jsonl(tmp_path / "h" / "rejected.jsonl")
    assert [d["reason"] for d in dropped] == ["touches-held-out"] * report["dropped"]
    assert report["records_in"] == len(train) + report["eval_queries"] + report["dropped"]


def test_a_corpus_too_small_holds_nothing_out(tmp_path):
    _world(tmp_path, n_docs=3)
    opts = HoldoutOptions(inp=str(tmp_path / "in.jsonl"), corpus=str(tmp_path / "corpus.jsonl"),
                          out=str(tmp_path / "h"))
    report, _ = run_stage(STAGE, opts, quiet=True)
    assert report["documents_held_out"] == 0 and report["eval"] is None
    # an eval folder with no query: export can decontaminate against it, curate train skips it
    assert read_jsonl(tmp_path / "h" / "eval" / "queries.jsonl") == []
    assert len(read_jsonl(tmp_path / "h" / "train.jsonl")) == 4
    (tmp_path / "run" / "holdout").mkdir(parents=True)
    (tmp_path / "h" / "eval").rename(tmp_path / "run" / "holdout" / "eval")
    assert eval_sets(TrainOptions(run=str(tmp_path / "run"))) == []
    lines = STAGE.present(STAGE.funnel(report, tmp_path / "h")).lines
    assert "nothing held out: 4 documents with queries, fewer than 5" in lines[0][1]
