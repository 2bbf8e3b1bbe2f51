"""``curate ablate`` on a tiny grid: real mining, export, training and evaluation, a few steps on
the CPU, on a small BEIR folder cut from SciFact (the full grid is a benchmark, not a test)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from curate.flows.ablate.grid import load_grid
from curate.flows.ablate.main import AblateOptions, run_ablate
from curate.datasets.beir import load_beir
from curate.core.errors import CurateError
from curate.core.stage import report_of
from tests.helpers import REPO, SHARED_DATA, assert_one_line_error, run_curate
from tests.mine_helpers import write_beir

GRID = """\
data: {data}
queries: 20
eval: {{data: {data}, split: test, light: false}}
budget: {{steps: 2, batch_size: 4, lr: 2.0e-5, max_seq_length: 48}}
seeds: [0, 1]
arms:
  base: {{kind: base}}
  st: {{kind: st, st: {{num_negatives: 2}}}}
  default: {{mine: {{k: 2}}}}
  same-as-default: {{mine: {{k: 2, method: percpos}}}}
  same-data: {{mine: {{k: 2}}, export: {{negatives_per_row: 2}}}}
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A BEIR folder: 30 train and 15 test SciFact claims, their abstracts and 50 others (every
    run's evaluation encodes the whole folder with the model it trained, so its size sets most of
    this module's time)."""
    tmp = tmp_path_factory.mktemp("ablate")
    train, test = load_beir(SHARED_DATA / "scifact", "train"), load_beir(SHARED_DATA / "scifact", "test")
    rng = random.Random(3)
    tq = rng.sample(sorted(train.qrels), 30)
    eq = rng.sample(sorted(test.qrels), 15)
    docs = {d for q in tq for d in train.qrels[q]} | {d for q in eq for d in test.qrels[q]}
    docs |= set(rng.sample(sorted(train.corpus), 50))
    folder = write_beir(tmp / "beir", {d: train.corpus[d] for d in sorted(docs)},
                        {**{q: train.queries[q] for q in tq}, **{q: test.queries[q] for q in eq}},
                        {q: train.qrels[q] for q in tq})
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q in eq for d, s in test.qrels[q].items()))
    grid = tmp / "grid.yaml"
    grid.write_text(GRID.format(data=folder))
    return {"tmp": tmp, "grid": grid, "folder": folder}


def _say(log):
    return lambda msg: log.append(msg)


@pytest.fixture(scope="module")
def finished(tiny):
    """The tiny grid run once, here, as a user would: its report, log and folder."""
    log: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CURATE_CACHE_DIR", str(tiny["tmp"] / "cache"))
        report = run_ablate(AblateOptions(grid=str(tiny["grid"]), out=str(tiny["tmp"] / "out"), say=_say(log)))
    return {"report": report, "log": log, "out": tiny["tmp"] / "out"}


def _stamps(out: Path, *stages: str) -> dict[Path, int]:
    """When each finished stage of these kinds (all: none named) wrote its report."""
    return {p: p.stat().st_mtime_ns for p in out.glob("*/*/report.json")
            if not stages or p.parent.parent.name in stages}


