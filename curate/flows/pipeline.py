"""``curate pipeline DOCS --out RUN``: documents in, training data out, in one command.

Users with documents and no labelled queries would otherwise run five commands and wire their
files together by hand. The pipeline is a list of stages, each run by the one stage runner
(``curate.core.stage.run_stage``) in a sub-folder of RUN: ``generate/`` (a query per sampled
passage), ``filter/`` (the recipe, with the passages as the round trip's corpus), ``mine/``
(hard negatives from the same passages), ``relabel/`` (only with ``relabel=True``: an LLM judge
looks again at the mined negatives) and ``export/``. Each stage reads the one before it through
the contract (its product, its corpus), never by file name. At the end it prints the funnel,
where the records went and why, and writes it to ``RUN/pipeline.json``.

Re-running resumes: a stage whose fingerprint (its options and the bytes of its inputs) matches
its finished run is "done earlier"; anything else runs again. Generate finishes what it has not
done (its own resume), and starts afresh when its fingerprint changed (another seed, count,
task or model), so two runs' records never mix. The stages write through their run folders
(staged and swapped in whole, see ``curate.core.runner``), so a kill leaves the last whole
output or none, never half of one.

A re-run that stops early (generate fails, a stage keeps nothing) leaves the earlier run's later
stages in their folders, but not as this run's: ``pipeline.json`` names the stages the latest run
is made of and those it reached (``members``), so every reader of the run (``curate train``,
``curate report``, an export's ``--in``) finds such a folder to be an earlier run's
(``curate.core.stage.stale_reason``). A stage that re-runs with other options or inputs keeps the
finished run it replaces in ``RUN/.curate-replaced/<stage>/`` first, and says so.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rich.markup import escape

from curate.core.errors import CurateError
from curate.core.jsonl import atomic_write_json
from curate.core.stage import DONE, STAGES, Stage, check_chain, preflight, report_of, run_stage
from curate.llm.options import LLMOptions
from curate.core.progress import console
from curate.holdout.main import HoldoutOptions
from curate.mine.options import MineOptions

MINE_SCORES = MineOptions.__dataclass_fields__["scores"]  # declared once, by mine
HOLDOUT_SHARE = HoldoutOptions.__dataclass_fields__["share"]  # declared once, by holdout
MINE_PROMOTE = MineOptions.__dataclass_fields__["promote_top"]  # declared once, by mine
# generate --copy-retries when the sample is the whole corpus (``copy_retries``); asked twice, the
# bundled model stopped copying on most of its copies (docs: Pipeline, "The demo's held-out set")
WHOLE_CORPUS_COPY_RETRIES = 2

RELABEL = "relabel"  # the recipe the relabel stage runs, and its folder
FUNNEL = "pipeline.json"
# The stages this flow chains, in order, each in a folder of its name; ``stages`` wires their
# options. An optional one (holdout, relabel) that a run leaves out keeps its place in the funnel
# as None, and says in one line how to have it, when it has such a line (``OFF``).
CHAIN = ("generate", "filter", "holdout", "mine", RELABEL, "export")
OFF = {RELABEL: "off (--relabel asks an LLM judge about the mined negatives)"}


@dataclass(kw_only=True)
class PipelineOptions:
    # a BEIR folder, a corpus JSONL, a folder of .txt/.md/.html, or one such file
    docs: str = field(metadata={"argument": True, "path": "any"})
    out: str = field(metadata={
        "path": "dir",
        "help": "Run folder: generate/, filter/, mine/, relabel/, export/ and pipeline.json (re-run to resume)."})
    n: int = field(default=200, metadata={  # passages sampled; one query each
        "flag": "--num-examples", "short": "-n", "min": 1,
        "help": "Passages sampled with --seed, one query each (the bundled CPU model takes about 2 s a "
                "passage on 2 idle cores, tens of seconds on busy ones; a server takes thousands)."})
    seed: int = field(default=0, metadata={"help": "Seed for every per-item draw."})
    llm: LLMOptions = field(default_factory=LLMOptions)  # generate's backend, and relabel's judge
    # or from-corpus-multihop (queries over 2-3 related passages), or a spec file
    task: str = field(default="from-corpus", metadata={
        "help": "The query-writing spec: from-corpus (one passage a query), from-corpus-multihop (a query "
                "over 2-3 related passages, each a positive) or a spec file with inputs: [positive]."})
    recipe: str = field(default="from-corpus", metadata={
        "help": "Filter recipe: a shipped name or a recipe YAML file."})
    # None: follows from the corpus (copy_retries below); a number is passed to generate, whose
    # options declare its range (not imported here: generate's module brings the LLM client)
    copy_retries: int | None = field(default=None, metadata={
        "help": "Ask the LLM again, up to N times, when its query copies its passage (generate --copy-retries)  "
                f"[default: {WHOLE_CORPUS_COPY_RETRIES} when -n samples every passage of DOCS, where a copy the "
                "filter drops is a passage, and maybe a document, without a query; else 0: another passage "
                "takes its place]."})
    relabel: bool = field(default=False, metadata={  # off until measured
        "flag": "--relabel/--no-relabel",
        "help": "Have an LLM judge relabel the mined negatives before export (off: the bundled model is too "
                "weak a judge; use a real one behind --base-url)."})
    # filter's and mine's teacher (default: the recipe's / the bundled one)
    teacher: str | None = field(default=None, metadata={
        "help": "Teacher embedding model for filter and mine  [default: the recipe's, else the bundled "
                "all-MiniLM-L6-v2]."})
    # what the mined records' scores are: the export's `label`, the student's distillation target. Hybrid
    # here (mine's default is the teacher's cosine): with no labels, the contrastive loss on generated
    # queries trained the student below its untrained self, and distillation on hybrid scores above it
    # (docs: Benchmarks, "A stronger teacher, and training on its scores")
    scores: Literal["teacher", "hybrid"] = field(default="hybrid", metadata={
        **MINE_SCORES.metadata})
    # off, as in mine: it lifted two shipped sets and lowered the third (docs: Benchmarks, "The
    # teacher's favourite as the positive"); here so a user's own held-out set can decide
    promote_top: float | None = field(default=None, metadata={**MINE_PROMOTE.metadata})
    formats: tuple[str, ...] = field(default=("sentence-transformers",), metadata={
        "flag": "--format", "help_names": {"formats": "curate.export.formats:in_order"},
        "help": "Export format, as curate export takes it ({formats}, or all); repeatable."})
    # the export card's licence: the user's documents have no known one
    license: str | None = field(default=None, metadata={
        "metavar": "ID",
        "help": "The export card's licence, a Hub id such as cc-by-4.0: the one your documents are under."})
    plots: bool = field(default=True, metadata={"help": "Write filter's and mine's plots."})
    # a share of the documents set aside as a BEIR evaluation set (RUN/holdout/eval), for curate train
    eval_share: float = field(default=HOLDOUT_SHARE.default, metadata={
        **HOLDOUT_SHARE.metadata,
        "help": "Share of the documents held out, their filtered queries written as a BEIR folder "
                "(RUN/holdout/eval) that curate train scores the model on; none go to training (0: off)."})
    eval_seed: int | None = field(default=None, metadata={
        "help": "Which documents are held out (default: --seed); another split of the same queries."})
    report: bool = field(default=True, metadata={  # the page is a view of the run: asking for it is the same run
        "fingerprint": False,
        "help": "Write RUN/report.html at the end: the funnel, time and cost, charts and a record browser."})
    prompts_dirs: tuple[str, ...] = field(default=(), metadata={
        "flag": "--prompts-dir", "path": "dir",
        "help": "Extra folder of Jinja templates, searched before the shipped prompts/."})


def check(opts: PipelineOptions) -> None:
    """Every stage's options, checked by the stage itself, before the first one starts."""
    if opts.n < 1:
        raise CurateError(f"-n must be at least 1, got {opts.n}")
    out, docs = Path(opts.out), Path(opts.docs)
    text_folder = docs.is_dir() and not (docs / "corpus.jsonl").is_file()
    if text_folder and docs.resolve() in (out.resolve(), *out.resolve().parents):
        raise CurateError(f"--out {out} lies inside DOCS {docs}: a re-run would read its files as documents")
    chain = stages(opts, opts.llm, out)
    check_chain([stage for stage, _ in chain])  # each stage finds the record fields it needs
    made: list[str] = []  # the folders of the stages before: what they write is not there yet
    for stage, stage_opts in chain:
        preflight(stage, stage_opts, made=made)
        made.append(stage_opts.out)


