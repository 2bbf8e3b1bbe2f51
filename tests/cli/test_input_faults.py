"""Issue 22: faults in reading inputs, each fixed in the one reader every command shares.

* corpus (``curate/datasets/corpus.py: read_corpus``): a duplicate id or an empty file is one line;
* qrels (``curate/datasets/beir.py``): lines citing unknown ids are dropped and counted in
  one warning; a BOM, a folder, a split that is not there are one clear line;
* JSONL (``curate/core/jsonl.py``): a byte that is not UTF-8 is reported at its own line, a
  BOM is read past;
* ``curate eval`` finds an unwritable ``--out``, light set or cache before the encoding;
* ``mine --in`` and ``filter`` keep the first record of a repeated id and report the rest.

Commands that would load a model run through ``_curate``: the teacher's encoding is a fast
word-hash stand-in that notes every call in a file, and loading a real model exits at once,
so a test can tell that its error came before any encoding.  Faults of the disk (read-only,
full) are simulated in that process for one folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from curate.core.errors import CurateError
from tests.helpers import REPO, SHARED_DATA, assert_one_line_error, read_jsonl, run_curate
from tests.mine_helpers import HashTeacher, write_jsonl

# Runs the CLI with a stand-in encoder (and optionally a read-only or full folder).
_SHIM = r'''
import errno, hashlib, os, shutil, sys
from pathlib import Path
import numpy as np
from curate.embed import teacher as _teacher

MARK = os.environ["CURATE_TEST_ENCODED"]

def _encode(self, texts, prompt=""):
    texts = list(texts)
    with open(MARK, "a") as fh:
        fh.write(f"{len(texts)}\n")
    vecs = np.zeros((len(texts), 64), np.float32)
    for i, t in enumerate(texts):
        for w in t.lower().split():
            vecs[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 64] += 1
    return vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)

def _no_model(self):
    sys.exit("test shim: a model was loaded")

_teacher.Teacher.encode = _encode
_teacher.Teacher.model = property(_no_model)

def _under(path, root):
    p = Path(os.fsdecode(path)).absolute()
    return p == root or root in p.parents

RO = os.environ.get("CURATE_TEST_READ_ONLY")
if RO:
    RO = Path(RO).absolute()
    real_open, real_mkdir = os.open, os.mkdir
    WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | getattr(os, "O_TMPFILE", 0)

    def ro_open(path, flags, mode=0o777, *a, **k):
        if flags & WRITE and _under(path, RO):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(path))
        return real_open(path, flags, mode, *a, **k)

    def ro_mkdir(path, mode=0o777, *a, **k):
        if _under(path, RO):
            if os.path.exists(path):
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), os.fsdecode(path))
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(path))
        return real_mkdir(path, mode, *a, **k)

    os.open, os.mkdir = ro_open, ro_mkdir

FULL = os.environ.get("CURATE_TEST_FULL")
if FULL:
    FULL = Path(FULL).absolute()
    real_usage = shutil.disk_usage

    def full_usage(path):
        u = real_usage(path)
        return type(u)(u.total, u.total - 4096, 4096) if _under(path, FULL) else u

    shutil.disk_usage = full_usage

sys.argv[0] = "curate"
from curate.cli import main
main()
'''


def _curate(tmp_path: Path, *args: str, read_only: Path | None = None, full: Path | None = None):
    """``curate ARGS`` with the stand-in encoder; returns (process, texts encoded per call)."""
    mark = tmp_path / "encoded.txt"
    mark.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "CURATE_DEBUG")}
    env.update({"CURATE_CACHE_DIR": str(tmp_path / "cache"), "CURATE_TEST_ENCODED": str(mark),
                "NO_COLOR": "1", "TERM": "dumb"})
    if read_only:
        env["CURATE_TEST_READ_ONLY"] = str(read_only)
    if full:
        env["CURATE_TEST_FULL"] = str(full)
    proc = subprocess.run([sys.executable, "-c", _SHIM, *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    encoded = [int(x) for x in mark.read_text().split()] if mark.exists() else []
    return proc, encoded


def _beir(folder: Path, docs: dict[str, str], queries: dict[str, str], qrels: str, split: str = "test") -> Path:
    write_jsonl(folder / "corpus.jsonl", ({"_id": d, "title": "", "text": t} for d, t in docs.items()))
    write_jsonl(folder / "queries.jsonl", ({"_id": q, "text": t} for q, t in queries.items()))
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n" + qrels, encoding="utf-8")
    return folder


DOCS = {"d1": "alpha beta", "d2": "gamma delta", "d3": "epsilon zeta", "d4": "eta theta"}
QUERIES = {"q1": "alpha beta", "q2": "gamma delta"}
QRELS = "q1\td1\t1\nq2\td2\t1\n"


def _record(rid: str, query: str, positive: str, negative: str) -> dict:
    return {"id": rid, "task_type": "short-long", "task": "Find the passage.", "query": query,
            "positive": positive, "negatives": [{"text": negative, "level": 1}]}


# ------------------------------------------------------------------------------ corpus


def test_a_duplicate_corpus_id_is_one_line_naming_both_lines(tmp_path):
    from curate.datasets.corpus import read_corpus

    lines = [{"_id": f"d{i}", "text": f"document number {i} about topic {i}"} for i in (1, 3, 2, 4, 5, 6)]
    lines.append({"_id": "d3", "text": "another text under an id already taken"})  # line 7
    folder = tmp_path / "beir"
    write_jsonl(folder / "corpus.jsonl", lines)
    write_jsonl(folder / "queries.jsonl", [{"_id": "q1", "text": "document number 3"}])
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td3\t1\n")
    line = f"{folder / 'corpus.jsonl'}:7: duplicate _id 'd3' (first at line 2)"

    proc, encoded = _curate(tmp_path, "eval", "--data", str(folder))
    assert_one_line_error(proc, line)
    assert proc.returncode == 2 and encoded == []
    pairs = write_jsonl(tmp_path / "pairs.jsonl", [{"query": "document number 3", "positive": "topic 3"}])
    proc, encoded = _curate(tmp_path, "mine", "--pairs", str(pairs), "--corpus", str(folder / "corpus.jsonl"),
                            "--out", str(tmp_path / "mined"))
    assert_one_line_error(proc, line)
    assert proc.returncode == 2 and encoded == [] and not (tmp_path / "mined").exists()
    for name in ("scifact", "nfcorpus", "nq-utd"):  # the real corpora have no repeated id: they still load
        path = SHARED_DATA / name / "corpus.jsonl"
        if path.exists():
            assert len(read_corpus(path)) > 0


# ------------------------------------------------------------------------------- qrels


def test_qrels_citing_unknown_ids_are_dropped_with_one_warning_and_scores_ignore_them(tmp_path):
    folder = _beir(tmp_path / "beir", DOCS, QUERIES, "q1\td1\t1\nq1\tdX\t1\nq9\td2\t1\nq2\td2\t1\n")
    out = tmp_path / "report.json"
    proc, encoded = _curate(tmp_path, "eval", "--data", str(folder), "--out", str(out))
    assert proc.returncode == 0 and encoded, proc.stderr
    warnings = [ln for ln in proc.stderr.splitlines() if "warning" in ln]
    assert warnings == [f"curate: warning: {folder / 'qrels' / 'test.tsv'}: dropped 2 of 4 lines: "
                        "1 with a document id not in corpus.jsonl (first: line 3, 'dX'); "
                        "1 with a query id not in queries.jsonl (first: line 4, 'q9')"], proc.stderr
    report = json.loads(out.read_text())
    assert report["queries"] == 2 and report["metrics"]["ndcg@10"] == 1.0  # dX is not a miss

    # mine still counts what it lost, in its report
    from curate.mine.main import MineOptions, run_mine

    rep = run_mine(MineOptions(out=str(tmp_path / "mined"), data=str(folder), split="test", method="naive", k=1,
                               plots=False), teachers=[HashTeacher()])
    assert rep["skipped_input"] == {"query id not in queries.jsonl": 1,
                                    "positive id not in corpus.jsonl (positive dropped)": 1}
    assert rep["queries_out"] == 2


def test_qrels_with_a_bom_are_read_and_a_bad_byte_is_named_at_its_line(tmp_path):
    from curate.datasets.beir import load_beir

    folder = _beir(tmp_path / "beir", DOCS, QUERIES, QRELS)
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        path = folder / name
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    data = load_beir(folder, "test")
    assert data.qrels == {"q1": {"d1": 1}, "q2": {"d2": 1}} and list(data.corpus) == list(DOCS)
    qrels = folder / "qrels" / "test.tsv"
    qrels.write_bytes(b"query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td\xe92\t1\n")
    with pytest.raises(CurateError, match=f"^{qrels}:3: not UTF-8 text$"):
        load_beir(folder, "test")


def test_a_qrels_path_that_is_a_folder_is_one_line(tmp_path):
    from curate.mine.inputs import load_beir_input

    folder = _beir(tmp_path / "beir", DOCS, QUERIES, QRELS)
    (folder / "qrels" / "train.tsv").mkdir()
    line = f"{folder / 'qrels' / 'train.tsv'}: a folder, not a qrels file"
    proc, encoded = _curate(tmp_path, "mine", "--data", str(folder), "--split", "train", "--out", str(tmp_path / "o"))
    assert_one_line_error(proc, line)
    assert proc.returncode == 2 and encoded == [] and not (tmp_path / "o").exists()
    proc = run_curate("generate", "--from-pairs", str(folder), "--split", "train", "--out", str(tmp_path / "g"),
                      "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert_one_line_error(proc, line)
    assert proc.returncode == 2 and not (tmp_path / "g" / "generated.jsonl").exists()
    with pytest.raises(CurateError, match=f"^{folder / 'qrels'}: a folder, not a qrels file$"):
        load_beir_input(folder, qrels_path=folder / "qrels")  # mine --qrels SOMEDIR from Python
    for flag in ("--qrels", "--check-qrels"):  # and from the command line: the reader's line, not click's usage
        proc, encoded = _curate(tmp_path, "mine", "--data", str(folder), "--split", "test", flag, str(folder / "qrels"),
                                "--out", str(tmp_path / "o2"))
        assert_one_line_error(proc, f"{folder / 'qrels'}: a folder, not a qrels file")
        assert proc.returncode == 2 and encoded == []


def test_a_missing_split_is_named(tmp_path):
    folder = _beir(tmp_path / "beir", DOCS, QUERIES, QRELS, split="test")
    (folder / "qrels" / "train.tsv").write_text(QRELS)
    line = f"{folder / 'qrels' / 'dev.tsv'}: no such split 'dev' (have: test, train)"
    proc, encoded = _curate(tmp_path, "eval", "--data", str(folder), "--split", "dev")
    assert_one_line_error(proc, line)
    assert proc.returncode == 2 and encoded == []
    proc, encoded = _curate(tmp_path, "mine", "--data", str(folder), "--split", "dev", "--out", str(tmp_path / "o"))
    assert_one_line_error(proc, line)
    assert proc.returncode == 2 and encoded == [] and not (tmp_path / "o").exists()


# ------------------------------------------------------------------------------- JSONL


def test_a_non_utf8_byte_is_reported_at_its_own_line_and_a_bom_is_read(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("steps:\n  - heuristics: {}\n")
    rows = [json.dumps(_record(f"r{i}", f"question number {i} about things",
                               f"The answer number {i} explains the things asked in some detail.",
                               f"An unrelated passage number {i} on other matters entirely."))
            for i in range(300)]
    bad = tmp_path / "bad.jsonl"
    blob = "\n".join(rows).encode() + b"\n"
    at = blob.index(b"question number 250 ")
    bad.write_bytes(blob[:at] + b"\xff" + blob[at:])
    proc = run_curate("filter", "--in", str(bad), "--out", str(tmp_path / "o"), "--recipe", str(recipe))
    assert_one_line_error(proc, f"{bad}:251: not UTF-8 text")
    assert proc.returncode == 2 and not (tmp_path / "o").exists()

    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(rows[:3]).encode() + b"\r\n")
    proc = run_curate("filter", "--in", str(bom), "--out", str(tmp_path / "o"), "--recipe", str(recipe))
    assert proc.returncode == 0, proc.stderr
    assert [r["id"] for r in read_jsonl(tmp_path / "o" / "filtered.jsonl")] == ["r0", "r1", "r2"]


# -------------------------------------------------------------------------- empty corpus


@pytest.mark.parametrize("mode", ["pairs", "records", "beir"])
def test_mine_on_an_empty_corpus_is_one_line_before_any_model(tmp_path, mode):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    if mode == "pairs":
        pairs = write_jsonl(tmp_path / "pairs.jsonl", [{"query": "alpha?", "positive": "alpha beta"},
                                                       {"query": "gamma?", "positive": "gamma delta"}])
        args, where = ("--pairs", str(pairs), "--corpus", str(empty)), empty
    elif mode == "records":
        recs = write_jsonl(tmp_path / "recs.jsonl", [_record("a", "alpha?", "alpha beta", "eta theta"),
                                                     _record("b", "gamma?", "gamma delta", "eta theta")])
        args, where = ("--in", str(recs), "--corpus", str(empty)), empty
    else:
        folder = _beir(tmp_path / "beir", {}, QUERIES, QRELS, split="train")
        args, where = ("--data", str(folder)), folder / "corpus.jsonl"
    proc, encoded = _curate(tmp_path, "mine", *args, "--out", str(tmp_path / "o"))
    assert_one_line_error(proc, f"{where}: no documents")
    assert proc.returncode == 2 and encoded == [] and not (tmp_path / "o").exists()


def test_eval_on_an_empty_corpus_is_one_line_before_any_encoding(tmp_path):
    folder = _beir(tmp_path / "beir", {}, QUERIES, QRELS)
    proc, encoded = _curate(tmp_path, "eval", "--data", str(folder), "--out", str(tmp_path / "r.json"))
    assert_one_line_error(proc, f"{folder / 'corpus.jsonl'}: no documents")
    assert proc.returncode == 2 and encoded == [] and not (tmp_path / "r.json").exists()


# --------------------------------------------------------------------- eval's own writes


@pytest.mark.parametrize("target, fault", [("out", "read-only"), ("out", "full"), ("light-set", "read-only"),
                                           ("light-cache", "read-only"), ("results-cache", "full")])
def test_eval_finds_an_unwritable_output_before_the_encoding(tmp_path, target, fault):
    folder = _beir(tmp_path / "beir", DOCS, QUERIES, QRELS)
    bad = tmp_path / "bad"
    bad.mkdir()
    cache = tmp_path / "cache"  # the shim's CURATE_CACHE_DIR
    args = ["eval", "--data", str(folder), "--precision", "fp32"]
    if target == "out":
        args += ["--out", str(bad / "report.json")]
        named = str(bad / "report.json")
    elif target == "light-set":
        args += ["--light", "--light-fraction", "0.5", "--light-set", str(bad / "light.json")]
        named = str(bad / "light.json")
    else:
        bad = cache
        bad.mkdir()
        args += ["--light", "--light-fraction", "0.5"] if target == "light-cache" else []
        named = str(cache / "eval" / ("light" if target == "light-cache" else "results"))
    reason = "read-only file system" if fault == "read-only" else "no space left on the device"
    proc, encoded = _curate(tmp_path, *args, **{"read_only" if fault == "read-only" else "full": bad})
    assert_one_line_error(proc, named, f"cannot write: {reason}")
    assert proc.returncode == 2 and encoded == [], proc.stderr
    assert not any(p.is_file() for p in bad.rglob("*")), "nothing half-written"


# --------------------------------------------------------------------------- repeated ids


def test_mine_keeps_the_first_record_of_a_repeated_id_and_reports_the_others(tmp_path):
    recs = write_jsonl(tmp_path / "recs.jsonl", [
        _record("a", "alpha?", "alpha beta", "eta theta"),
        _record("b", "gamma?", "gamma delta", "eta theta"),
        _record("a", "another query under a's id", "epsilon zeta", "eta theta"),
    ])
    out = tmp_path / "o"
    proc, _ = _curate(tmp_path, "mine", "--in", str(recs), "--method", "naive", "-k", "1",
                      "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    mined = read_jsonl(out / "mined.jsonl")
    assert [(r["id"], r["query"]) for r in mined] == [("a", "alpha?"), ("b", "gamma?")]
    report = json.loads((out / "report.json").read_text())
    assert report["skipped_input"] == {"record id seen before (first copy kept)": 1}
    assert [(r["id"], r["reason"]) for r in read_jsonl(out / "rejected.jsonl")] == [("a", "duplicate-id")]


def test_filter_keeps_the_first_record_of_a_repeated_id_and_logs_the_others(tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("steps:\n  - heuristics: {}\n")
    first = _record("a", "what is the alpha particle", "An alpha particle is a helium nucleus: two protons "
                    "and two neutrons bound together.", "Beta decay emits an electron or a positron.")
    second = _record("a", "what is a qubit", "A qubit is the basic unit of quantum information, a "
                     "two-state system.", "A classical bit holds either zero or one.")
    other = _record("b", "how do vaccines work", "Vaccines train the immune system to recognise a pathogen "
                    "before an infection.", "Antibiotics kill bacteria but not viruses.")
    recs = write_jsonl(tmp_path / "recs.jsonl", [first, other, second])
    out = tmp_path / "o"
    proc = run_curate("filter", "--in", str(recs), "--out", str(out), "--recipe", str(recipe))
    assert proc.returncode == 0, proc.stderr
    assert [(r["id"], r["query"]) for r in read_jsonl(out / "filtered.jsonl")] == [
        ("a", first["query"]), ("b", other["query"])]
    rejected = read_jsonl(out / "rejected.jsonl")
    assert [(r["id"], r["step"], r["reason"]) for r in rejected] == [("a", "duplicate-id", "duplicate-id")]
    report = json.loads((out / "report.json").read_text())
    assert report["records_in"] == 3 and report["records_kept"] == 2
    assert report["steps"][0]["step"] == "duplicate-id" and report["steps"][0]["records_dropped"] == {
        "duplicate-id": 1}


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_price_that_is_not_a_finite_number_is_refused_before_anything_is_written(tmp_path, value):
    records = tmp_path / "in.jsonl"
    write_jsonl(records, [{"id": "r0", "query": "what pulls the tides", "positive": "The Moon pulls the sea."}])
    proc = run_curate("filter", "--in", str(records), "--out", str(tmp_path / "f"), "--price-per-1k-tokens", value)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"'{value}' is not a finite number" in proc.stderr
    assert not (tmp_path / "f").exists(), "no report.json, run.json or summary with a bare NaN in it"


def test_options_made_in_python_are_checked_against_their_declared_ranges_too(tmp_path):
    from curate.core.stage import run_stage
    from curate.filter.main import STAGE, FilterOptions
    from curate.llm.options import LLMOptions

    records = tmp_path / "in.jsonl"
    write_jsonl(records, [{"id": "r0", "query": "what pulls the tides", "positive": "The Moon pulls the sea."}])
    opts = FilterOptions(inp=str(records), out=str(tmp_path / "f"), llm=LLMOptions(price_per_1k_tokens=float("nan")))
    with pytest.raises(CurateError, match="--price-per-1k-tokens nan: must be"):
        run_stage(STAGE, opts, quiet=True)
    assert not (tmp_path / "f").exists()