def test_tiny_grid_report_baseline_and_resume(tiny, finished, monkeypatch):
    import shutil

    monkeypatch.setenv("CURATE_CACHE_DIR", str(tiny["tmp"] / "cache"))
    out, log, report = finished["out"], list(finished["log"]), finished["report"]
    from curate.core.progress import quiet_bars

    assert quiet_bars(False) is False, "ablate quiets the bars while it runs, and puts them back"
    rows = {r["arm"]: r for r in report["summary"]}
    assert set(rows) == {"base", "st", "default", "same-as-default", "same-data"}
    assert rows["base"]["seeds"] == [0]  # the untrained model is evaluated once
    for arm in ("st", "default", "same-as-default", "same-data"):
        assert rows[arm]["seeds"] == [0, 1] and len(rows[arm]["values"]) == 2
        runs = report["runs"][arm]
        assert all(r["training"]["steps"] == 2 for r in runs)
        assert rows[arm]["vs_base"] == pytest.approx(rows[arm]["mean"] - rows["base"]["mean"])
        assert rows[arm]["vs_best_baseline"] == pytest.approx(rows[arm]["mean"] - rows["st"]["mean"])
    assert report["best_baseline"] == "st"
    (precision, scored), = report["precisions"].items()  # one machine, one precision: no warning
    assert precision in ("fp32", "int8", "bf16") and len(scored) == sum(len(r) for r in report["runs"].values())
    st_run, cur_run = report["runs"]["st"][0], report["runs"]["default"][0]
    assert st_run["training"]["order"] == "no-duplicates" and st_run["training"]["negatives_per_row"] == 2
    # curate's default export (--negatives-per-row auto): in this small corpus the teacher ranks most
    # labelled positives in its top 10, so each row carries every negative of its record (k=2)
    assert cur_run["training"]["order"] == "export" and cur_run["training"]["negatives_per_row"] == 2
    exports = [report_of(p) for p in (out / "export").iterdir()]
    auto = [e["negatives_per_row"] for e in exports if "negatives_per_row" in e]
    assert auto and all(a["chose"] == "all" and a["positive_in_teacher_top_10"] >= 0.5 for a in auto)
    # an arm whose options differ but whose export is the same file shares the fit: one training
    for twin, made in zip(report["runs"]["same-data"], report["runs"]["default"]):
        assert twin["stages"]["rows"] != made["stages"]["rows"]  # two exports...
        assert twin["stages"]["fit"] == made["stages"]["fit"] and twin["metrics"] == made["metrics"]  # ...one fit
        assert twin["training"]["data_sha256"] == made["training"]["data_sha256"]
    assert cur_run["training"]["rows"] <= 20 and st_run["training"]["rows"] <= 20  # the 20 sampled queries
    # the baseline's rows: sentence-transformers' miner on the same queries, one row per query
    st_rows = report["runs"]["st"][0]["training"]["rows"]
    assert 10 <= st_rows <= 20
    # two arms with equal options (one spelling a default) share every stage's folder: trained once
    assert report["runs"]["same-as-default"][0]["stages"] == report["runs"]["default"][0]["stages"]
    assert sum("arms default, same-as-default, same-data, seed" in m for m in log) == 2  # trained once per seed
    assert report["arms"]["same-as-default"]["same_as"] == ["default", "same-data"]
    assert (out / "ablate_report.json").is_file() and (out / "ablate.png").is_file()
    assert json.loads((out / "ablate_report.json").read_text())["summary"] == report["summary"]
    assert not list(out.glob("fit/*/model"))  # models are removed once evaluated

    # resume: nothing to do; then a cell killed before its fit finished resumes at its fit
    stamps = _stamps(out)
    log.clear()
    again = run_ablate(AblateOptions(grid=str(tiny["grid"]), out=str(out), say=_say(log)))
    assert log[0].startswith("0 run(s) to do") and again["summary"] == report["summary"]
    assert _stamps(out) == stamps
    lost = report["runs"]["st"][1]["stages"]
    shutil.rmtree(out / "fit" / lost["fit"])
    log.clear()
    third = run_ablate(AblateOptions(grid=str(tiny["grid"]), out=str(out), say=_say(log)))
    assert log[0].startswith("1 run(s) to do") and "arm st, seed 1" in log[1]
    kept = {p: t for p, t in stamps.items() if p.parent.name != lost["fit"]}
    assert {p: t for p, t in _stamps(out).items() if p in kept} == kept  # its rows and the rest: done earlier
    assert (out / "fit" / lost["fit"] / "report.json").is_file()  # its fit made again, in the same folder
    assert third["runs"]["st"][1]["stages"]["rows"] == lost["rows"]
    assert {r["arm"]: r["values"] for r in third["summary"]}["st"][1] == rows["st"]["values"][1]
    # the command line: --report gathers the finished runs into the table and trains nothing
    proc = run_curate("ablate", str(tiny["grid"]), "--out", str(out), "--report", "--arm", "st", timeout=300,
                      env={"CURATE_CACHE_DIR": str(tiny["tmp"] / "cache")})
    assert proc.returncode == 0, proc.stderr
    shown = proc.stdout + proc.stderr
    assert "0 run(s) to do" in shown and "same-as-default" in shown and "vs st" in shown
    assert f"report: {out / 'report.html'}" in shown  # the table and the plot as one page too
    assert "<td>same-as-default</td>" in (out / "report.html").read_text(encoding="utf-8")


