"""End to end on the real bundled model (SmolLM2-135M on the embedded llama.cpp server)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import jsonschema
import pytest
import yaml

from curate.core.records import FAMILIES, Record
from curate.core.resources import resource_dir
from curate.generate.brainstorm import tasks_path
from tests.helpers import REPO, read_jsonl, run_curate

pytestmark = pytest.mark.e2e

# Small documents keep the CPU run short; every other placeholder is drawn as in production.
SHORT = ["--set", "num_words=40", "--max-chars", "300"]
# The work above bounds these runs; this only stops a hung process (a busy 2-core machine
# has taken over 900 s for the six-family run, so no tighter wall clock is set).
HANG_S = 3600


def _check_record(rec: dict, family: str) -> None:
    spec = yaml.safe_load((resource_dir("tasks") / f"{family}.yaml").read_text())
    r = Record.from_dict(rec)  # the shared schema accepts it
    assert r.task_type == family
    assert r.task and r.query and r.positive
    assert [n.level for n in r.negatives] == [1, 2, 3, 4]
    assert all(n.text for n in r.negatives)
    # the answer the model gave, rebuilt from the record, satisfies the family's JSON schema
    answer = {
        "query": r.query, "positive": r.positive, "positive_score": r.positive_score,
        "positive_answerable": r.positive_answerable,
        "negatives": [{"text": n.text, "score": n.score, "answerable": n.answerable} for n in r.negatives],
    }
    jsonschema.validate(answer, spec["generate"]["schema"])
    for key in ("model", "template", "template_hash", "placeholders", "seed", "attempts", "tokens", "latency_s"):
        assert key in r.meta, key
    assert r.meta["template"] == f"generate/{family}.j2"


@pytest.fixture(scope="module")
def six_families(tmp_path_factory):
    out = tmp_path_factory.mktemp("e2e") / "run"
    args = ["generate", "-n", "2", "--per-task", "2", "--out", str(out), *SHORT]
    for fam in FAMILIES:
        args += ["--task", fam]
    return out, run_curate(*args, timeout=HANG_S)


@pytest.mark.bench
def test_generate_every_family_with_bundled_model(six_families):
    out, proc = six_families
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    records = read_jsonl(out / "generated.jsonl")
    failed = read_jsonl(out / "failed.jsonl")
    by_family = {f: [r for r in records if r["task_type"] == f] for f in FAMILIES}
    for fam in FAMILIES:
        ended = len(by_family[fam]) + sum(1 for f in failed if f["task_type"] == fam)
        assert ended == 2, f"{fam}: every item ends as a record or a failure"
        assert by_family[fam], f"{fam}: the bundled model produced no valid record"
        for rec in by_family[fam]:
            _check_record(rec, fam)
    assert len({r["id"] for r in records}) == len(records)
    summary = json.loads((out / "report.json").read_text())
    assert summary["counts"]["ok"] == len(records)
    assert set(summary["families"]) == set(FAMILIES)
    # brainstormed families wrote their task files; fixed-task families use the spec's tasks
    for fam in ("short-long", "long-short", "short-short", "long-long"):
        tasks = read_jsonl(tasks_path(out, fam))
        assert tasks and all(t["task_type"] == fam for t in tasks)


def test_brainstorm_is_a_run_of_its_own_that_generate_reads(tmp_path):
    """A family's brainstorm is a stage run in OUT/tasks/FAMILY (its run.json, report and marker
    there, none in the generate folder); a larger -n continues it with distinct tasks (no exact
    or near repeat), generate uses the tasks it
    finds without asking for more, and another --seed replaces them, the finished ones kept."""
    out = tmp_path / "run"
    path = tasks_path(out, "long-short")

    def brainstorm(*extra):
        proc = run_curate("brainstorm", "--task", "long-short", "--out", str(out), *extra, timeout=HANG_S)
        assert proc.returncode == 0, proc.stderr
        return proc, json.loads((path.parent / "report.json").read_text())["families"]["long-short"]

    brainstorm("-n", "2")
    assert json.loads((path.parent / "run.json").read_text())["stage"] == "brainstorm"
    assert not (out / "run.json").exists() and not (out / "report.json").exists(), "generate's folder is its own"
    two = read_jsonl(path)
    _, report = brainstorm("-n", "4")
    four = read_jsonl(path)
    assert four[:len(two)] == two and report["counts"]["resumed"] == len(two), "continued, not begun again"
    assert report["requests_sent"] > 0
    texts = [" ".join(t["task"].lower().split()) for t in four]
    assert len(set(texts)) == len(texts), "no exact repeats among kept tasks"
    from curate.dedup.near_dup import NearDupIndex

    idx = NearDupIndex(threshold=0.7)
    assert all(idx.add_if_new(t) for t in texts), "no near-duplicates among kept tasks"

    made = path.read_bytes(), (path.parent / "report.json").read_bytes()
    gen = run_curate("generate", "--task", "long-short", "-n", "2", "--per-task", "2", "--out", str(out), *SHORT,
                     timeout=HANG_S)
    assert gen.returncode == 0, gen.stderr
    assert (path.read_bytes(), (path.parent / "report.json").read_bytes()) == made, "enough tasks: no brainstorm run"
    assert "brainstorm" not in json.loads((out / "report.json").read_text())["families"]["long-short"]
    assert {r["task"] for r in read_jsonl(out / "generated.jsonl")} <= {t["task"] for t in four}

    proc, _ = brainstorm("-n", "2", "--seed", "1")
    kept = list((out / "tasks" / ".curate-replaced" / "long-short").glob("*/tasks.jsonl"))
    assert len(kept) == 1 and read_jsonl(kept[0]) == four, proc.stdout
    assert "--seed changed" in " ".join((proc.stdout + proc.stderr).split())
    assert json.loads((path.parent / "run.json").read_text())["params"]["seed"] == 1


def test_tasks_kept_where_an_older_curate_put_them_are_moved_into_the_run(tmp_path):
    """A folder begun before brainstorm was a stage holds OUT/tasks/FAMILY.jsonl: the run moves it
    into its own folder, edits and all, and asks the model nothing when it holds enough."""
    out = tmp_path / "run"
    older = out / "tasks" / "long-short.jsonl"
    older.parent.mkdir(parents=True)
    mine = [{"task": "Given a recipe name, find recipes that cook it."},
            {"task": "Given a chess opening, find games that start with it."}]
    older.write_text("".join(json.dumps(t) + "\n" for t in mine))
    proc = run_curate("brainstorm", "--task", "long-short", "-n", "2", "--out", str(out), timeout=HANG_S)
    assert proc.returncode == 0, proc.stderr
    assert not older.exists() and [t["task"] for t in read_jsonl(tasks_path(out, "long-short"))] == [
        t["task"] for t in mine]
    report = json.loads((tasks_path(out, "long-short").parent / "report.json").read_text())
    assert report["families"]["long-short"]["requests_sent"] == 0


@pytest.mark.bench
def test_killed_run_resumes_without_loss_or_duplicates(tmp_path):
    out = tmp_path / "resume"
    cmd = [sys.executable, "-m", "curate", "generate", "--task", "sts", "-n", "6", "--out", str(out), *SHORT]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    gen = out / "generated.jsonl"
    deadline = time.time() + HANG_S  # bounded by the work: the run ends after 6 items anyway
    while time.time() < deadline and proc.poll() is None and len(read_jsonl(gen)) < 2:
        time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = read_jsonl(gen)
    assert 2 <= len(before) < 6, "the kill landed mid-run"
    # simulate a write cut off by the kill: a partial last line must not be read back
    with gen.open("a") as fh:
        fh.write('{"id": "half-writ')
    again = run_curate("generate", "--task", "sts", "-n", "6", "--out", str(out), *SHORT, timeout=HANG_S)
    assert again.returncode == 0, again.stderr
    after = read_jsonl(gen)
    failed = read_jsonl(out / "failed.jsonl")
    ids = [r["id"] for r in after] + [f["id"] for f in failed]
    assert len(ids) == len(set(ids)) == 6, "six items, each exactly once"
    assert {r["id"] for r in before} <= {r["id"] for r in after}, "nothing finished was lost"
    summary = json.loads((out / "report.json").read_text())
    assert summary["counts"]["resumed"] == len(before)


@pytest.mark.bench
def test_filter_the_bundled_model_output(six_families, tmp_path):
    out, proc = six_families
    assert proc.returncode == 0, proc.stderr
    fout = tmp_path / "filtered"
    res = run_curate("filter", "--in", str(out / "generated.jsonl"), "--out", str(fout),
                     env={"CURATE_CACHE_DIR": str(tmp_path / "cache")}, timeout=HANG_S)
    assert res.returncode == 0, res.stderr
    records = read_jsonl(out / "generated.jsonl")
    kept = read_jsonl(fout / "filtered.jsonl")
    rejected = read_jsonl(fout / "rejected.jsonl")
    dropped = {r["id"] for r in rejected if r["target"] == "record"}
    assert {r["id"] for r in kept} | dropped == {r["id"] for r in records}, "every record kept or dropped with a reason"
    assert not {r["id"] for r in kept} & dropped
    assert all(r["step"] and r["reason"] for r in rejected)
    report = json.loads((fout / "report.json").read_text())
    assert report["records_in"] == len(records) and report["records_kept"] == len(kept)
    for r in kept:
        assert r["teacher"] and r["teacher"]["model"], "the teacher step records its scores on every kept record"
        assert r["negatives"], "a kept record keeps at least one negative"
    # the tiny model's texts rarely pass the default recipe, so the teacher's fields are checked on
    # every record by a recipe whose only step ranks without limits (it drops nothing)
    recipe = tmp_path / "rank-only.yaml"
    recipe.write_text("steps:\n  - teacher_rank: {positive_top: 0, negative_bottom: 0, drop_if_negative_outranks: false}\n")
    rout = tmp_path / "ranked"
    res = run_curate("filter", "--in", str(out / "generated.jsonl"), "--out", str(rout), "--recipe", str(recipe),
                     env={"CURATE_CACHE_DIR": str(tmp_path / "cache")}, timeout=HANG_S)
    assert res.returncode == 0, res.stderr
    ranked = read_jsonl(rout / "filtered.jsonl")
    assert [r["id"] for r in ranked] == [r["id"] for r in records]
    for r in ranked:
        t = r["teacher"]
        # a cosine of float32 unit vectors (a query the model copied from its positive scores 1 + 1e-7)
        assert t["model"].endswith("all-MiniLM-L6-v2") and -1.0 - 1e-5 <= t["positive"] <= 1.0 + 1e-5
        assert t["positive_rank"] >= 1 and all(n["teacher_rank"] >= 1 for n in r["negatives"])


@pytest.mark.bench
def test_export_audits_the_short_long_records(six_families, tmp_path):
    """The shortcut audit's figures for the bundled model's short-long records are in the export's
    report and on its card: each comparison probed, or listed as skipped with its counts."""
    out, proc = six_families
    assert proc.returncode == 0, proc.stderr
    records = [r for r in read_jsonl(out / "generated.jsonl") if r["task_type"] == "short-long"]
    assert records
    src = tmp_path / "short-long.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    eout = tmp_path / "export"
    res = run_curate("export", "--in", str(src), "--out", str(eout), "--format", "hf", "--dev-fraction", "0",
                     env={"CURATE_CACHE_DIR": str(tmp_path / "cache")}, timeout=HANG_S)
    assert res.returncode == 0, res.stderr
    assert "audit: " in res.stdout + res.stderr
    audit = json.loads((eout / "report.json").read_text(encoding="utf-8"))["audit"]
    listed = audit["comparisons"] + audit["skipped"]
    # generated records: LLM-written positives and negatives at levels 1-4, no corpus text
    assert {(c["comparison"], c["level"]) for c in listed} >= {
        ("positive_vs_negative", "all"), *(("level_vs_rest", lv) for lv in (1, 2, 3, 4))}
    assert all(c["family"] == "short-long" for c in listed)
    assert not any(c["comparison"] == "llm_vs_corpus" for c in listed)
    for c in audit["comparisons"]:
        assert 0.0 <= c["char_auc"] <= 1.0 and min(c["n_a"], c["n_b"]) >= 10
        assert c["side_b"].startswith(("negatives (llm", "level "))
    for s in audit["skipped"]:
        assert min(s["n_a"], s["n_b"]) < 10 and s["why"]
    pv = next(c for c in listed if (c["comparison"], c["level"]) == ("positive_vs_negative", "all"))
    assert 1 <= pv["n_a"] <= len(records) and 1 <= pv["n_b"] <= 4 * len(records)
    card = (eout / "README.md").read_text(encoding="utf-8").split("## Audit", 1)[1].split("\n## ", 1)[0]
    assert "| positive_vs_negative | short-long | all |" in card
    assert f"| {pv['n_a']} | {pv['n_b']} |" in card
