"""`curate pipeline DOCS --out RUN`: generate --from-corpus, filter, mine, [relabel,] export in one go.

One run over 40 SciFact abstracts (a corpus JSONL cut into a temporary folder) against the
scripted server is shared by the tests; the re-run, resume and relabel tests work on copies of
its run folder, so each reruns only the stages it means to. The scripted model writes a query
from the passage's long words; for one passage in four it copies a stretch of the passage, which
the recipe's heuristics drop, so the funnel has drops with reasons to show.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.fake_llm_server import fake_llm_server
from tests.helpers import REPO, SHARED_DATA, assert_one_line_error, read_jsonl, run_curate

N = 20
STAGES = ("generate", "filter", "holdout", "mine", "export")
REPORTS = {s: "report.json" for s in ("generate", "filter", "holdout", "mine", "relabel", "export")}  # one name for every stage
OFFLINE = "http://127.0.0.1:9/v1"  # nothing listens: a request would fail the run


def answer(body: dict) -> dict:
    """The scripted model: a query for a passage, or a verdict on a mined negative."""
    prompt = body["messages"][-1]["content"]
    if "Candidate document:" in prompt:  # relabel: candidates that mention cells are relevant
        candidate = prompt.split("Candidate document:", 1)[1].split("Choose one verdict", 1)[0]
        return {"reason": "scripted", "verdict": "relevant" if " cell" in candidate else "not_relevant"}
    words = prompt.split("Passage:", 1)[1].split("Write one query", 1)[0].split()
    if len(words) % 4 == 0:
        return {"query": " ".join(words[3:15])}  # a copy of the passage: the heuristics drop it
    long = [w.strip(".,;:()").lower() for w in words if len(w) > 6][:5]
    return {"query": "what is known about " + " ".join(reversed(long))}


def _env(tmp: Path) -> dict[str, str]:
    return {"CURATE_CACHE_DIR": str(tmp / "embed-cache"), "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200",
            "CURATE_DEBUG": ""}


def _pipeline(srv, docs: Path, out: Path, *extra: str):
    proc = run_curate("pipeline", str(docs), "--out", str(out), "-n", str(N), "--base-url", srv.base_url,
                      "--model", "fake", "--max-retries", "0", "--max-reasks", "0", "--backoff-base", "0",
                      *extra, env=_env(out.parent), timeout=900)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    assert proc.returncode == 0, proc.stderr
    return proc


def _report(run: Path, stage: str) -> dict:
    return json.loads((run / stage / REPORTS[stage]).read_text())


def _rows(run: Path) -> list[dict]:
    """The rows of the sentence-transformers export (Parquet), train and dev, in file order."""
    files = sorted((run / "export").rglob("*.parquet"))
    assert files, "the export wrote rows"
    return [row for f in files for row in pq.read_table(f).to_pylist()]


def _mtimes(run: Path) -> dict[str, int]:
    return {str(p.relative_to(run)): p.stat().st_mtime_ns for stage in ("generate", "filter", "holdout", "mine",
                                                                        "relabel", "export")
            for p in (run / stage).rglob("*") if p.is_file() and ".cache" not in p.parts
            and p.name != ".curate.lock"}


@pytest.fixture(scope="module")
def first(tmp_path_factory):
    """One pipeline run over 40 abstracts, and the scripted server (kept up for the other tests)."""
    tmp = tmp_path_factory.mktemp("pipeline")
    docs = tmp / "abstracts.jsonl"
    with open(SHARED_DATA / "scifact" / "corpus.jsonl", encoding="utf-8") as fh:
        docs.write_text("".join(line for _, line in zip(range(40), fh)), encoding="utf-8")
    with fake_llm_server(responder=answer) as srv:
        proc = _pipeline(srv, docs, tmp / "run")
        yield {"tmp": tmp, "docs": docs, "run": tmp / "run", "proc": proc, "srv": srv,
               "sent": len(srv.chat_requests)}


def test_every_stage_writes_its_outputs_and_prints_the_funnel(first):
    run, out = first["run"], first["proc"].stderr + first["proc"].stdout
    assert first["sent"] == N, "one request per sampled passage: 20 of 40, so a copy is not asked for again"
    for stage, names in {"generate": ["generated.jsonl", "corpus.jsonl", "report.json"],
                         "filter": ["filtered.jsonl", "rejected.jsonl", "report.json", "teacher_scores.png"],
                         "mine": ["mined.jsonl", "report.json", "mine_scores.png"],
                         "export": ["report.json"]}.items():
        for name in names:
            assert (run / stage / name).is_file(), f"{stage}/{name}"
    assert not (run / "relabel").exists(), "relabel is off by default"
    assert (run / ".cache" / "llm.sqlite").is_file(), "the LLM cache lives in RUN, for every stage"

    generated = read_jsonl(run / "generate" / "generated.jsonl")
    flt, mine, export = _report(run, "filter"), _report(run, "mine"), _report(run, "export")
    assert len(generated) == N and flt["records_in"] == N
    passages = sum(1 for _ in open(run / "generate" / "corpus.jsonl", encoding="utf-8"))
    assert f"40 documents from 1 file, {passages} passages cut" in out
    assert f"{N} passages sampled, {N} queries written, 0 failed" in out
    assert f"{flt['records_kept']} of {N} records kept" in out
    rejected = read_jsonl(run / "filter" / "rejected.jsonl")
    queries = {r["id"]: r["query"] for r in generated}
    dropped_somewhere = False
    for step in flt["steps"]:
        line = re.search(rf"^\s+{step['step']}: (\d+) of (\d+) kept(.*)$", out, re.M)
        assert line, f"a funnel line for {step['step']}"
        assert (int(line[1]), int(line[2])) == (step["records_kept"], step["records_in"])
        if step["records_dropped"]:
            dropped_somewhere = True
            first_drop = next(r for r in rejected if r["step"] == step["step"])
            assert f"{sum(step['records_dropped'].values())} dropped" in line[3]
            assert f"e.g. {first_drop['reason']}: \"{queries[first_drop['id']][:20]}" in line[3], line[3]
    assert dropped_somewhere, "the scripted copies were dropped"
    assert flt["steps"][0]["records_dropped"].get("query-word-for-word-in-document"), "the heuristics dropped the copies"
    assert (f"{mine['queries_out']} of {mine['queries_in']} records mined, {mine['negatives']} negatives "
            f"({mine['negatives_per_query']['mean']:.2f} per record)") in out
    held = _report(run, "holdout")
    assert held["records_in"] == flt["records_kept"] and held["documents_held_out"] >= 1
    assert mine["queries_in"] == held["records_kept"] == flt["records_kept"] - held["eval_queries"] - held["dropped"]
    n = held['eval_queries']
    assert f"{n} quer{'y' if n == 1 else 'ies'} in {run / 'holdout' / 'eval'}" in out
    c = export["counts"]
    rows = rf"sentence-transformers: {c.get('train', 0)} train rows?, {c.get('dev', 0)} dev rows?$"
    assert re.search(rows, out, re.M)
    assert len(_rows(run)) == c.get("train", 0) + c.get("dev", 0)
    assert "relabel   off" in out
    assert str(run / "export") in out and str(run / "pipeline.json") in out
    assert str(run / "mine" / "mine_scores.png") in out, "where the plots are"
    assert re.search(rf"^\s+report\s+{re.escape(str(run / 'report.html'))}$", out, re.M), "the page, by default"
    assert (run / "report.html").is_file()

    funnel = json.loads((run / "pipeline.json").read_text())
    assert funnel["stages"] == {s: "ran" for s in STAGES}
    assert funnel["generate"] == {"sampled": N, "ok": N, "failed": 0, "failure_reasons": {},
                                  "copies_asked_again": 0, "copies_left": 0}
    assert funnel["filter"]["records_kept"] == flt["records_kept"]
    assert [(s["step"], s["records_in"], s["records_kept"], s["records_dropped"]) for s in funnel["filter"]["steps"]] \
        == [(s["step"], s["records_in"], s["records_kept"], s["records_dropped"]) for s in flt["steps"]]
    assert funnel["mine"]["records"] == mine["queries_out"] and funnel["mine"]["negatives"] == mine["negatives"]
    assert funnel["relabel"] is None
    assert funnel["export"]["formats"]["sentence-transformers"]["train"] == c.get("train", 0)
    assert funnel["export"]["rows"] == len(_rows(run))


def test_the_held_out_documents_reach_no_training_row(first):
    """A fifth of the documents with queries is set aside before mining: their queries and passages
    are a BEIR folder, and none of their passages is a positive or a mined negative of training."""
    run = first["run"]
    held = _report(run, "holdout")
    docs = set(held["held_out"])
    passages = [json.loads(line) for line in open(run / "generate" / "corpus.jsonl", encoding="utf-8")]
    barred = {p["_id"] for p in passages if p["_id"].rsplit("#", 1)[0] in docs or p.get("source") in docs}
    barred_text = {p["text"] for p in passages if p["_id"] in barred}
    assert barred, "some passages are held out"
    for rec in read_jsonl(run / "mine" / "mined.jsonl"):
        ids = {rec["positive_id"], *(p["doc_id"] for p in rec["positives"]), *(n["doc_id"] for n in rec["negatives"])}
        assert not ids & barred, rec["id"]
    for row in _rows(run):
        texts = {v for k, v in row.items() if k == "positive" or k.startswith("negative")}
        assert not any(t in texts for t in barred_text)
    ev = run / "holdout" / "eval"
    qrels = [line.split("\t") for line in (ev / "qrels" / "test.tsv").read_text().splitlines()[1:]]
    assert len({q for q, _, _ in qrels}) == held["eval_queries"] > 0 and {d for _, d, _ in qrels} <= barred
    assert sum(1 for _ in open(ev / "corpus.jsonl")) == len(passages), "every passage competes in the eval"
    # the export's card counts the held-out set, which export also checked training queries against
    step = next(f for f in _report(run, "export")["filters"] if f["step"] == "decontaminate")
    assert step["folder"] == "../holdout/eval:test" and step["eval_queries"] == held["eval_queries"]
    assert step["eval_documents"] == len({d for _, d, _ in qrels})
    assert "../holdout/eval:test" in (run / "export" / "README.md").read_text(encoding="utf-8")


def test_a_second_run_sends_nothing_and_rewrites_nothing(first):
    run = first["tmp"] / "again"
    shutil.copytree(first["run"], run)  # a moved run folder is still done: markers name no paths
    before = _mtimes(run)
    sent = len(first["srv"].chat_requests)
    proc = _pipeline(first["srv"], first["docs"], run)
    out = proc.stderr + proc.stdout
    assert len(first["srv"].chat_requests) == sent, "no new LLM request"
    assert _mtimes(run) == before, "no stage output rewritten"
    for stage in STAGES:
        assert f"{stage}: done earlier" in out
    assert "generate: model" not in out, "no model started"
    assert json.loads((run / "pipeline.json").read_text())["stages"] == {s: "done earlier" for s in STAGES}


def test_a_run_killed_while_mining_resumes_to_the_same_rows(first):
    run = first["tmp"] / "killed"
    shutil.copytree(first["run"], run)
    shutil.rmtree(run / "mine")
    shutil.rmtree(run / "export")
    staging = run / "mine" / ".curate-staging-99999"  # what a kill mid-mine leaves: a half-written stage
    staging.mkdir(parents=True)
    (staging / "mined.jsonl").write_text('{"id": "half', encoding="utf-8")
    sent = len(first["srv"].chat_requests)
    proc = _pipeline(first["srv"], first["docs"], run)
    out = proc.stderr + proc.stdout
    assert len(first["srv"].chat_requests) == sent
    assert "generate: done earlier" in out and "filter: done earlier" in out
    assert "mine: done earlier" not in out and "export: done earlier" not in out
    assert not staging.exists(), "the half-written stage was cleared"
    assert _rows(run) == _rows(first["run"]), "the same rows: none lost, none twice"
    assert read_jsonl(run / "mine" / "mined.jsonl") == read_jsonl(first["run"] / "mine" / "mined.jsonl")


def test_a_run_killed_while_generating_resumes_without_asking_again(first):
    run = first["tmp"] / "killed-early"
    shutil.copytree(first["run"], run)
    for stage in ("filter", "mine", "export"):
        shutil.rmtree(run / stage)
    for name in ("report.json", ".curate-done.json"):  # a killed generate writes no report
        (run / "generate" / name).unlink()
    lines = (run / "generate" / "generated.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (run / "generate" / "generated.jsonl").write_text("".join(lines[:N // 2]) + lines[N // 2][:40], encoding="utf-8")
    sent = len(first["srv"].chat_requests)
    proc = _pipeline(first["srv"], first["docs"], run)
    out = proc.stderr + proc.stdout
    assert len(first["srv"].chat_requests) == sent, "the lost answers came from RUN/.cache"
    assert not any(f"{s}: done earlier" in out for s in STAGES)
    ids = [r["id"] for r in read_jsonl(run / "generate" / "generated.jsonl")]
    assert len(ids) == len(set(ids)) == N, "the half line was dropped, no record twice"
    assert set(ids) == {r["id"] for r in read_jsonl(first["run"] / "generate" / "generated.jsonl")}
    assert _report(run, "filter")["records_in"] == N and _rows(run)


def test_a_changed_option_reruns_only_the_stages_it_reaches(first):
    run = first["tmp"] / "formats"
    shutil.copytree(first["run"], run)
    proc = _pipeline(first["srv"], first["docs"], run, "--format", "sentence-transformers", "--format", "hf",
                     "--license", "cc-by-4.0")
    out = proc.stderr + proc.stdout
    assert all(f"{s}: done earlier" in out for s in ("generate", "filter", "mine"))
    assert "export: done earlier" not in out
    formats = _report(run, "export")["outputs"]
    assert set(formats) == {"sentence-transformers", "hf"}
    train = _report(run, "export")["counts"]["train"]
    assert f"hf: {train} train rows" in out and f"sentence-transformers: {train} train rows" in out
    assert _report(run, "export")["hub"]["license"] == "cc-by-4.0"  # the documents' licence, on the card


def test_a_rerun_that_stops_early_never_shows_the_earlier_runs_later_stages_as_its_own(first):
    from curate.report.collect import collect

    run = first["tmp"] / "stops-early"
    shutil.copytree(first["run"], run)
    drop_all = first["tmp"] / "drop-all.yaml"  # every query too short: filter keeps nothing
    drop_all.write_text("steps:\n  - heuristics: {min_chars: {query: 100000}}\n", encoding="utf-8")
    proc = run_curate("pipeline", str(first["docs"]), "--out", str(run), "-n", str(N), "--base-url",
                      first["srv"].base_url, "--model", "fake", "--recipe", str(drop_all), env=_env(run.parent),
                      timeout=900)
    assert proc.returncode == 2 and "filter left no record for holdout" in proc.stderr
    assert (run / "mine" / "mined.jsonl").is_file(), "the earlier run's folders are left as they were"
    funnel = json.loads((run / "pipeline.json").read_text())
    assert set(funnel["stages"]) == {"generate", "filter"} and funnel["mine"] is None and funnel["export"] is None
    data = collect(run)
    assert [row["stage"] for row in data["funnel"]] == ["generate", "filter"], "mine and export are not this run's"
    assert data["earlier"] == ["holdout", "mine", "export"] and data["details"] == [], "no export table of an earlier run"
    assert {r["stage"] for r in data["records"]} <= {"generate", "filter"}
    page = run_curate("report", str(run), env=_env(run.parent))
    assert page.returncode == 0, page.stderr
    assert "Not part of this run: holdout, mine, export" in (run / "report.html").read_text(encoding="utf-8")


def test_report_on_a_pipeline_killed_while_mining_shows_what_is_there_and_what_is_missing(first):
    run = first["tmp"] / "killed-mining"
    shutil.copytree(first["run"], run)
    for name in ("pipeline.json", "report.html"):  # as on a first run: nothing of a finished one
        (run / name).unlink()
    script = (f"import os, sys; import curate.mine.main as m; m._mine = lambda *a, **k: os._exit(9); "
              f"sys.argv = ['curate', 'pipeline', {str(first['docs'])!r}, '--out', {str(run)!r}, '-n', '{N}', "
              f"'--base-url', {first['srv'].base_url!r}, '--model', 'fake', '--scores', 'teacher']; "
              "from curate.cli import cli; cli()")
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=900,
                          env={**os.environ, **_env(run.parent)})
    assert proc.returncode == 9, proc.stderr  # killed while mining
    page = run_curate("report", str(run), env=_env(run.parent))
    assert page.returncode == 0, page.stderr
    html = (run / "report.html").read_text(encoding="utf-8")
    assert "This run did not finish" in html and "no result yet from mine, export" in html
    assert "report: this run did not finish" in page.stderr and "no result yet from mine, export" in page.stderr
    from curate.report.collect import collect

    assert [row["stage"] for row in collect(run)["funnel"]] == ["generate", "filter", "holdout"]


def test_hybrid_scores_are_the_default_and_the_teachers_own_are_one_option_away(first):
    """The pipeline's mine mixes BM25 into the teacher's scores by default: the teacher's negatives,
    rescored, reach every exported row's ``label`` (positive first), and the card recommends
    distillation on them. ``--scores teacher`` reruns only mine and export, with the same negatives."""
    run = first["run"]
    weight = _report(run, "mine")["scores_from"]["weight"]
    mined = {r["query"]: r for r in read_jsonl(run / "mine" / "mined.jsonl")}
    rows = _rows(run)
    assert rows and all(len(r["label"]) == 1 + sum(c.startswith("negative_") for c in r) for r in rows)
    for row in rows:
        rec = next(r for q, r in mined.items() if row["anchor"].endswith(q))
        assert row["label"][0] == pytest.approx(rec["teacher"]["positive"])
        assert rec["teacher"]["model"].startswith(f"hybrid(bm25 {weight:g})")
    cards = [c.read_text(encoding="utf-8") for c in (run / "export").rglob("README.md")]
    assert any(f"BM25 mixed into sentence-transformers/all-MiniLM-L6-v2 at weight {weight}" in c
               and "recipe curate recommends" in c for c in cards)
    plain = first["tmp"] / "teacher-scores"
    shutil.copytree(run, plain)
    proc = _pipeline(first["srv"], first["docs"], plain, "--scores", "teacher")
    out = proc.stderr + proc.stdout
    assert all(f"{s}: done earlier" in out for s in ("generate", "filter"))
    assert not any(f"{s}: done earlier" in out for s in ("mine", "export"))
    again = {r["query"]: r for r in read_jsonl(plain / "mine" / "mined.jsonl")}
    assert {q: [n["text"] for n in r["negatives"]] for q, r in again.items()} == {
        q: [n["text"] for n in r["negatives"]] for q, r in mined.items()}
    assert _report(plain, "mine")["scores_from"] == {"kind": "teacher"}
    cards = [c.read_text(encoding="utf-8") for c in (plain / "export").rglob("README.md")]
    assert cards and not any("recipe curate recommends" in c for c in cards)  # the teacher's own cosines


def test_promote_top_reaches_mine_and_reruns_only_mine_and_export(first):
    """``--promote-top`` is mine's option, handed through: the same queries (generate and filter
    done earlier), mined again with the teacher's clear favourites promoted, the weight of BM25
    still chosen on the source passages, and exported again."""
    run = first["tmp"] / "promoted"
    shutil.copytree(first["run"], run)
    proc = _pipeline(first["srv"], first["docs"], run, "--promote-top", "0")
    out = proc.stderr + proc.stdout
    assert proc.returncode == 0, out
    assert all(f"{s}: done earlier" in out for s in ("generate", "filter"))
    assert not any(f"{s}: done earlier" in out for s in ("mine", "export"))
    report, before = _report(run, "mine"), _report(first["run"], "mine")
    promoted = report["positive_promoted"]
    assert promoted["margin"] == 0 and promoted["eligible"] == before["queries_out"]
    assert report["scores_from"] == before["scores_from"]
    mined = read_jsonl(run / "mine" / "mined.jsonl")
    moved = [r for r in mined if r["meta"]["mine"].get("promoted")]
    assert 0 < len(moved) == promoted["queries"]
    # a promoted record trains on its new positive, the source passage kept as a second one
    assert all(r["positive_id"] != r["meta"]["mine"]["promoted"]["source_id"]
               and r["positives"][0]["doc_id"] == r["meta"]["mine"]["promoted"]["source_id"] for r in moved)


def test_another_seed_starts_generate_afresh_and_never_mixes_two_runs_records(first):
    """The fingerprint covers every option that changes the data: another --seed samples other
    passages, and its records replace the last run's instead of joining them."""
    run = first["tmp"] / "reseeded"
    shutil.copytree(first["run"], run)
    before = {r["id"] for r in read_jsonl(first["run"] / "generate" / "generated.jsonl")}
    proc = _pipeline(first["srv"], first["docs"], run, "--seed", "1")
    out = proc.stderr + proc.stdout
    assert not any(f"{s}: done earlier" in out for s in STAGES), "every stage runs again"
    ids = [r["id"] for r in read_jsonl(run / "generate" / "generated.jsonl")]
    assert len(ids) == len(set(ids)) == N, "one run's records, not two"
    assert set(ids) != before
    assert _report(run, "filter")["records_in"] == N
    again = _pipeline(first["srv"], first["docs"], run, "--seed", "1")
    assert all(f"{s}: done earlier" in again.stderr + again.stdout for s in STAGES)