@pytest.mark.bench
def test_runs_train_on_ray_workers_as_they_do_here(tiny, finished, monkeypatch):
    """--executor ray: the data is made once in the driver, every run trains and is evaluated on a
    Ray worker: the same training losses and figures as the runs made in this process."""
    import shutil

    from curate.core.executor import Executor

    pytest.importorskip("ray")
    monkeypatch.setenv("CURATE_CACHE_DIR", str(tiny["tmp"] / "cache"))
    here = finished["report"]
    out = tiny["tmp"] / "out-ray"
    shutil.copytree(finished["out"], out)
    for arm in ("st", "default"):  # as if these runs had never finished (same-data shares default's)
        for run in here["runs"][arm]:
            shutil.rmtree(out / "fit" / run["stages"]["fit"], ignore_errors=True)
    kept = _stamps(out, "eval")
    assert kept  # base's score stays
    data_made = _stamps(out, "mine", "export", "st")
    log: list[str] = []
    report = run_ablate(AblateOptions(grid=str(tiny["grid"]), out=str(out), say=_say(log),
                                      executor=Executor("ray", workers=2)))
    assert log[0].startswith("4 run(s) to do") and "training 4 run(s) on Ray workers, 2 at a time" in log
    assert sum(": ndcg@10 " in m for m in log) == 4
    assert {p: p.stat().st_mtime_ns for p in kept} == kept  # finished runs untouched
    assert _stamps(out, "mine", "export", "st") == data_made  # mined sets and exports reused
    assert [r["arm"] for r in report["summary"]] == [r["arm"] for r in here["summary"]]
    for arm in ("st", "default", "same-as-default", "same-data"):
        ray_runs, local_runs = report["runs"][arm], here["runs"][arm]
        assert [r["seed"] for r in ray_runs] == [0, 1]
        for a, b in zip(ray_runs, local_runs):
            assert a["stages"]["fit"] == b["stages"]["fit"] and a["training"]["rows"] == b["training"]["rows"]
            for k in ("first_loss", "last_loss"):  # the same training, step for step
                assert a["training"][k] == pytest.approx(b["training"][k], rel=1e-5)
            assert a["metrics"]["ndcg@10"] == pytest.approx(b["metrics"]["ndcg@10"], abs=1e-3)
    assert not list(out.glob("fit/*/model"))