def pipeline_stage(opts: PipelineOptions, run) -> dict[str, Any]:
    """Run (or resume) every stage; write the funnel (``pipeline.json``) as each one finishes, so a
    run killed half way still says what it did; return the run's report: its stages and where it
    stopped."""
    from curate.datasets.documents import read_documents

    docs = read_documents(opts.docs)  # bad input is one line here, before any stage's folder or model
    out = Path(opts.out)
    llm = opts.llm.cache_in(out)

    def progress(states, reports, stop=None, finished=False):
        funnel = build_funnel(opts, docs, states, reports, stop)
        funnel["finished"] = finished
        funnel["fingerprint"] = run.fingerprint
        atomic_write_json(out / FUNNEL, funnel)
        return funnel

    states, reports, stop = _run_stages(opts, llm, out, progress, len(docs.passages))
    run.counts.update({name: states[name] for name in states})
    progress(states, reports, stop, finished=True)
    return {"stages": states, "stopped": stop, "funnel": FUNNEL}  # the run's report; the funnel is its own file


def run_pipeline(opts: PipelineOptions) -> dict[str, Any]:
    """Run (or resume) every stage through the stage runner, then print and return the funnel."""
    run_stage(PIPELINE, opts, quiet=True)
    out = Path(opts.out)
    funnel = json.loads((out / FUNNEL).read_text(encoding="utf-8"))
    chain = [stage for stage, _ in stages(opts, opts.llm, out)]
    print_funnel(funnel, chain)
    if opts.report:
        from curate.report import write_report

        console.print(f"  [bold]{'report':<9}[/bold] {escape(str(write_report(out)))}", soft_wrap=True)
    if funnel["stopped"]:  # the funnel above says where the records went
        raise CurateError(funnel["stopped"])
    for i, line in enumerate(next_steps(out, opts.report, chain[-1].name)):
        console.print(f"  [bold]{'next' if i == 0 else '':<9}[/bold] {escape(line)}", soft_wrap=True)
    return funnel