def test_relabel_adds_its_stage_and_its_verdicts(first):
    run = first["tmp"] / "relabel"
    shutil.copytree(first["run"], run)
    sent = len(first["srv"].chat_requests)
    proc = _pipeline(first["srv"], first["docs"], run, "--relabel")
    out = proc.stderr + proc.stdout
    mine = _report(run, "mine")
    assert len(first["srv"].chat_requests) - sent == mine["negatives"], "one verdict per mined negative"
    rep = _report(run, "relabel")
    (note,) = [s["notes"] for s in rep["steps"] if s["step"] == "relabel"]
    v = note["verdicts"]
    assert v["relevant"] > 0 and v["not_relevant"] > 0, "the scripted judge said both"
    verdicts = ", ".join(f"{k} {n}" for k, n in v.items())
    assert (f"{note['candidates']} negatives judged: {verdicts}; {rep['negatives_kept']} of {rep['negatives_in']} "
            f"negatives left, {note['records_changed']} records changed") in out
    funnel = json.loads((run / "pipeline.json").read_text())
    assert funnel["stages"]["relabel"] == "ran" and funnel["relabel"]["verdicts"] == v
    assert "export: done earlier" not in out, "the export now reads relabel's records"
    assert _report(run, "export")["sources"][0]["path"].endswith("relabel/filtered.jsonl")
    again = _pipeline(first["srv"], first["docs"], run, "--relabel")
    assert "relabel: done earlier" in again.stderr + again.stdout


