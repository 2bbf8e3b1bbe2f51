"""The probe and the audit on records: planted shortcuts are found and named, corpus text
against corpus text sits near 0.5, and comparisons with too few texts are skipped, saying so."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from curate.audit import AuditOptions, run_audit, summary_lines
from curate.audit.origin import CORPUS, LLM, UNKNOWN, negative_origin, positive_origin
from curate.audit.probe import auc_interval
from curate.core.records import Negative, Record
from tests.audit import planted

CHARS = AuditOptions(embeddings=False)


def _row(audit, comparison, level="all"):
    return next(r for r in audit["comparisons"] if r["comparison"] == comparison and r["level"] == level)


def test_auc_and_its_interval_match_the_rank_statistic():
    rng = np.random.default_rng(0)
    y = np.array([0] * 60 + [1] * 40)
    scores = rng.normal(size=100) + y * 0.8
    auc, low, high = auc_interval(scores, y)
    assert auc == pytest.approx(roc_auc_score(y, scores))
    assert low < auc < high and high - low < 0.4
    assert auc_interval(np.arange(10.0), np.array([0] * 5 + [1] * 5)) == (1.0, 1.0, 1.0)
    assert auc_interval(np.zeros(10), np.array([0] * 5 + [1] * 5))[0] == 0.5


def test_origins_are_read_from_what_each_stage_writes():
    rec = Record(id="x", task_type="t", task="t", query="q", positive="p")
    assert negative_origin(Negative("n")) == LLM
    assert negative_origin(Negative("n", source="mined")) == CORPUS
    assert negative_origin(Negative("n", source="sampled")) == CORPUS
    assert negative_origin(Negative("n", doc_id="d1")) == CORPUS
    assert negative_origin(Negative("n", source="plugin")) == UNKNOWN
    assert positive_origin(rec) == UNKNOWN
    rec.meta = {"template": "generate/short-long.j2"}
    assert positive_origin(rec) == LLM
    rec.meta = {"template": "generate/short-long.j2", "pair": {"line": 3}}  # generate --from-pairs
    assert positive_origin(rec) == CORPUS
    rec.meta, rec.positive_id = {"template": "generate/from-corpus.j2"}, "doc#0"  # generate --from-corpus
    assert positive_origin(rec) == CORPUS
    rec.meta, rec.positive_id = {"source": "beir"}, None  # curate mine
    assert positive_origin(rec) == CORPUS


def test_a_closing_phrase_planted_in_llm_negatives_is_found_and_named():
    closing = planted.closing()
    audit = run_audit(closing, CHARS)
    row = _row(audit, "llm_vs_corpus")
    assert row["char_auc"] >= 0.9, row
    assert row["n_a"] == len(closing) and row["n_b"] == 3 * len(closing)
    assert "llm" in row["side_b"] and "corpus" in row["side_a"]
    # every positive is corpus text and every negative LLM-written: the two comparisons are one
    assert _row(audit, "positive_vs_negative")["same_as"] == "llm_vs_corpus"
    phrase = next(p for p in audit["phrases"] if p["comparison"] == "llm_vs_corpus" and p["level"] == "all")
    assert (phrase["where"], phrase["phrase"], phrase["share"], phrase["other_side_share"]) == \
           ("closing", "hope this helps", 1.0, 0.0)
    grams = next(f for f in audit["features"] if f["comparison"] == "llm_vs_corpus" and f["level"] == "all")
    assert any(g.strip() and g.strip() in "I hope this helps!" for g in grams["toward_b"][:4]), grams
    assert len(audit["warnings"]) == 1
    assert "LLM-written negatives against corpus text" in audit["warnings"][0]
    assert "'hope this helps'" in audit["warnings"][0] and "`shortcut`" in audit["warnings"][0]
    for level in (1, 2, 3):  # per level, and levels told from each other: nothing but chance
        assert _row(audit, "llm_vs_corpus", level)["char_auc"] >= 0.85
        assert 0.35 < _row(audit, "level_vs_rest", level)["char_auc"] < 0.65


def test_a_length_gap_is_found_in_both_views_and_named(teacher):
    audit = run_audit(planted.short(), AuditOptions(sample=60), teacher=teacher)
    row = _row(audit, "llm_vs_corpus")
    assert row["char_auc"] >= 0.95 and row["embedding_auc"] >= 0.9, row
    assert row["length_auc"] < 0.05 and row["words_b"] == 20.0
    assert "length alone gives" in audit["warnings"][0]


def test_corpus_text_against_corpus_text_sits_near_a_half(teacher):
    control = planted.control()
    audit = run_audit(control, AuditOptions(sample=80), teacher=teacher)
    assert [r["comparison"] for r in audit["comparisons"]] == ["positive_vs_negative"] * 4 + ["level_vs_rest"] * 3
    row = _row(audit, "positive_vs_negative")
    assert "corpus" in row["side_a"] and "corpus" in row["side_b"] and "llm" not in row["side_b"]
    for key in ("char", "embedding"):
        assert 0.35 < row[f"{key}_auc"] < 0.65, row
        low, high = row[f"{key}_interval"]
        assert low < 0.5 < high or abs(row[f"{key}_auc"] - 0.5) < 0.1
    assert audit["warnings"] == []
    assert "embeddings: sentence-transformers/all-MiniLM-L6-v2" in audit["settings"]["views"]
    assert run_audit(control, CHARS) == run_audit(control, CHARS)  # seeded: the same audit every time


def test_comparisons_with_too_few_texts_are_skipped_and_said():
    audit = run_audit(planted.closing()[:3], CHARS)
    assert audit["comparisons"] == [] and audit["warnings"] == []
    assert {s["comparison"] for s in audit["skipped"]} == {"llm_vs_corpus", "positive_vs_negative", "level_vs_rest"}
    assert all(s["why"] == "fewer than 10 distinct texts on a side" for s in audit["skipped"])
    assert summary_lines(audit)[0].startswith("  audit: too few texts to test for shortcuts")


def test_families_are_audited_apart_and_together():
    other = planted.make_records(planted.passages()[500:], lambda t, k: (t, "mined"), n=40, family="long-short")
    audit = run_audit([*planted.closing(), *other], CHARS)
    fams = {(r["comparison"], r["family"]) for r in audit["comparisons"] if r["level"] == "all"}
    assert {("llm_vs_corpus", "all"), ("llm_vs_corpus", "short-long"), ("positive_vs_negative", "long-short"),
            ("positive_vs_negative", "all")} <= fams
    assert _row(audit, "llm_vs_corpus")["char_auc"] >= 0.85
    control_row = next(r for r in audit["comparisons"]
                       if (r["comparison"], r["family"], r["level"]) == ("positive_vs_negative", "long-short", "all"))
    assert control_row["char_auc"] < 0.7
    assert [w.split(":")[0] for w in audit["warnings"]] == ["all", "all", "short-long"]