def test_a_table_whose_runs_were_scored_at_two_precisions_says_which(tiny, finished, tmp_path, monkeypatch):
    """A folder whose runs were scored at two precisions (eval's auto precision is bf16 on one CPU,
    int8 on another; the odd one as a result carried over from an older report would be): the
    command's table and the page name the odd runs."""
    import shutil

    from curate.core.stage import MARKER
    from curate.core.hashing import file_digest
    from curate.flows.ablate.main import ablate_main

    monkeypatch.setenv("CURATE_CACHE_DIR", str(tiny["tmp"] / "cache"))
    out = tmp_path / "out"
    shutil.copytree(finished["out"], out)
    base_eval = out / "eval" / finished["report"]["runs"]["base"][0]["stages"]["eval"] / "report.json"
    scored = json.loads(base_eval.read_text())
    other = "int8" if scored["model"]["precision"] != "int8" else "bf16"
    scored["model"]["precision"] = other  # as the other machine would have scored it
    base_eval.write_text(json.dumps(scored))
    marker = base_eval.parent / MARKER  # and finished it: its marker names that report
    marker.write_text(json.dumps({**json.loads(marker.read_text()), "report": file_digest(base_eval)}))
    log: list[str] = []
    report = ablate_main(AblateOptions(grid=str(tiny["grid"]), out=str(out), report_only=True, say=_say(log)))
    assert report["precisions"][other] == ["base seed 0"]
    (warning,) = [m for m in log if m.startswith("warning: this table mixes")]
    assert f"{other}: base seed 0" in warning
    assert 'id="mixed-precision"' in (out / "report.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("text,needle", [
    ("arms: {a: {mine: {methd: naive}}}", "arm 'a' mine: unknown option 'methd'"),
    ("arms: {a: {mine: {margin: 0.9, relative_margin: 0.1}}}",
     "arm 'a' mine: --margin and --relative-margin are the same setting"),
    ("arms: {a: {export: {curriculum: mgh, seed: 3}}}", "'seed' is set by the grid itself"),
    ("arms: {a: {kind: st, st: {num_negative: 4}}}", "arm 'a' st: unknown option 'num_negative'"),
    ("arms: {a: {kind: nope}}", "kind 'nope'"),
    ("arms: {a: {kind: base, mine: {k: 2}}}", "belong to curate arms"),
    ("budget: {steps: 0}\narms: {a: {}}", "budget: steps must be at least 1"),
    ("budget: {step: 3}\narms: {a: {}}", "unknown option 'step'"),
    ("seeds: []\narms: {a: {}}", "seeds must be"),
    ("holdout: 1.5\narms: {a: {}}", "holdout must be a share between 0 and 1"),
    ("holdout: 0.5\neval: {split: test}\narms: {a: {}}", "leave eval's data and split out"),
    ("arms: {a: {train: {loss: kl}}}", "arm 'a' train: loss"),
    ("arms: {a: {train: {los: mnrl}}}", "unknown parameter 'los' (did you mean loss?)"),
    ("arms: {a: {kind: base, train: {loss: masked}}}", "train options belong to arms that train"),
    ("arms: {a: {kind: st, train: {loss: distill-kl}}}", "sentence-transformers' miner does not write"),
])
def test_grid_errors_name_the_file_and_write_nothing(tiny, text, needle):
    grid = tiny["tmp"] / "bad.yaml"
    grid.write_text(f"data: {tiny['folder']}\n{text}\n")
    with pytest.raises(CurateError) as e:
        load_grid(grid)
    assert needle in str(e.value) and str(grid) in str(e.value)
    with pytest.raises(CurateError) as e:  # what `curate ablate` runs, refused before it writes
        run_ablate(AblateOptions(grid=str(grid), out=str(tiny["tmp"] / "bad-out")))
    assert needle in str(e.value) and str(grid) in str(e.value)
    assert not (tiny["tmp"] / "bad-out").exists()


def test_grid_errors_are_one_line_on_the_command_line(tiny):
    """The command line prints a bad grid's error as its one line (an option's, a kind's and a
    budget's; every case above goes through the same refusal)."""
    for i, (text, needle) in enumerate([("arms: {a: {mine: {methd: naive}}}", "arm 'a' mine: unknown option 'methd'"),
                                        ("arms: {a: {kind: nope}}", "kind 'nope'"),
                                        ("budget: {steps: 0}\narms: {a: {}}", "budget: steps must be at least 1")]):
        grid = tiny["tmp"] / f"bad-cli-{i}.yaml"
        grid.write_text(f"data: {tiny['folder']}\n{text}\n")
        proc = run_curate("ablate", str(grid), "--out", str(tiny["tmp"] / "bad-out"), timeout=120)
        assert_one_line_error(proc, needle, str(grid))
        assert not (tiny["tmp"] / "bad-out").exists()