def test_the_demo_documents_go_all_the_way(first, tmp_path):
    """What `make demo` runs (data/demo, 12 passages), with the scripted server for the bundled model."""
    out = tmp_path / "demo"
    sent = len(first["srv"].chat_requests)
    proc = run_curate("pipeline", "data/demo", "--out", str(out), "-n", "12", "--no-plots", "--no-report",
                      "--base-url", first["srv"].base_url, "--model", "fake", env=_env(first["tmp"]), timeout=900)
    assert proc.returncode == 0, proc.stderr
    funnel = json.loads((out / "pipeline.json").read_text())
    assert funnel["documents"]["files"] == funnel["generate"]["ok"] == 12
    # -n takes every passage, so a copy is asked for again twice (the scripted model copies the same
    # passages every time); with passages to spare (the shared run: 20 of 40) it is not
    asked_again = funnel["generate"]["copies_asked_again"]
    assert asked_again > 0 and len(first["srv"].chat_requests) - sent == 12 + 2 * asked_again
    assert funnel["export"]["rows"] > 0
    assert not list(out.rglob("*.png")), "--no-plots: none from filter or mine"
    assert not (out / "report.html").exists() and not re.search(r"^\s+report\s", proc.stderr, re.M), "--no-report"
    assert "curate pipeline data/demo --out runs/demo -n 12" in (REPO / "Makefile").read_text()


