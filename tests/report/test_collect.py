"""`curate report` on the demo run and its stage folders, without a browser: what the page says,
where its numbers come from, the sample, and that records cannot break out of the page."""

from __future__ import annotations

import json
import re
import shutil
import struct
import zlib
from pathlib import Path

import pytest

from curate.core.errors import CurateError
from curate.report.collect import collect
from curate.report.page import render
from curate.report.sample import records_by_id, sample_lines
from tests.helpers import assert_one_line_error, read_jsonl, run_curate


def _page_data(html: str) -> dict:
    start = html.index('<script type="application/json" id="curate-data">') + len(
        '<script type="application/json" id="curate-data">')
    def strict(name):
        raise ValueError(f"{name} is not JSON a browser reads")
    return json.loads(html[start:html.index("</script>", start)], parse_constant=strict)


def test_a_pipeline_runs_page_holds_its_funnel_records_and_drops(demo):
    out = demo["out"]
    data = collect(out)
    funnel = json.loads((out / "pipeline.json").read_text())
    assert data["kind"] == "pipeline" and [r["stage"] for r in data["funnel"]] == ["generate", "filter", "holdout", "mine", "export"]
    filt = next(r for r in data["funnel"] if r["stage"] == "filter")
    assert [s["step"] for s in filt["steps"]] == [s["step"] for s in funnel["filter"]["steps"]]
    assert filt["dropped"] == {k: v for s in funnel["filter"]["steps"] for k, v in s["records_dropped"].items()}
    kept, drops = read_jsonl(out / "mine" / "mined.jsonl"), read_jsonl(out / "filter" / "rejected.jsonl")
    assert data["sample"]["kept_total"] == len(kept) and data["sample"]["dropped_total"] == len(drops)
    rows = data["records"]
    assert [r["id"] for r in rows if r["status"] == "kept"] == [r["id"] for r in kept]
    generated = {r["id"]: r for r in read_jsonl(out / "generate" / "generated.jsonl")}
    for row in (r for r in rows if r["status"] == "dropped"):  # each drop beside the record it dropped
        assert row["query"] == generated[row["id"]]["query"] and row["reason"] and row["step"]
    for row, rec in zip((r for r in rows if r["status"] == "kept"), kept):  # each mined negative's search rank
        assert [n["rank"] for n in row["negatives"]] == [n["mine_rank"] for n in rec["negatives"]]
        assert all(isinstance(n["rank"], int) for n in row["negatives"])
    costs = {c["stage"]: c for c in data["costs"]}
    gen = json.loads((out / "generate" / "report.json").read_text())["families"]["from-corpus"]
    assert costs["generate"]["requests"] == gen["requests_sent"] > 0
    assert costs["generate"]["prompt"] == gen["tokens"]["prompt"]
    assert costs["filter"]["seconds"] == json.loads((out / "filter" / "run.json").read_text())["seconds"]
    titles = {c["title"] for c in data["charts"]}
    assert {"teacher scores", "margins", "positive ranks"} <= titles
    split = funnel["export"]["formats"]["sentence-transformers"]
    assert [d["stage"] for d in data["details"]] == ["mine", "export"], "each stage's own table, drawn from its report"
    details = {d["stage"]: dict(d["rows"]) for d in data["details"]}
    assert details["export"]["rows"] == f"train {split['train']}, dev {split['dev']}"
    # where the kept negatives rank, as mine's summary says it (issue 52: easy negatives made visible)
    ranks = json.loads((out / "mine" / "report.json").read_text())["negative_ranks"]
    assert details["mine"]["negatives' ranks"].startswith(f"kept negatives rank {ranks['min']}-{ranks['max']} ")


@pytest.mark.parametrize("stage", ["generate", "filter", "mine", "export"])
def test_a_single_stage_folder_has_a_page_too(demo, demo_filter_with_a_copy, stage, tmp_path):
    out = demo["out"]
    folder = demo_filter_with_a_copy["out"] if stage == "filter" else out / stage  # a filter run with a drop
    page = tmp_path / f"{stage}.html"
    proc = run_curate("report", str(folder), "--out", str(page))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"report: {page}"
    data = _page_data(page.read_text(encoding="utf-8"))
    assert data["kind"] == stage and data["funnel"][0]["stage"] == stage
    if stage == "filter":  # its drops are joined with the records it read (its report names them)
        drops = [r for r in data["records"] if r["status"] == "dropped"]
        assert all(r["query"] for r in drops)
        copied = demo_filter_with_a_copy["copied"]
        assert any(r["id"] == copied["id"] and r["query"] == copied["query"] for r in drops)
        assert len([r for r in data["records"] if r["status"] == "kept"]) == len(read_jsonl(folder / "filtered.jsonl"))
    if stage == "export":
        assert dict(data["details"][-1]["rows"])["formats"] == "sentence-transformers" and data["records"] == []