def test_holdout_trains_and_evaluates_on_disjoint_queries_of_one_split(tiny):
    """A collection that labels one split: ``holdout`` trains on some of its queries and the
    evaluation folder's qrels hold only the others, every judged line of each."""
    from curate.datasets.beir import read_qrels
    from curate.flows.ablate.arms import cell_steps
    from curate.flows.ablate.cells import run_steps

    grid_file = tiny["tmp"] / "holdout.yaml"
    grid_file.write_text(f"data: {tiny['folder']}\nsplit: train\nholdout: 0.25\narms: {{a: {{}}}}\n")
    grid = load_grid(grid_file)
    assert grid.eval_split == "train" and grid.holdout == 0.25
    work = tiny["tmp"] / "holdout-work"
    found = run_steps(cell_steps(grid, grid.arms[0], 0, work), work, upto="mine")
    trained = set(read_qrels(Path(found["queries"].out) / "qrels.tsv"))
    folder = Path(found["eval-data"].out)
    evaluated = read_qrels(folder / "qrels" / "train.tsv")
    everything = read_qrels(Path(tiny["folder"]) / "qrels" / "train.tsv")
    assert trained and evaluated and not trained & set(evaluated)
    assert trained | set(evaluated) == set(everything)
    assert len(evaluated) == round(0.25 * len(everything))
    assert all(evaluated[q] == everything[q] for q in evaluated)  # judged lines kept whole
    assert (folder / "corpus.jsonl").read_bytes() == (Path(tiny["folder"]) / "corpus.jsonl").read_bytes()


def test_shipped_grids_load(tiny, monkeypatch):
    """Every shipped grid loads; a grid whose set a bench script builds under runs/ (not in a clean
    checkout) is checked with the tiny BEIR folder standing in for that set."""
    from curate.flows.ablate import grid as grid_module

    built = grid_module._folder

    def folder(path, value, what):
        if isinstance(value, str) and Path(value).parts[:3] == ("..", "..", "runs"):
            return built(path, str(tiny["folder"]), what)
        return built(path, value, what)

    monkeypatch.setattr(grid_module, "_folder", folder)
    root = REPO / "bench" / "grids"
    paths = sorted(root.glob("*.yaml"))
    assert {"scifact.yaml", "nfcorpus.yaml", "scifact-corpus.yaml", "nfcorpus-relabel.yaml",
            "nq-utd-relabel.yaml"} <= {p.name for p in paths}
    for path in paths:
        grid = load_grid(path)
        names = {a.name for a in grid.arms}
        assert "base" in names, path.name
        assert grid.baselines == [a.name for a in grid.arms if a.kind == "st"], path.name
        if path.name in ("scifact.yaml", "nfcorpus.yaml"):  # the mining grids: sentence-transformers beside
            assert {"st-naive", "st-margin", "default"} <= names and grid.baselines == ["st-naive", "st-margin"]


def _cell(tiny, finished, arm, seed=0):
    """The arm's cell in the finished grid: its stages' placed options as far as they are done,
    and the label of the first that is not (None: the cell is finished)."""
    from curate.flows.ablate.arms import cell_steps
    from curate.flows.ablate.cells import walk

    grid, out = load_grid(tiny["grid"]), finished["out"]
    steps = cell_steps(grid, arm, seed, out)
    found, undone = walk(steps, out)
    return found, None if undone is None else steps[undone].label


def test_stage_folders_are_named_by_what_they_hold(tiny, finished, monkeypatch):
    """A mined set or export made under other options is never reused, and one made under equal
    options always is: folders are named by the stage's fingerprint (an empty arm and one spelling
    the defaults share one)."""
    from curate.flows.ablate.grid import Arm

    monkeypatch.setenv("CURATE_CACHE_DIR", str(tiny["tmp"] / "cache"))
    default = finished["report"]["runs"]["default"][0]["stages"]
    spelled, _ = _cell(tiny, finished, Arm("b", mine={"k": 2, "positive_top": 0, "method": "percpos"},
                                             export={"curriculum": "none"}))
    assert {k: v.out.rsplit("/", 1)[1] for k, v in spelled.items()} == default
    gated, undone = _cell(tiny, finished, Arm("c", mine={"k": 2, "positive_top": 10}))
    assert undone == "mine" and set(gated) == {"queries"}
    ordered, undone = _cell(tiny, finished, Arm("d", mine={"k": 2}, export={"curriculum": "ordered"}))
    assert undone == "rows" and ordered["mine"].out.endswith(default["mine"])