def test_multihop_queries_go_all_the_way_with_their_bundles(first, tmp_path):
    """--task from-corpus-multihop: a query over 2-3 related passages, each kept as a positive
    through filter and mine, none of them mined as a negative of its own query."""
    out = tmp_path / "hops"

    def hop(body):  # the scripted model joins words of every passage it is shown
        prompt = body["messages"][-1]["content"]
        parts = re.findall(r"Passage \d+:\n(.*?)\n", prompt)
        return {"query": "how do " + " and ".join(" ".join(p.split()[1:4]).lower() for p in parts) + " relate"}

    with fake_llm_server(responder=hop) as srv:
        proc = run_curate("pipeline", "data/demo", "--out", str(out), "-n", "6", "--no-plots", "--task",
                          "from-corpus-multihop", "--base-url",
                          srv.base_url, "--model", "fake", env=_env(first["tmp"]), timeout=900, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    generated = read_jsonl(out / "generate" / "generated.jsonl")
    assert len(generated) == 6 and all(2 <= len(r["meta"]["bundle"]) <= 3 for r in generated)
    mined = read_jsonl(out / "mine" / "mined.jsonl")
    assert mined and all(len(r["positives"]) == len(r["meta"]["bundle"]) - 1 for r in mined)
    for r in mined:
        assert {n["doc_id"] for n in r["negatives"]}.isdisjoint(r["meta"]["bundle"])
    assert json.loads((out / "pipeline.json").read_text())["export"]["rows"] > 0


def test_a_single_file_is_documents_too(first, tmp_path):
    doc = tmp_path / "notes.md"
    doc.write_text("\n\n".join((REPO / "data" / "demo" / name).read_text(encoding="utf-8").split("\n", 1)[1]
                               for name in ("tides.md", "volcanoes.md", "glaciers.md", "honeybees.md")))
    proc = run_curate("pipeline", str(doc), "--out", str(tmp_path / "run"), "-n", "3", "--no-plots",
                      "--base-url", first["srv"].base_url, "--model", "fake", env=_env(first["tmp"]), timeout=900)
    assert proc.returncode == 0, proc.stderr
    funnel = json.loads((tmp_path / "run" / "pipeline.json").read_text())
    assert funnel["documents"]["files"] == funnel["documents"]["documents"] == 1
    assert funnel["documents"]["passages"] >= 3 and funnel["generate"]["ok"] == 3


def test_a_filter_that_keeps_nothing_still_shows_the_funnel(tmp_path):
    docs = _folder(tmp_path, "docs", {f"{n}.md": (REPO / "data" / "demo" / f"{n}.md").read_text(encoding="utf-8")
                                      for n in ("tides", "vaccines", "lighthouses")})

    def copy(body):  # every query a stretch of its passage: the heuristics drop them all
        words = body["messages"][-1]["content"].split("Passage:", 1)[1].split()
        return {"query": " ".join(words[3:15])}

    with fake_llm_server(responder=copy) as srv:
        proc = run_curate("pipeline", str(docs), "--out", str(tmp_path / "run"), "--base-url", srv.base_url,
                          "--model", "fake", env=_env(tmp_path), timeout=900)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("curate: error: filter left no record for holdout") and "rejected.jsonl" in lines[-1]
    assert "3 passages sampled, 3 queries written, 0 failed" in proc.stderr
    assert re.search(r"heuristics: 0 of 3 kept, 3 dropped, e\.g\. query-word-for-word-in-document: ", proc.stderr)
    funnel = json.loads((tmp_path / "run" / "pipeline.json").read_text())
    assert funnel["filter"]["records_kept"] == 0 and funnel["mine"] is None and funnel["export"] is None
    assert funnel["stopped"] == lines[-1].removeprefix("curate: error: ")
    assert not (tmp_path / "run" / "mine").exists()


def _folder(tmp: Path, name: str, files: dict[str, str]) -> Path:
    (tmp / name).mkdir()
    for file, text in files.items():
        (tmp / name / file).write_text(text, encoding="utf-8")
    return tmp / name


@pytest.mark.parametrize("docs, out, needles", [
    (lambda tmp: tmp / "missing", "run", ["missing", "no such file or folder"]),
    (lambda tmp: _folder(tmp, "empty", {}), "run", ["empty", "no readable documents"]),
    (lambda tmp: _folder(tmp, "blank", {"a.md": " \n"}), "run", ["blank", "no readable documents"]),
    (lambda tmp: _folder(tmp, "notes", {"a.md": "# Tides\n\nThe Moon pulls the sea."}), "notes/run",
     ["lies inside DOCS"]),
    (lambda tmp: _folder(tmp, "docs", {"a.md": "# Tides\n\nThe Moon pulls the sea."}), "run --task sts",
     ["--from-corpus", "sts"]),
    (lambda tmp: _folder(tmp, "docs", {"a.md": "# Tides\n\nThe Moon pulls the sea."}), "run --license CC-BY",
     ["--license 'CC-BY'", "Hub licence id"]),
    (lambda tmp: _folder(tmp, "docs", {"a.md": "# Tides\n\nThe Moon pulls the sea."}), "run --teacher /nonexistent",
     ["/nonexistent", "no such model folder"]),
    (lambda tmp: _folder(tmp, "docs", {"a.md": "# Tides\n\nThe Moon pulls the sea."}), "run --teacher openai:emb",
     ["openai:emb", "--teacher-base-url"]),
    # the range generate declares, checked by generate's options before the run
    (lambda tmp: _folder(tmp, "docs", {"a.md": "# Tides\n\nThe Moon pulls the sea."}), "run --copy-retries 11",
     ["--copy-retries 11", "between 0 and 10"]),
])
def test_bad_input_is_one_line_before_anything_starts(tmp_path, docs, out, needles):
    out, *extra = out.split()
    proc = run_curate("pipeline", str(docs(tmp_path)), "--out", str(tmp_path / out), "--base-url", OFFLINE,
                      "--model", "m", *extra, env=_env(tmp_path))
    assert proc.returncode == 2
    assert_one_line_error(proc, *needles)
    assert not (tmp_path / out).exists(), "no run folder made"


@pytest.mark.parametrize("given, n, passages, asked", [
    (None, 12, 12, 2),   # -n takes every passage: a dropped copy is a passage without a query
    (None, 200, 12, 2),  # -n above the corpus: the same
    (None, 20, 40, 0),   # passages to spare: another takes a copy's place
    (None, 12, None, 0),  # not read yet (the options checked before the run): generate's default
    (0, 12, 12, 0),      # given: as it is, either way
    (3, 20, 40, 3),
])
def test_copies_are_asked_for_again_when_the_sample_is_the_whole_corpus(tmp_path, given, n, passages, asked):
    from curate.flows.pipeline import PipelineOptions, stages

    opts = PipelineOptions(docs="data/demo", out=str(tmp_path / "run"), n=n, copy_retries=given)
    (generate, gen_opts), *_ = stages(opts, opts.llm, tmp_path / "run", passages)
    assert generate.name == "generate" and gen_opts.copy_retries == asked