def test_the_sample_is_seeded_and_the_counts_stay_exact(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps({"id": f"r{i}", "query": f"q {i}"}) + "\n" for i in range(1000)))
    total, picked = sample_lines([path], 50, seed=3)
    again = sample_lines([path], 50, seed=3)[1]
    other = sample_lines([path], 50, seed=4)[1]
    ids = [obj["id"] for _, obj in picked]
    assert total == 1000 and len(ids) == 50 == len(set(ids))
    assert ids == [obj["id"] for _, obj in again] != [obj["id"] for _, obj in other]
    assert ids == sorted(ids, key=lambda s: int(s[1:]))  # in file order
    assert records_by_id(path, {"r7", "r999", "nope"}) == {"r7": {"id": "r7", "query": "q 7"},
                                                           "r999": {"id": "r999", "query": "q 999"}}


def test_a_small_sample_is_said_on_the_page(demo):
    html = render(collect(demo["out"], sample=2, seed=1))
    data = _page_data(html)
    assert data["sample"]["kept_shown"] == 2 and data["sample"]["kept_total"] > 2
    assert len(data["records"]) == 2 + min(2, data["sample"]["dropped_total"])
    assert f"A sample: 2 of {data['sample']['kept_total']} kept records" in html


def test_model_text_stays_text_on_the_page(demo, tmp_path):
    """A query that holds markup cannot end the data block or add an element."""
    run = tmp_path / "run"
    shutil.copytree(demo["out"], run)
    mined = run / "mine" / "mined.jsonl"
    rows = read_jsonl(mined)
    evil = "</script><script>document.title='pwned'</script><!-- <img src=x onerror=alert(1)>"
    rows[0]["query"] = evil
    rows[0]["negatives"][0]["teacher_score"] = float("nan")  # the browser's JSON.parse refuses NaN
    mined.write_text("".join(json.dumps(r) + "\n" for r in rows))
    html = render(collect(run))
    assert html.count("</script>") == 2 and "<img src=x" not in html and "<!--" not in html
    assert _page_data(html)["records"][0]["query"] == evil  # the same text, shown as text by the script
    assert _page_data(html)["records"][0]["negatives"][0]["teacher_score"] is None


def test_judge_scores_and_ranks_are_charted():
    from curate.report.collect import _charts

    def row(status, rank=None, judges=None):
        return {"status": status, "negatives": [], "teacher": {"positive": 0.8, "margin": 0.1, "positive_rank": rank},
                "detail": {"rank": 40} if status == "dropped" else None, "judges": judges}

    rows = [row("kept", 1, {"query_quality": {"clarity": 4, "specificity": 2}}), row("kept", 3, {"query_quality": "error"}),
            row("dropped")]
    charts = {c["title"]: c for c in _charts(rows)}
    ranks = {b["label"]: b["count"] for b in charts["positive ranks"]["series"][0]["bins"]}
    assert ranks == {"1": 1, "2-3": 1, "4-10": 0, "11-100": 1, ">100": 0}  # the drop's rank counts too
    clarity = charts["judge: query_quality clarity"]["series"][0]["bins"]
    assert sum(b["count"] for b in clarity) == 1 and "judge: query_quality specificity" in charts


def test_the_score_charts_series_share_one_axis():
    """Positives and negatives are binned over one range (the report drew positives 0.57-0.86 and
    negatives 0.00-0.34 over ranges of their own, on one axis, so they looked overlapping)."""
    rows = [{"status": "kept", "teacher": {"positive": p, "margin": None, "positive_rank": None}, "judges": None,
             "detail": None, "negatives": [{"teacher_score": n} for n in negs]}
            for p, negs in ((0.574, [-0.003, 0.2]), (0.857, [0.337, 0.1]), (0.7, [0.05]))]
    from curate.report.collect import _charts

    chart = {c["title"]: c for c in _charts(rows)}["teacher scores"]
    assert chart["range"] == [-0.003, 0.857]
    positive, negative = (s["bins"] for s in chart["series"])
    assert [(b["lo"], b["hi"]) for b in positive] == [(b["lo"], b["hi"]) for b in negative]
    assert positive[0]["lo"] == -0.003 and positive[-1]["hi"] == pytest.approx(0.857)
    assert sum(b["count"] for b in positive) == 3 and sum(b["count"] for b in negative) == 5
    # every positive lies in a bin above every negative's: separated scores are drawn apart
    last_negative = max(i for i, b in enumerate(negative) if b["count"])
    assert min(i for i, b in enumerate(positive) if b["count"]) > last_negative
    for b in positive + negative:
        assert b["count"] == 0 or any(b["lo"] <= v <= b["hi"] for v in (0.574, 0.857, 0.7, -0.003, 0.2, 0.337, 0.1, 0.05))