def test_an_arm_renamed_in_a_grid_keeps_its_results(tiny, finished, monkeypatch):
    monkeypatch.setenv("CURATE_CACHE_DIR", str(tiny["tmp"] / "cache"))
    grid = tiny["tmp"] / "renamed.yaml"
    grid.write_text(tiny["grid"].read_text().replace("  default:", "  renamed:"))
    log: list[str] = []
    report = run_ablate(AblateOptions(grid=str(grid), out=str(finished["out"]), say=_say(log)))
    assert log[0].startswith("0 run(s) to do")
    was = {r["arm"]: r["values"] for r in finished["report"]["summary"]}
    assert {r["arm"]: r["values"] for r in report["summary"]}["renamed"] == was["default"]
    run_ablate(AblateOptions(grid=str(tiny["grid"]), out=str(finished["out"]), report_only=True))


def test_an_option_added_later_if_set_leaves_finished_cells_done(tiny, finished, monkeypatch):
    """An option a stage gains later, marked ``"fingerprint": "if-set"``, names no folder anew while
    at its default: every finished cell stays done; an arm that sets it is a new cell."""
    import dataclasses

    from curate.core.stage import STAGES
    from curate.flows.ablate.grid import Arm

    monkeypatch.setenv("CURATE_CACHE_DIR", str(tiny["tmp"] / "cache"))
    mine = STAGES.get("mine")
    newer = dataclasses.make_dataclass("MineOptions", [("later", int, dataclasses.field(
        default=0, metadata={"fingerprint": "if-set"}))], bases=(mine.options,))
    monkeypatch.setitem(STAGES._entries, "mine", dataclasses.replace(mine, options=newer))
    report = run_ablate(AblateOptions(grid=str(tiny["grid"]), out=str(finished["out"]), report_only=True))
    assert {r["arm"]: r["values"] for r in report["summary"]} == {
        r["arm"]: r["values"] for r in finished["report"]["summary"]}
    found, undone = _cell(tiny, finished, Arm("x", mine={"k": 2, "later": 1}))
    assert undone == "mine"


def test_a_grid_run_before_cells_were_stages_shows_its_table(tmp_path):
    """The one-release reader: a shipped grid's finished results in the old layout
    (``grid-KEY/runs/KEY/seed-S.json``, issue 53's NQ-UTD grid) are the new table, nothing trained."""
    import shutil

    shutil.copytree(Path(__file__).parent / "data" / "ablate-legacy", tmp_path / "out")
    old = json.loads((tmp_path / "out" / "ablate_report.json").read_text())
    log: list[str] = []
    grid = REPO / "bench" / "grids" / "nq-utd-combined-loss.yaml"
    arms = tuple(r["arm"] for r in old["summary"])  # the grid's arms then (it has gained some since)
    report = run_ablate(AblateOptions(grid=str(grid), out=str(tmp_path / "out"), say=_say(log), arms=arms))
    assert log[0].startswith("0 run(s) to do")
    strip = ("title",)
    shown = [{k: v for k, v in r.items() if k not in strip} for r in report["summary"] if r["arm"] in arms]
    assert shown == old["summary"]
    assert all(r["legacy"] for runs in report["runs"].values() for r in runs)
    again = run_ablate(AblateOptions(grid=str(grid), out=str(tmp_path / "out"), report_only=True, arms=arms))
    assert again["summary"] == report["summary"]  # the old report is kept beside its runs


TRAIN_GRID = """\
data: {data}
queries: 20
eval: {{data: {data}, split: test, light: false}}
budget: {{steps: 2, batch_size: 4, lr: 2.0e-5, max_seq_length: 48}}
seeds: [0]
arms:
  contrastive: {{mine: {{k: 2}}, export: {{negatives_per_row: all}}}}
  kl: {{mine: {{k: 2}}, export: {{negatives_per_row: all}}, train: {{loss: distill-kl}}}}
  margins: {{mine: {{k: 2}}, export: {{negatives_per_row: all}}, train: {{loss: margin-mse}}}}
  masked: {{mine: {{k: 2}}, export: {{negatives_per_row: all}}, train: {{loss: masked}}}}
  both: {{mine: {{k: 2}}, export: {{negatives_per_row: all}}, train: {{loss: mnrl+distill-kl}}}}
"""


