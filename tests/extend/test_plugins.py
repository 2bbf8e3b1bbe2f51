"""The plugin examples of docs/extend.md, each a package of its own, run through the real CLI.

Each example under docs/examples/plugins/ is made importable the way pip would install it, but
in a folder of the test's own: its module, plus a ``NAME.dist-info`` whose ``entry_points.txt``
is generated from its pyproject.toml, on the PYTHONPATH of a ``python -m curate`` subprocess.
Nothing is installed into the environment, so a plugin is found only through its entry point,
as a user's installed package would be.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from curate.core.records import Negative, Record
from tests.helpers import REPO, SHARED_DATA, assert_one_line_error, read_jsonl, run_curate, scifact_pairs
from tests.mine_helpers import write_beir

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

PLUGINS = REPO / "docs" / "examples" / "plugins"
PACKAGES = ("filter-step", "export-format", "mining-preset", "llm-backend", "teacher-kind", "generate-source")
FAMILY = PLUGINS / "task-family"


def install(site: Path, *examples: str) -> dict[str, str]:
    """Lay ``examples`` out in ``site`` as installed distributions; the environment that finds them."""
    for example in examples:
        src = PLUGINS / example
        meta = tomllib.loads((src / "pyproject.toml").read_text(encoding="utf-8"))
        project = meta["project"]
        site.mkdir(parents=True, exist_ok=True)
        for module in meta["tool"]["setuptools"]["py-modules"]:
            shutil.copy(src / f"{module}.py", site / f"{module}.py")
        info = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\n"
                                       f"Version: {project['version']}\n", encoding="utf-8")
        (info / "entry_points.txt").write_text("".join(
            f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in entries.items()) + "\n"
            for group, entries in project["entry-points"].items()), encoding="utf-8")
    return {"PYTHONPATH": str(site), "CURATE_CACHE_DIR": str(site.parent / "cache")}


def _ok(proc) -> None:
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture
def records(tmp_path) -> Path:
    """Six records of SciFact texts, two negatives each."""
    pairs = scifact_pairs(6, max_chars=400)
    recs = [Record(id=f"r{i}", task_type="short-long", task="Given a claim, find evidence.", query=q, positive=d,
                   negatives=[Negative(text=pairs[(i + j) % 6][1], level=j) for j in (1, 2)])
            for i, (q, d) in enumerate(pairs)]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in recs), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tiny_beir(tmp_path_factory) -> Path:
    """Six SciFact claims with their evidence, among 40 abstracts (cut short): mined in seconds."""
    src = SHARED_DATA / "scifact"
    if not (src / "corpus.jsonl").exists():  # pragma: no cover
        pytest.skip("no SciFact copy")
    qrels: dict[str, dict[str, int]] = {}
    for line in (src / "qrels" / "train.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        q, d, _ = line.split("\t")
        if len(qrels) < 6 or q in qrels:
            qrels.setdefault(q, {})[d] = 1
    wanted = {d for rel in qrels.values() for d in rel}
    corpus: dict[str, str] = {}
    with open(src / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            if doc["_id"] in wanted or len(corpus) < 40:
                corpus[doc["_id"]] = doc["text"][:400]
            if wanted <= set(corpus) and len(corpus) >= 40:
                break
    queries = {json.loads(x)["_id"]: json.loads(x)["text"] for x in open(src / "queries.jsonl", encoding="utf-8")}
    return write_beir(tmp_path_factory.mktemp("beir") / "tiny", corpus, {q: queries[q] for q in qrels}, qrels)


def test_a_filter_step_plugin_runs_in_a_recipe(tmp_path, records):
    env = install(tmp_path / "site", "filter-step")
    words = sorted(len(r["query"].split()) for r in read_jsonl(records))
    limit = words[len(words) // 2]  # about half the claims are shorter
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"steps:\n  - short_query: {{min_words: {limit}}}\n", encoding="utf-8")
    _ok(run_curate("filter", "--in", str(records), "--out", str(tmp_path / "f"), "--recipe", str(recipe), env=env))
    kept, dropped = read_jsonl(tmp_path / "f" / "filtered.jsonl"), read_jsonl(tmp_path / "f" / "rejected.jsonl")
    assert kept and dropped and len(kept) + len(dropped) == 6
    assert all(len(r["query"].split()) >= limit for r in kept)
    assert {(d["step"], d["reason"]) for d in dropped} == {("short_query", "short-query")}


def test_an_export_format_plugin_writes_its_files_and_its_card_text(tmp_path, records):
    env = install(tmp_path / "site", "export-format")
    out = tmp_path / "e"
    _ok(run_curate("export", "--in", str(records), "--out", str(out), "--format", "tsv-triplets", "--format", "beir",
                   "--negatives-per-row", "all", "--batch-size", "2", env=env))
    lines = []
    for split in ("train", "dev"):
        path = out / "tsv-triplets" / f"{split}.tsv"
        if path.exists():
            rows = list(csv.reader(path.open(encoding="utf-8", newline=""), delimiter="\t"))
            assert rows[0] == ["query", "positive", "negative"]
            lines += rows[1:]
    assert len(lines) == 12 and all(len(x) == 3 for x in lines)  # six records, two negatives each
    # the card above the two formats says how to train on each, the plugin's paragraph included
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "**TSV triplets** (`EXPORT/tsv-triplets`)" in card and "**BEIR** (`EXPORT/beir`)" in card


def _mined(tmp_path: Path, plugin: str, data: Path, *args: str) -> list[dict]:
    """`curate mine --data DATA ARGS` with the plugin installed: the mined records."""
    env = install(tmp_path / "site", plugin)
    _ok(run_curate("mine", "--data", str(data), "--out", str(tmp_path / "m"), *args, env=env))
    return read_jsonl(tmp_path / "m" / "mined.jsonl")


def test_a_mining_preset_plugin_mines_with_the_bundled_teacher(tmp_path, tiny_beir):
    rows = _mined(tmp_path, "mining-preset", tiny_beir, "--method", "score-band", "--max-score", "0.75", "-k", "3")
    assert rows and sum(len(r["negatives"]) for r in rows) > 0
    for r in rows:
        assert r["meta"]["mine"]["method"] == "score-band" and r["meta"]["mine"]["params"] == {"max_score": 0.75}
        assert all(0.3 <= n["teacher_score"] <= 0.75 for n in r["negatives"])


def test_a_teacher_kind_plugin_encodes_for_mine(tmp_path, tiny_beir):
    rows = _mined(tmp_path, "teacher-kind", tiny_beir, "--teacher", "hashwords:64", "--method", "naive", "-k", "2")
    assert len(rows) == 6 and all(len(r["negatives"]) == 2 for r in rows)
    assert {r["teacher"]["model"] for r in rows} == {"hashwords:64"}


def test_a_backend_plugin_generates_a_family_of_ones_own(tmp_path):
    """The echo backend answers every request of a run of the example family (its spec and
    template found through --tasks-dir and --prompts-dir): no server, no model."""
    env = install(tmp_path / "site", "llm-backend")
    out = tmp_path / "g"
    _ok(run_curate("generate", "--task", "glossary", "--tasks-dir", str(FAMILY / "tasks"),
                   "--prompts-dir", str(FAMILY / "prompts"), "--base-url", "echo://local", "--model", "echo",
                   "-n", "3", "--out", str(out), env=env))
    recs = read_jsonl(out / "generated.jsonl")
    assert len(recs) == 3 and not read_jsonl(out / "failed.jsonl")
    fields = {"biology", "law", "finance", "computing", "cooking"}
    for r in recs:
        assert r["task_type"] == "glossary" and r["meta"]["template"] == "generate/glossary.j2"
        assert r["meta"]["model"] == "echo" and r["meta"]["placeholders"]["field"] in fields
        assert r["query"].startswith("query: ") and r["positive"].startswith("positive: ")
        assert [n["text"].split(":")[0] for n in r["negatives"]] == [f"negatives[{i}].text" for i in (1, 2, 3)]


def test_a_generate_source_plugin_brings_its_own_pairs(tmp_path):
    """The TSV source reads pairs its own way; the echo backend writes their negatives."""
    env = install(tmp_path / "site", "generate-source", "llm-backend")
    pairs = scifact_pairs(3, max_chars=300)
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("".join(f"{q}\t{d}\n" for q, d in pairs), encoding="utf-8")
    out = tmp_path / "g"
    _ok(run_curate("generate", "--from", f"tsv={tsv}", "--base-url", "echo://local", "--model", "echo",
                   "--out", str(out), env=env))
    recs = read_jsonl(out / "generated.jsonl")
    assert [(r["query"], r["positive"]) for r in recs] == pairs, "the pairs as the source read them, in order"
    assert all(r["task_type"] == "from-pairs" and len(r["negatives"]) == 4 for r in recs)
    bad = tmp_path / "bad.tsv"
    bad.write_text("a query without its passage\n", encoding="utf-8")
    assert_one_line_error(run_curate("generate", "--from", f"tsv={bad}", "--base-url", "echo://local", "--model",
                                     "echo", "--out", str(tmp_path / "b"), env=env), f"{bad}:1", "QUERY<TAB>POSITIVE")
    assert_one_line_error(run_curate("generate", "--from", f"tvs={tsv}", "--out", str(tmp_path / "c"), env=env),
                          "unknown generate input source 'tvs'", "did you mean tsv?")


def test_a_misspelt_plugin_name_is_one_line_with_the_nearest(tmp_path, records, tiny_beir):
    env = install(tmp_path / "site", *PACKAGES)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("steps:\n  - short_qeury: {min_words: 3}\n", encoding="utf-8")
    for args, says in [
        (("filter", "--in", str(records), "--out", str(tmp_path / "f"), "--recipe", str(recipe)),
         "unknown filter step 'short_qeury' (did you mean short_query?)"),
        (("export", "--in", str(records), "--out", str(tmp_path / "e"), "--format", "tsv-triplet"),
         "unknown --format tsv-triplet (did you mean tsv-triplets?)"),
        (("mine", "--data", str(tiny_beir), "--out", str(tmp_path / "m"), "--method", "score-bnad"),
         "unknown mining method 'score-bnad' (did you mean score-band?)"),
        (("mine", "--data", str(tiny_beir), "--out", str(tmp_path / "t"), "--teacher", "hashword:64"),
         "unknown teacher kind 'hashword' (did you mean hashwords?)"),
        (("generate", "--task", "short-long", "-n", "1", "--base-url", "ehco://local", "--model", "echo",
          "--out", str(tmp_path / "g")),
         "no backend for ehco:// (did you mean echo?)"),
    ]:
        assert_one_line_error(run_curate(*args, env=env), says)


def test_the_preset_example_also_loads_as_a_preset_module():
    """``--preset-module FILE`` imports the same file, whose decorator registers into the same registry."""
    from curate.negatives.presets import PRESETS, Method, load_preset_module

    load_preset_module(PLUGINS / "mining-preset" / "curate_score_band.py")
    try:
        method = Method.make("score-band", max_score=0.6)
        assert (method.thresholds.max_score, method.thresholds.min_score) == (0.6, 0.3)
        assert "score-band" in PRESETS.names()
    finally:
        PRESETS.unregister("score-band")


def _plugin(site: Path, dist: str, group: str, entries: dict[str, str], module: str | None, source: str) -> dict[str, str]:
    """One plugin distribution of a single module (``module``, None: ``dist`` with underscores),
    laid out as pip would install it; returns the environment that finds it."""
    module = module or dist.replace("-", "_")
    site.mkdir(parents=True, exist_ok=True)
    (site / f"{module}.py").write_text(source, encoding="utf-8")
    info = site / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()),
                                           encoding="utf-8")
    return {"PYTHONPATH": str(site), "CURATE_CACHE_DIR": str(site.parent / "cache")}


STEP_SOURCE = '''from dataclasses import dataclass
from curate.filter.base import register


@dataclass
class Params:
    pass


@register("{name}", Params, kind="map")
def {fn}(records, params, ctx):
    return records[:1]
'''


@pytest.mark.parametrize("taken", ["heuristics", "keep_one"])
def test_a_plugin_taking_a_name_already_registered_is_one_line_naming_both(tmp_path, records, taken):
    site = tmp_path / "site"
    env = _plugin(site, "first_plugin", "curate.filter_steps", {"keep_one": "first_plugin"}, "first_plugin",
                  STEP_SOURCE.format(name="keep_one", fn="keep_one"))
    env = _plugin(site, "rival_plugin", "curate.filter_steps", {"rival": "rival_plugin"}, "rival_plugin",
                  STEP_SOURCE.format(name=taken, fn="rival"))
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("steps:\n  - heuristics: {}\n", encoding="utf-8")
    proc = run_curate("filter", "--in", str(records), "--out", str(tmp_path / "f"), "--recipe", str(recipe), env=env)
    owner = "curate.filter.steps.heuristics" if taken == "heuristics" else "first_plugin.keep_one"
    assert_one_line_error(proc, f"filter step {taken!r} is registered twice", owner, "rival_plugin.rival")
    assert not (tmp_path / "f").exists(), "nothing written"


def test_a_plugin_that_exits_on_import_is_one_line_and_a_failure(tmp_path, records):
    env = _plugin(tmp_path / "site", "quitter", "curate.filter_steps", {"quitter": "quitter"}, "quitter",
                  "import sys\nsys.exit(0)\n")
    proc = run_curate("filter", "--in", str(records), "--out", str(tmp_path / "f"), env=env)
    assert_one_line_error(proc, "filter step plugin 'quitter'", "exited while loading")
    assert not (tmp_path / "f").exists()


def test_a_stage_plugin_is_a_command_with_its_own_run_folder(tmp_path, records):
    """A stage registered under ``curate.stages`` is ``curate NAME``: its options from its dataclass,
    its folder opened by the runner (run.json, resume), its row in ``curate report``."""
    env = install(tmp_path / "site", "stage")
    listed = run_curate("--help", env=env)
    _ok(listed)
    assert "sample" in listed.stdout
    helped = run_curate("sample", "--help", env=env)
    _ok(helped)
    assert "--in" in helped.stdout and "How many records to keep" in helped.stdout
    out = tmp_path / "s"
    proc = run_curate("sample", "--in", str(records), "--out", str(out), "--n", "4", env=env)
    _ok(proc)
    assert "sample: 4 of 6 records kept" in proc.stderr, "its funnel row is its summary (on the console, stderr)"
    kept = read_jsonl(out / "sampled.jsonl")
    assert len(kept) == 4 and len({r["id"] for r in kept}) == 4
    run = json.loads((out / "run.json").read_text())
    assert run["stage"] == "sample" and run["params"]["n"] == 4 and run["fingerprint"]
    again = run_curate("sample", "--in", str(records), "--out", str(out), "--n", "4", "--seed", "1", env=env)
    _ok(again)
    assert len(read_jsonl(out / "sampled.jsonl")) == 4 and json.loads((out / "run.json").read_text())["params"]["seed"] == 1
    report = run_curate("report", str(out), env=env)
    _ok(report)
    page = (out / "report.html").read_text(encoding="utf-8")
    assert '{"label":"kept","value":4,"key":"sample.records_kept"}' in page, "its funnel row, from its present()"
    bad = run_curate("sample", "--in", str(records), "--out", str(out), "--n", "0", env=env)
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