def next_steps(out: Path, report: bool, last: str = CHAIN[-1]) -> list[str]:
    """What a person does with a finished run, in the order they would (``last``: the folder of
    the chain's last stage, the training data)."""
    export = out / last
    steps = [f"open {out / 'report.html'} in a browser: every record kept or dropped, and why" if report
             else f"curate report {out}: one page with every record kept or dropped, and why",
             f"curate train {out}: the bundled MiniLM (or --base MODEL) fine-tuned on {export}, scored before and "
             "after (--eval DATA: a labelled BEIR folder); or train yourself: its README.md has the code",
             "your own documents: curate pipeline DOCS --out RUN, with a real LLM via --base-url URL --model NAME "
             "(docs/your-documents.md)"]
    return [f"{i}. {step}" for i, step in enumerate(steps, 1)]


def copy_retries(opts: PipelineOptions, passages: int | None) -> dict[str, int]:
    """Generate's ``copy_retries``, as keyword arguments: as given, else
    ``WHOLE_CORPUS_COPY_RETRIES`` when ``-n`` takes every one of the corpus's ``passages``, else
    none (generate's default; ``passages`` None: not read yet). With passages to spare a dropped
    copy costs a row, and asking again trained no better (docs: Benchmarks); when every passage
    is sampled it costs the passage, and on a small folder the documents the held-out set needs."""
    if opts.copy_retries is not None:
        return {"copy_retries": opts.copy_retries}
    whole = passages is not None and opts.n >= passages
    return {"copy_retries": WHOLE_CORPUS_COPY_RETRIES} if whole else {}


