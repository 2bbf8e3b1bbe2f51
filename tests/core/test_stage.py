"""The stage contract: one fingerprint, one report name, skip what is done, one way of printing."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from curate.convert.main import STAGE as CONVERT, ConvertOptions
from curate.core.stage import DONE, MARKER, RAN, REPORT, STARTED, Stage, fingerprint, report_of, run_stage
from curate.core.stage import _identity as stage_identity

LABELLED = [("the striker scored twice", "sport"), ("the keeper saved a penalty", "sport"),
            ("the match ended in a draw", "sport"), ("rates rose by half a point", "economy"),
            ("the central bank held rates", "economy"), ("inflation slowed in spring", "economy")]


@pytest.fixture
def labelled(tmp_path: Path) -> Path:
    path = tmp_path / "labelled.jsonl"
    path.write_text("".join(json.dumps({"text": t, "label": lab}) + "\n" for t, lab in LABELLED))
    return path


def _opts(inp: Path, out: Path, **kw) -> ConvertOptions:
    return ConvertOptions(**{"kind": "classification", "inp": str(inp), "out": str(out), "random_negatives": True,
                             "negatives": 2, **kw})


def test_every_shipped_stage_declares_the_contract():
    from curate.export.main import STAGE as EXPORT
    from curate.filter.main import STAGE as FILTER
    from curate.generate.stage import BRAINSTORM, STAGE as GENERATE
    from curate.mine.main import STAGE as MINE

    for stage in (BRAINSTORM, GENERATE, FILTER, MINE, EXPORT, CONVERT):
        assert isinstance(stage, Stage)
        names = {f.name for f in dataclasses.fields(stage.options)}
        assert "out" in names and set(stage.reads) <= names, stage.name
        assert stage.summary is not None, f"{stage.name} prints through the runner"
    assert [s.writes.get("records") for s in (BRAINSTORM, GENERATE, FILTER, MINE, CONVERT)] == \
        ["tasks.jsonl", "generated.jsonl", "filtered.jsonl", "mined.jsonl", "converted.jsonl"]


def test_the_fingerprint_follows_data_changing_options_and_input_bytes_not_paths(labelled, tmp_path):
    base = fingerprint(CONVERT, _opts(labelled, tmp_path / "a"))
    assert fingerprint(CONVERT, _opts(labelled, tmp_path / "b")) == base, "another --out is the same run"
    moved = tmp_path / "moved.jsonl"
    shutil.copy(labelled, moved)
    assert fingerprint(CONVERT, _opts(moved, tmp_path / "a")) == base, "a moved input with the same bytes"
    assert fingerprint(CONVERT, _opts(labelled, tmp_path / "a", seed=1)) != base, "another seed"
    assert fingerprint(CONVERT, _opts(labelled, tmp_path / "a", negatives=3)) != base
    moved.write_text(moved.read_text() + json.dumps({"text": "a new one", "label": "sport"}) + "\n")
    assert fingerprint(CONVERT, _opts(moved, tmp_path / "a")) != base, "edited input bytes"


def test_how_the_work_runs_is_not_part_of_the_fingerprint():
    from curate.filter.main import STAGE as FILTER, FilterOptions
    from curate.llm.backend import LLMOptions

    a = FilterOptions(inp="x", out="y", llm=LLMOptions(timeout=10.0, cache="one.sqlite", api_key="k1"))
    b = FilterOptions(inp="x", out="y", llm=LLMOptions(timeout=99.0, cache="two.sqlite", api_key="k2"))
    assert fingerprint(FILTER, a) == fingerprint(FILTER, b)
    c = FilterOptions(inp="x", out="y", llm=LLMOptions(model="another"))
    assert fingerprint(FILTER, c) != fingerprint(FILTER, a), "another judge model is another run"


def test_an_option_marked_if_set_leaves_runs_that_do_not_use_it_as_they_were():
    """An option added later (generate's --languages) must not turn every folder begun before it
    into another run: at its default it is not in the fingerprint, set it is."""
    @dataclasses.dataclass(kw_only=True)
    class Before:
        out: str
        seed: int = 0

    @dataclasses.dataclass(kw_only=True)
    class After(Before):
        languages: str | None = dataclasses.field(default=None, metadata={"fingerprint": "if-set"})

    stage = Stage("demo", Before, lambda opts, run: {})
    assert fingerprint(stage, After(out="o")) == fingerprint(stage, Before(out="o"))
    assert fingerprint(stage, After(out="o", languages="de")) != fingerprint(stage, Before(out="o"))
    from curate.generate.stage import STAGE as GENERATE, GenerateOptions

    plain = GenerateOptions(out="o", tasks=("short-long",))
    assert "languages" not in json.dumps(stage_identity(GENERATE, plain))
    assert fingerprint(GENERATE, plain) != fingerprint(GENERATE, dataclasses.replace(plain, languages="en,de"))


def test_run_stage_writes_one_report_name_and_skips_a_finished_run(labelled, tmp_path, capsys):
    out = tmp_path / "conv"
    report, state = run_stage(CONVERT, _opts(labelled, out), resume=True)
    assert state == RAN and report_of(out) == report
    assert (out / REPORT).is_file() and (out / "report.json").is_file(), "the old name, as a copy"
    assert json.loads((out / MARKER).read_text())["fingerprint"] == fingerprint(CONVERT, _opts(labelled, out))
    assert f"{report['records']} records in {out / 'converted.jsonl'}" in capsys.readouterr().err
    before = (out / "converted.jsonl").stat().st_mtime_ns
    again, state = run_stage(CONVERT, _opts(labelled, out), resume=True)
    assert state == DONE and again == report
    assert (out / "converted.jsonl").stat().st_mtime_ns == before, "nothing rewritten"
    assert "convert: done earlier" in capsys.readouterr().err
    _, state = run_stage(CONVERT, _opts(labelled, out, seed=7), resume=True)
    assert state == RAN, "another seed runs again"
    (out / REPORT).write_text("{}")
    _, state = run_stage(CONVERT, _opts(labelled, out, seed=7), resume=True)
    assert state == RAN, "a report that is not the one the marker names is not trusted"


def test_a_placed_run_hashes_each_input_once(labelled, tmp_path, monkeypatch):
    """``placed`` names the folder by the inputs' bytes and ``run_stage`` keys and records the run
    by them: handed the same digests, the two read each input once, and name it alike."""
    import curate.core.stage as stage_module
    from curate.core.stage import placed

    read: list[str] = []
    real = stage_module.tree_digest
    monkeypatch.setattr(stage_module, "tree_digest", lambda path: read.append(str(path)) or real(path))
    hashed: dict = {}
    opts = placed(CONVERT, _opts(labelled, ""), tmp_path, hashed)
    run_stage(CONVERT, opts, resume=True, quiet=True, hashed=hashed)
    assert read == [str(labelled)]
    assert Path(opts.out).name == json.loads((Path(opts.out) / MARKER).read_text())["fingerprint"][:12]
    assert json.loads((Path(opts.out) / "run.json").read_text())["inputs"][0]["sha256"] == real(labelled)[0]


def test_without_resume_a_stage_always_runs(labelled, tmp_path):
    out = tmp_path / "conv"
    run_stage(CONVERT, _opts(labelled, out), quiet=True)
    _, state = run_stage(CONVERT, _opts(labelled, out), quiet=True)
    assert state == RAN


def test_an_appending_stage_starts_afresh_when_its_fingerprint_changes(labelled, tmp_path):
    """A resumed run may only add to what a run with the same fingerprint began: another seed's
    records never mix with the last run's."""
    calls = []

    def run(opts, run):
        assert run.dir == Path(opts.out), "an appending stage writes into its folder itself, not staged"
        with run.path("rows.jsonl").open("a") as fh:  # appends, as generate does
            fh.write(json.dumps({"seed": opts.seed}) + "\n")
        calls.append(opts.seed)
        return {"seed": opts.seed}

    appending = Stage("appender", ConvertOptions, run, reads=("inp",), writes={"records": "rows.jsonl"}, appends=True)
    out = tmp_path / "app"
    run_stage(appending, _opts(labelled, out), resume=True, quiet=True)
    assert json.loads((out / STARTED).read_text())["fingerprint"] == fingerprint(appending, _opts(labelled, out))
    run_stage(appending, _opts(labelled, out, seed=5), resume=True, quiet=True)
    assert [json.loads(x)["seed"] for x in (out / "rows.jsonl").read_text().splitlines()] == [5]
    (out / MARKER).unlink()  # as if the seed-5 run had been killed before it finished
    run_stage(appending, _opts(labelled, out, seed=5), resume=True, quiet=True)
    assert [json.loads(x)["seed"] for x in (out / "rows.jsonl").read_text().splitlines()] == [5, 5], \
        "the same fingerprint resumes: nothing cleared"
    assert calls == [0, 5, 5]


def test_only_the_runner_opens_runs_and_report_and_export_import_no_other_stage():
    """The contract's import graph (docs: Run folders, "Who knows the stages"), as
    ``bench/stage_imports.py`` draws it: a stage module opening its own run folder, or report/ or
    export/ reaching into another stage's package, is the drift this contract removed."""
    import importlib.util

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("stage_imports", root / "bench" / "stage_imports.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    edges, open_run = module.graph(root)
    assert open_run == []
    assert module.own_runs(root) == [], "no lock taken nor run named by content outside core/"
    assert not edges.get("report") and not edges.get("export")
    assert "generate" in edges["cli"], "the graph does see imports (the CLI imports generate)"


def test_a_chains_preflight_leaves_out_the_inputs_an_earlier_stage_will_write(tmp_path):
    """The pipeline checks export before holdout has written the held-out folder export reads:
    that folder is an earlier stage's, so it is not looked for yet; any other path still is."""
    from curate.core.errors import CurateError
    from curate.core.stage import preflight
    from curate.export.main import STAGE as EXPORT

    held = tmp_path / "run" / "holdout"
    opts = EXPORT.options(inputs=(str(tmp_path / "run" / "mine" / "mined.jsonl"),), out=str(tmp_path / "run" / "export"),
                          decontaminate=(f"{held / 'eval'}:test",))
    with pytest.raises(CurateError, match="not a BEIR folder"):
        preflight(EXPORT, opts)
    preflight(EXPORT, opts, made=[tmp_path / "run" / "mine", held])
    elsewhere = dataclasses.replace(opts, decontaminate=(str(tmp_path / "elsewhere"),))
    with pytest.raises(CurateError, match="not a BEIR folder"):
        preflight(EXPORT, elsewhere, made=[held])


def test_the_stage_that_builds_records_from_a_dataset_says_which_they_are():
    """Mine declares the ``meta["source"]`` values it writes on records built from a dataset;
    export reads them from the stages, not from a list of its own."""
    from curate.core.stage import dataset_sources
    from curate.mine.inputs import DATASET_KINDS

    assert dataset_sources() == frozenset(DATASET_KINDS) == {"beir", "pairs", "hf"}


def test_each_stage_says_where_its_report_keeps_its_llm_calls():
    """The report page's cost row reads a stage's LLM numbers through the stage (``Stage.usage``):
    generate's per-family blocks (its totals not counted twice), the judges' calls in filter."""
    from curate.core.stage import STAGES

    generate = {"families": {"a": {"tokens": {"prompt": 3, "completion": 4}, "requests_sent": 2, "cost": 0.5}},
                "totals": {"tokens": {"prompt": 3, "completion": 4}, "requests_sent": 2}}
    assert STAGES.get("generate").usage(generate) == {"requests": 2, "prompt": 3, "completion": 4, "cost": 0.5,
                                                      "estimate": None}
    # the brainstorm runs generate ran for a family count too, once each
    generate["families"]["a"]["brainstorm"] = {"tokens": {"prompt": 10, "completion": 20}, "requests_sent": 1,
                                               "cost": 0.25, "estimate": {"seconds": 3}}
    assert STAGES.get("generate").usage(generate) == {"requests": 3, "prompt": 13, "completion": 24, "cost": 0.75,
                                                      "estimate": 3.0}
    assert STAGES.get("brainstorm").usage({"families": {"a": generate["families"]["a"]["brainstorm"]}})["requests"] == 1
    judged = {"steps": [{"notes": {"tokens": {"prompt": 1, "completion": 1}, "judge_calls": 5,
                                   "estimate": {"seconds": 2}}}, {"notes": {"kept": 3}}]}
    for name in ("filter", "relabel"):
        assert STAGES.get(name).usage(judged) == {"requests": 5, "prompt": 1, "completion": 1, "cost": None,
                                                  "estimate": 2.0}
    assert STAGES.get("mine").usage is None


def test_a_chain_whose_stage_misses_a_record_field_is_one_line_before_anything_runs(tmp_path):
    """Each stage declares the record fields it needs and adds; the pipeline checks its chain first.
    Relabel judges mined negatives: without mine before it, the run stops before generate starts."""
    from curate.core.errors import CurateError
    from curate.core.stage import STAGES, check_chain
    from curate.flows.pipeline import PipelineOptions, stages

    opts = PipelineOptions(docs="data/demo", out=str(tmp_path / "run"), relabel=True)
    chain = [stage for stage, _ in stages(opts, opts.llm, tmp_path / "run")]
    check_chain(chain)  # the shipped chain: every field is added before it is needed
    without_mine = [s for s in chain if s.name != "mine"]
    with pytest.raises(CurateError) as e:
        check_chain(without_mine)
    assert str(e.value) == ("relabel needs the records' negatives, which no stage before it (generate, filter, "
                            "holdout) adds: put a stage that adds it before relabel, or leave relabel out")
    assert STAGES.get("export").needs == ("query", "positive")


def test_the_pipeline_checks_its_chain_before_its_first_stage(tmp_path, monkeypatch):
    from curate.core.errors import CurateError
    from curate.core.stage import STAGES
    from curate.flows.pipeline import PipelineOptions, run_pipeline

    relabel = STAGES.get("relabel")
    monkeypatch.setitem(STAGES._entries, "relabel", dataclasses.replace(relabel, needs=(*relabel.needs, "verdicts")))
    docs = Path(__file__).resolve().parents[2] / "data" / "demo"
    with pytest.raises(CurateError) as e:
        run_pipeline(PipelineOptions(docs=str(docs), out=str(tmp_path / "run"), relabel=True, report=False))
    assert "\n" not in str(e.value) and str(e.value).startswith("relabel needs the records' verdicts, which no stage")
    assert not (tmp_path / "run").exists()  # nothing started: no folder, no model, no request
