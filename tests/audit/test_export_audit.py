"""The audit inside ``curate export``: its section in the report and on the card, the warning
line the summary prints when a probe separates LLM negatives, and ``--no-audit``."""

from __future__ import annotations

import json

import pytest

from curate.export.main import ExportOptions, run_export, summary
from tests.audit import planted
from tests.helpers import run_curate
from tests.mine_helpers import write_jsonl


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("export-audit")
    return {"tmp": tmp,
            "closing": write_jsonl(tmp / "gen" / "generated.jsonl", (r.to_dict() for r in planted.closing())),
            "control": write_jsonl(tmp / "mined" / "mined.jsonl", (r.to_dict() for r in planted.control()))}


def test_the_cli_prints_a_warning_and_the_card_states_the_figures(files):
    out = files["tmp"] / "cli"
    proc = run_curate("export", "--in", str(files["closing"]), "--out", str(out), "--format", "hf",
                      "--no-audit-embeddings")
    assert proc.returncode == 0, proc.stderr
    printed = proc.stdout + proc.stderr
    warning = next(line for line in printed.splitlines() if line.strip().startswith("warning:"))
    assert "LLM-written negatives against corpus text" in warning and "AUC" in warning
    assert "curate mine" in warning and "`shortcut`" in warning and "rebalance" in warning
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    audit = report["audit"]
    row = next(r for r in audit["comparisons"] if (r["comparison"], r["level"]) == ("llm_vs_corpus", "all"))
    assert row["char_auc"] >= 0.9 and "embedding_auc" not in row
    assert audit["settings"]["views"] == ["char n-grams"] and report["timings"]["audit"] >= 0
    assert report["parameters"]["audit"] is True and report["parameters"]["audit_embeddings"] is False
    card = (out / "README.md").read_text(encoding="utf-8")
    section = card.split("## Audit", 1)[1].split("\n## ", 1)[0]
    assert "| llm_vs_corpus | short-long | all |" in section and f"| {row['char_auc']} |" in section
    assert "hope this helps" in section and warning.strip()[len("warning: "):] in section
    assert "seconds" not in section  # the card is the same for the same data; the time is in report.json


def test_mined_records_export_without_a_warning(files, teacher, monkeypatch):
    monkeypatch.setattr("curate.audit.compare.bundled_teacher", lambda: teacher)
    report = run_export(ExportOptions(inputs=(str(files["control"]),), out=str(files["tmp"] / "mined-out"),
                                      formats=("hf",), audit_sample=80))
    audit = report["audit"]
    row = next(r for r in audit["comparisons"] if (r["comparison"], r["level"]) == ("positive_vs_negative", "all"))
    assert row["char_auc"] < 0.65 and row["embedding_auc"] < 0.65, row
    assert audit["warnings"] == []
    lines = summary(report, files["tmp"] / "mined-out")
    assert any(line.startswith("  audit: ") for line in lines)
    assert not any("warning:" in line for line in lines)


def test_no_audit_leaves_report_and_card_without_it(files):
    out = files["tmp"] / "off"
    report = run_export(ExportOptions(inputs=(str(files["closing"]),), out=str(out), formats=("hf",), audit=False))
    assert "audit" not in report and "audit" not in json.loads((out / "report.json").read_text())
    assert "## Audit" not in (out / "README.md").read_text(encoding="utf-8")
    assert not any("warning:" in line for line in summary(report, out))