def stages(opts: PipelineOptions, llm: LLMOptions, out: Path, passages: int | None = None) -> list[tuple[Stage, Any]]:
    """The stages in order, each with its options; a stage reads the one before it through the
    contract (``Stage.path``), so nothing here knows a stage's file names or imports its module.
    ``passages``: the corpus's passages, once read (``copy_retries``)."""
    generate, filter_, holdout, mine, relabel, export = (STAGES.get(name) for name in CHAIN)
    gen = out / generate.name
    corpus = str(generate.path(gen, "corpus"))
    steps: list[tuple[Stage, Any]] = [
        (generate, generate.options(out=str(gen), corpus=opts.docs, n=opts.n, seed=opts.seed, llm=llm,
                                    tasks=(opts.task,), prompts_dirs=tuple(opts.prompts_dirs),
                                    **copy_retries(opts, passages))),
        (filter_, filter_.options(inp=str(generate.path(gen)), out=str(out / filter_.name), corpus=corpus, llm=llm,
                                  recipe=opts.recipe, teacher=opts.teacher, plots=opts.plots,
                                  prompts_dirs=tuple(opts.prompts_dirs))),
    ]
    records = str(filter_.path(out / filter_.name))
    decontaminate: tuple[str, ...] = ()
    if opts.eval_share > 0:  # documents set aside before mining: no held-out passage becomes a negative
        held = out / holdout.name
        # and export drops a training query that near-copies a held-out one; its card counts the set
        decontaminate = (f"{holdout.path(held, 'eval')}:test",)
        steps.append((holdout, holdout.options(inp=records, corpus=corpus, out=str(held), share=opts.eval_share,
                                               seed=opts.seed if opts.eval_seed is None else opts.eval_seed)))
        records, corpus = str(holdout.path(held)), str(holdout.path(held, "corpus"))
    steps.append((mine, mine.options(out=str(out / mine.name), records=records, corpus=corpus,
                                     teachers=(opts.teacher,) if opts.teacher else (), seed=opts.seed,
                                     plots=opts.plots, scores=opts.scores, promote_top=opts.promote_top)))
    if opts.relabel:
        steps.append((relabel, relabel.options(inp=str(mine.path(out / mine.name)), out=str(out / RELABEL),
                                               recipe=RELABEL, llm=llm, plots=opts.plots,
                                               prompts_dirs=tuple(opts.prompts_dirs))))
    last_stage, last_opts = steps[-1]
    steps.append((export, export.options(inputs=(str(last_stage.path(last_opts.out)),), out=str(out / export.name),
                                         formats=tuple(opts.formats), seed=opts.seed, license=opts.license,
                                         decontaminate=decontaminate)))
    return steps


def _run_stages(opts: PipelineOptions, llm: LLMOptions, out: Path, progress, passages: int):
    """Each stage's state (ran / done earlier), its report, and why the run stopped early (None:
    it did not): a stage whose product holds no record leaves nothing for the next one. The
    funnel is written (``progress``) before the first stage and after each one."""
    states: dict[str, str] = {}
    reports: dict[str, tuple[Stage, dict[str, Any]]] = {}
    steps = stages(opts, llm, out, passages)
    progress(states, reports)
    for i, (stage, stage_opts) in enumerate(steps):
        report, states[stage.name] = run_stage(stage, stage_opts, resume=True)
        reports[stage.name] = (stage, report)
        progress(states, reports)
        if i + 1 < len(steps) and not _holds_records(stage.path(stage_opts.out)):
            why = stage.path(stage_opts.out, "drops")
            return states, reports, f"{stage.name} left no record for {steps[i + 1][0].name} (why: {why})"
    return states, reports, None