@pytest.mark.bench
def test_losses_train_on_the_exports_teacher_scores(tiny, monkeypatch):
    """One export trained five ways: each arm trains with its own loss (the distillation ones on the
    export's ``label`` column, the teacher's scores), none is taken for another's run though all
    read the same bytes, and each model is evaluated; the combined loss is the sum of its parts."""
    import pyarrow.parquet as pq

    monkeypatch.setenv("CURATE_CACHE_DIR", str(tiny["tmp"] / "cache"))
    grid = tiny["tmp"] / "losses.yaml"
    grid.write_text(TRAIN_GRID.format(data=tiny["folder"]))
    report = run_ablate(AblateOptions(grid=str(grid), out=str(tiny["tmp"] / "losses-out"), say=lambda _: None))
    runs = {arm: rs[0] for arm, rs in report["runs"].items()}
    assert {a: r["training"]["loss"] for a, r in runs.items()} == {
        "contrastive": "mnrl", "kl": "distill-kl", "margins": "margin-mse", "masked": "masked",
        "both": "mnrl+distill-kl"}
    assert len({r["training"]["data_sha256"] for r in runs.values()}) == 1  # one export
    assert len({r["stages"]["fit"] for r in runs.values()}) == 5  # ... trained five times
    first = {a: r["training"]["first_loss"] for a, r in runs.items()}
    assert len(set(first.values())) == 5
    # the same seed, rows and first forward pass: the combined loss starts at the contrastive loss
    # plus the KL without sentence-transformers' T^2 factor (issue 53: with it the KL part was
    # 2,500 times too small to act), at the default weight 1 and temperature 0.05
    assert first["both"] == pytest.approx(first["contrastive"] + first["kl"] / 0.05 ** 2, rel=2e-3)
    assert all(r["training"]["steps"] == 2 and r["metrics"]["ndcg@10"] > 0 for r in runs.values())
    # the rows they read carry the teacher's scores, the positive's first, one per text
    (export,) = {p.parent for p in (tiny["tmp"] / "losses-out").glob("export/*/data/train-*.parquet")}
    table = pq.read_table(next(export.glob("train-*.parquet"))).to_pylist()
    negatives = sorted(c for c in table[0] if c.startswith("negative_"))
    assert negatives and all(len(r["label"]) == 1 + len(negatives) for r in table)
    assert sum(r["label"][0] > max(r["label"][1:]) for r in table) > len(table) / 2
    # a second run finds every arm done
    again = run_ablate(AblateOptions(grid=str(grid), out=str(tiny["tmp"] / "losses-out"), say=lambda _: None))
    assert again["summary"] == report["summary"]


def test_data_given_on_the_command_line_replaces_the_grids(tmp_path):
    """A shipped grid names the copy the tests use (../shared/data); a fresh clone has its own,
    fetched by `curate data get`: --data points the same grid at it, for training and evaluation."""
    grid = tmp_path / "grids" / "g.yaml"
    grid.parent.mkdir()
    grid.write_text("data: ../../nowhere/nfcorpus\nsplit: train\neval: {data: ../../nowhere/nfcorpus, split: test}\n"
                    "arms:\n  base: {kind: base}\n", encoding="utf-8")
    with pytest.raises(CurateError, match="curate data get nfcorpus"):
        load_grid(grid)
    mine = write_beir(tmp_path / "datasets" / "nfcorpus", {"d1": "a text"}, {"q1": "a query"}, {"q1": {"d1": 1}})
    got = load_grid(grid, str(mine))
    assert got.data == got.eval_data == str(mine.resolve())
    proc = run_curate("ablate", str(grid), "--out", str(tmp_path / "a"), "--data", str(tmp_path / "missing"))
    assert_one_line_error(proc, "missing")
