"""`curate generate --from-pairs`: graded negatives for real (query, positive) pairs (MGH).

Fast tests run the CLI against the scripted fake server (tests/fake_llm_server.py); one e2e
test runs the bundled model on two SciFact pairs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from curate.core.records import Record
from curate.llm.taskspec import load_spec
from tests.fake_llm_server import fake_llm_server
from tests.helpers import assert_one_line_error, REPO, SHARED_DATA, read_jsonl, run_curate

PAIRS = [
    # odd spacing and a trailing newline must survive verbatim
    {"query": "  what causes  ocean tides? ", "positive": "Tides come from the pull of the Moon and the Sun on the oceans.\n"},
    {"query": "Wie funktionieren Impfstoffe?", "positive": "Impfstoffe trainieren das Immunsystem, einen Erreger zu erkennen."},
    {"query": "does aspirin thin the blood", "positive": "Aspirin irreversibly inhibits platelet cyclooxygenase, reducing clotting.",
     "task": "Given a health question, retrieve passages that answer it."},
    {"query": "what is a qubit", "positive": "A qubit is the basic unit of quantum information, a two-state quantum system."},
]


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("OPENAI_BASE_URL", None)
    env.pop("CURATE_DEBUG", None)
    env.update({"OPENAI_API_KEY": "fake-key", "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200",
                "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")})
    return env


def _generate(srv, pairs, out: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "curate", "generate", "--from-pairs", str(pairs), "--out", str(out),
           "--base-url", srv.base_url, "--model", "fake", "--max-retries", "0", "--max-reasks", "0",
           "--backoff-base", "0.01", "--timeout", "10", *extra]
    proc = subprocess.run(cmd, cwd=REPO, env=_env(out.parent / "home"), capture_output=True, text=True, timeout=120)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return proc


def _write(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _check_record(rec: dict, query: str, positive: str) -> None:
    r = Record.from_dict(rec)
    assert r.task_type == "from-pairs"
    assert r.query == query and r.positive == positive, "the given query and positive, verbatim"
    assert [n.level for n in r.negatives] == [1, 2, 3, 4]
    assert all(n.text and n.source == "llm" for n in r.negatives)
    assert all(isinstance(n.score, int) and isinstance(n.answerable, bool) for n in r.negatives)
    assert isinstance(r.positive_score, int)
    assert r.meta["template"] == "generate/from-pairs.j2"
    assert "query" not in r.meta["placeholders"] and "positive" not in r.meta["placeholders"]


def test_records_keep_the_pair_and_get_four_graded_negatives(tmp_path):
    pairs = _write(tmp_path / "pairs.jsonl", PAIRS + [PAIRS[0]])  # a repeated pair is one item
    with fake_llm_server() as srv:
        proc = _generate(srv, pairs, tmp_path / "out")
        assert proc.returncode == 0, proc.stderr
        sent = [r.body for r in srv.chat_requests]
    records = read_jsonl(tmp_path / "out" / "generated.jsonl")
    assert len(records) == len(PAIRS) == len(sent)
    by_query = {r["query"]: r for r in records}
    for p in PAIRS:
        rec = by_query[p["query"]]
        _check_record(rec, p["query"], p["positive"])
        assert rec["task"] == p.get("task", load_spec("from-pairs").fixed_tasks[0])
    # the model is shown the real texts and asked only for negatives and scores
    for body in sent:
        schema = body["response_format"]["json_schema"]["schema"]
        assert set(schema["required"]) == {"positive_score", "negatives"}
        assert "query" not in schema["properties"] and "positive" not in schema["properties"]
    prompts = [b["messages"][-1]["content"] for b in sent]
    for p in PAIRS:
        assert any(p["query"].strip() in t and p["positive"].strip() in t for t in prompts)
    summary = json.loads((tmp_path / "out" / "report.json").read_text())
    assert summary["families"]["from-pairs"]["duplicate_pairs"] == 1
    assert summary["counts"]["ok"] == len(PAIRS)


def test_resume_continues_and_ids_follow_the_pairs(tmp_path):
    pairs = _write(tmp_path / "pairs.jsonl", PAIRS)
    out = tmp_path / "out"
    with fake_llm_server() as srv:
        first = _generate(srv, pairs, out, "-n", "2")
        assert first.returncode == 0, first.stderr
        assert len(read_jsonl(out / "generated.jsonl")) == 2
        second = _generate(srv, pairs, out)
        assert second.returncode == 0, second.stderr
        assert len(srv.chat_requests) == len(PAIRS), "the first two pairs were not asked again"
        third = _generate(srv, pairs, out)
        assert len(srv.chat_requests) == len(PAIRS), "a finished run sends nothing"
    records = read_jsonl(out / "generated.jsonl")
    assert len(records) == len({r["id"] for r in records}) == len(PAIRS)
    summary = json.loads((out / "report.json").read_text())
    assert summary["counts"]["resumed"] == len(PAIRS) and summary["counts"]["ok"] == 0
    assert third.returncode == 0

    # the same pairs in another order, in a fresh folder: the same ids (ids come from the pair)
    shuffled = _write(tmp_path / "shuffled.jsonl", PAIRS[::-1])
    with fake_llm_server() as srv:
        assert _generate(srv, shuffled, tmp_path / "out2").returncode == 0
    again = read_jsonl(tmp_path / "out2" / "generated.jsonl")
    assert {r["id"] for r in again} == {r["id"] for r in records}


def test_failed_pair_is_recorded_and_retried(tmp_path):
    rows = PAIRS[:2] + [{"query": "FAULTS[500,ok] which pair fails first", "positive": "The pair whose request got a 500."}]
    pairs = _write(tmp_path / "pairs.jsonl", rows)
    out = tmp_path / "out"
    with fake_llm_server() as srv:
        assert _generate(srv, pairs, out).returncode == 0
        failed = read_jsonl(out / "failed.jsonl")
        assert len(failed) == 1 and failed[0]["reason"].startswith("http-500")
        assert failed[0]["meta"]["pair"] == {"line": 3}
        assert _generate(srv, pairs, out, "--retry-failed").returncode == 0
    records = read_jsonl(out / "generated.jsonl")
    assert read_jsonl(out / "failed.jsonl") == []
    rec = next(r for r in records if r["id"] == failed[0]["id"])
    _check_record(rec, rows[2]["query"], rows[2]["positive"])


def test_beir_folder_gives_one_pair_per_relevant_document(tmp_path):
    from curate.datasets.beir import load_beir

    with fake_llm_server() as srv:
        proc = _generate(srv, SHARED_DATA / "scifact", tmp_path / "out", "--split", "test", "-n", "3")
        assert proc.returncode == 0, proc.stderr
    records = read_jsonl(tmp_path / "out" / "generated.jsonl")
    assert len(records) == 3
    data = load_beir(SHARED_DATA / "scifact", "test")
    for rec in records:
        src = rec["meta"]["pair"]
        assert src["split"] == "test" and data.qrels[src["query_id"]][src["doc_id"]] >= 1
        _check_record(rec, data.queries[src["query_id"]], data.corpus[src["doc_id"]])


@pytest.mark.parametrize("line, needle", [
    ('{"query": "q", "positive": 3}', "a pair needs a string 'positive'"),
    ('{"query": "  ", "positive": "p"}', "'query' is empty"),
    ('{"query": "q", "positive": "p"', "invalid JSON"),
    ('["q", "p"]', "a pair must be a JSON object"),
])
def test_bad_pairs_line_is_one_line_naming_file_and_line(tmp_path, line, needle):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps(PAIRS[0]) + "\n" + line + "\n")
    proc = run_curate("generate", "--from-pairs", str(pairs), "--out", str(tmp_path / "o"),
                      "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert_one_line_error(proc, "pairs.jsonl:2", needle)
    assert not (tmp_path / "o" / "generated.jsonl").exists()


def test_from_pairs_family_needs_pairs_and_pairs_need_such_a_family(tmp_path):
    proc = run_curate("generate", "--task", "from-pairs", "--out", str(tmp_path / "o"),
                      "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert_one_line_error(proc, "from-pairs", "--from-pairs")
    pairs = _write(tmp_path / "pairs.jsonl", PAIRS)
    proc = run_curate("generate", "--task", "sts", "--from-pairs", str(pairs), "--out", str(tmp_path / "o"),
                      "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert_one_line_error(proc, "--from-pairs", "sts")
    proc = run_curate("generate", "--from-pairs", str(SHARED_DATA / "scifact"), "--split", "dev",
                      "--out", str(tmp_path / "o"), "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert_one_line_error(proc, "split 'dev'", "test", "train")


def test_task_all_leaves_out_families_that_need_pairs():
    from curate.generate.stage import families as _families

    names = _families(("all",), ())
    assert "from-pairs" not in names and {"short-long", "sts"} <= set(names)


@pytest.mark.e2e
def test_bundled_model_on_two_scifact_pairs(tmp_path):
    from curate.datasets.beir import load_beir

    data = load_beir(SHARED_DATA / "scifact", "train")
    rows = []
    for qid, docs in data.qrels.items():
        for did in docs:
            rows.append({"query": data.queries[qid], "positive": data.corpus[did]})
            break
        if len(rows) == 2:
            break
    pairs = _write(tmp_path / "pairs.jsonl", rows)
    out = tmp_path / "out"
    proc = run_curate("generate", "--from-pairs", str(pairs), "--out", str(out), "--max-chars", "300")
    assert proc.returncode == 0, proc.stderr
    records = read_jsonl(out / "generated.jsonl")
    failed = read_jsonl(out / "failed.jsonl")
    assert len(records) + len(failed) == 2, "every pair ends as a record or a failure"
    assert records, f"the bundled model gave no valid record: {[f['reason'] for f in failed]}"
    for rec in records:
        given = next(r for r in rows if r["query"] == rec["query"])
        _check_record(rec, given["query"], given["positive"])
        assert all(len(n["text"]) <= 300 for n in rec["negatives"])