def _holds_records(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return any(line.strip() for line in fh)
    except OSError:
        return False


# ----------------------------------------------------------------------------- the funnel


def build_funnel(opts: PipelineOptions, docs, states: dict[str, str], reports: dict[str, tuple[Stage, dict]],
                 stop: str | None = None) -> dict[str, Any]:
    """What each stage took in and kept, as each stage tells it from its report and folder
    (None: a stage not reached, or relabel when off)."""
    out = Path(opts.out)
    d = docs.report()
    funnel: dict[str, Any] = {
        "docs": str(opts.docs), "out": str(out), "stages": states, "stopped": stop,
        "order": [stage.name for stage, _ in stages(opts, opts.llm, out)],  # the stages this run is made of
        "documents": {"files": d["files"], "documents": d["documents"], "passages": d["passages"],
                      "skipped": len(d["skipped"]), "replaced": len(d["replaced"])},
    }
    for name in CHAIN:
        funnel[name] = None
    for name, (stage, report) in reports.items():
        report = report_of(out / name) or report
        funnel[name] = stage.funnel(report, out / name) if stage.funnel and report else None
    return funnel


def print_funnel(f: dict[str, Any], order: list[Stage]) -> None:
    """The funnel, one line per fact, each stage's lines as the stage words them."""
    def say(label: str, text: str) -> None:
        console.print(f"  [bold]{label:<9}[/bold] {text}", soft_wrap=True)

    console.print(f"[bold]pipeline[/bold] {escape(f['docs'])} -> {escape(f['out'])}", soft_wrap=True)
    d = f["documents"]
    skipped = f", {_n(d['skipped'], 'file')} skipped" if d["skipped"] else ""
    if d["replaced"]:
        skipped += f", {_n(d['replaced'], 'file')} with bytes that are not UTF-8 replaced"
    say("read", f"{_n(d['documents'], 'document')} from {_n(d['files'], 'file')}, "
                f"{_n(d['passages'], 'passage')} cut{skipped}")
    plots: list[str] = []
    present = {stage.name: stage for stage in order}
    before = False  # the stage before in the chain was shown: the run got this far
    for name in CHAIN:
        stage, entry = present.get(name), f.get(name)
        if stage is None and name in OFF and before:  # left out of this run: how to have it
            say(name, OFF[name])
        before = bool(entry) or (stage is None and before)
        if stage is None or not entry or stage.present is None:
            continue
        done = " (done earlier)" if f["stages"].get(stage.name) == DONE else ""
        for label, text in stage.present(entry).lines:
            say(label, text + (done if label else ""))
        plots += entry.get("plots", [])
        if entry.get("folder"):
            say("data", escape(entry["folder"]))
    if plots:
        say("plots", escape(", ".join(plots)))
    say("funnel", escape(str(Path(f["out"]) / FUNNEL)))


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def members(folder: Path) -> tuple[list[str], list[str]] | None:
    """The stage folders the latest pipeline run in ``folder`` is made of, and those it has reached:
    from ``pipeline.json``, written before its first stage and after each one (None: no record)."""
    try:
        funnel = json.loads((Path(folder) / FUNNEL).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    order = funnel.get("order") if isinstance(funnel, dict) else None
    reached = funnel.get("stages") if isinstance(funnel, dict) else None
    if not isinstance(order, list) or not isinstance(reached, dict):
        return None
    return [name for name in order if isinstance(name, str)], list(reached)


PIPELINE = Stage("pipeline", PipelineOptions, pipeline_stage, check=check, reads=("docs",),
                 # not staged: its sub-folders are the stages' own runs, each swapped in whole
                 writes={"funnel": FUNNEL}, appends=True, members=members)
STAGES.register(PIPELINE.name, PIPELINE)


def _relabel() -> Stage:
    """The filter stage under the name of its folder and recipe: an LLM judge on mined negatives."""
    from curate.filter.main import STAGE as FILTER

    return dataclasses.replace(FILTER, name=RELABEL, needs=(*FILTER.needs, "negatives"))


STAGES.register(RELABEL, _relabel())