def _png(path: Path) -> None:
    """A 1x1 PNG, written by hand (the ablate report embeds its plot)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b""))


def test_an_ablate_runs_page_has_its_table_and_plot(tmp_path):
    _png(tmp_path / "ablate.png")
    summary = [{"arm": "base", "kind": "base", "seeds": [0], "values": [0.647], "mean": 0.647, "std": 0.0,
                "vs_base": 0.0, "vs_best_baseline": None, "train_s": None},
               {"arm": "default", "kind": "curate", "seeds": [0, 1], "values": [0.66, 0.67], "mean": 0.665,
                "std": 0.005, "vs_base": 0.018, "vs_best_baseline": None, "train_s": 12.0}]
    (tmp_path / "ablate_report.json").write_text(json.dumps(
        {"title": "scifact train -> scifact test", "metric": "ndcg@10", "summary": summary, "chart": "ablate.png"}))
    html = render(collect(tmp_path))
    assert "Ablation: scifact train -&gt; scifact test" in html
    assert "<td>default</td><td>curate</td><td class=\"num\">0.6650</td>" in html and "+0.0180" in html
    assert 'src="data:image/png;base64,iVBORw0KGgo' in html
    assert 'id="mixed-precision"' not in html, "a report without precisions (before they were kept) warns of nothing"


def test_an_ablate_table_scored_at_two_precisions_says_so_on_its_page(tmp_path):
    """eval's auto precision is bf16 on one CPU and int8 on another: a table holding both (results
    carried over from an older report) must say which runs."""
    from curate.flows.ablate.report import mixed_precision_warning, precisions

    runs = {"base": [{"seed": 0, "precision": "int8"}],
            "default": [{"seed": 0, "precision": "bf16"}, {"seed": 1, "precision": "bf16"}]}
    found = precisions(runs)
    assert found == {"int8": ["base seed 0"], "bf16": ["default seed 0", "default seed 1"]}
    warning = mixed_precision_warning(found)
    assert "int8: base seed 0" in warning and "bf16: default seed 0, default seed 1" in warning
    assert mixed_precision_warning(precisions({"base": [{"seed": 0, "precision": "bf16"}]})) is None
    (tmp_path / "ablate_report.json").write_text(json.dumps(
        {"title": "t", "metric": "ndcg@10", "summary": [], "chart": None, "precisions": found}))
    html = render(collect(tmp_path))
    assert 'id="mixed-precision"' in html and "int8: base seed 0" in html


def test_a_folder_that_is_no_run_is_one_line(tmp_path):
    with pytest.raises(CurateError, match="not a run folder"):
        collect(tmp_path)
    assert_one_line_error(run_curate("report", str(tmp_path)), str(tmp_path), "not a run folder")
    assert not (tmp_path / "report.html").exists()


def test_curate_train_on_the_demo_is_part_of_its_page_until_the_export_changes(demo, tmp_path):
    """`curate pipeline data/demo` then `curate train` (the README's two commands): the page shows
    the training after the pipeline's stages, scored on the held-out documents; once the export is
    written again, that training is an earlier run's."""
    import os

    out = tmp_path / "demo"
    shutil.copytree(demo["out"], out)
    held = json.loads((out / "holdout" / "report.json").read_text())
    assert held["eval_queries"] > 0, f"the demo's generation held nothing out: {held['documents_with_queries']} " \
        f"documents kept a query, {held['min_documents']} are needed (the bundled LLM's queries vary from run to run)"
    proc = run_curate("train", str(out), "--steps", "2", env={"CURATE_CACHE_DIR": str(demo["tmp"] / "cache")})
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"NDCG@10 \d\.\d{4} -> \d\.\d{4} \([+-]\d\.\d{4}\) on .*holdout/eval, \d+ queries", proc.stderr)
    data = collect(out)
    assert [r["stage"] for r in data["funnel"]][-2:] == ["export", "train"] and data["earlier"] == []
    cells = {c["label"]: c["value"] for c in data["funnel"][-1]["cells"]}
    report = json.loads((out / "train" / "report.json").read_text())
    assert cells["NDCG@10 before"] == report["evaluations"][0]["before"]["ndcg@10"]
    later = (out / "train" / "report.json").stat().st_mtime_ns + 10**9
    os.utime(out / "export" / "report.json", ns=(later, later))  # the export written again after it
    data = collect(out)
    assert "train" not in [r["stage"] for r in data["funnel"]] and data["earlier"] == ["train"]
