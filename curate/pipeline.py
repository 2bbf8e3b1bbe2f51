"""``curate pipeline DOCS --out RUN``: documents in, training data out, in one command.

Users with documents and no labelled queries would otherwise run five commands and wire their
files together by hand. This runs the same stages, with the same options objects, each in a
sub-folder of RUN: ``generate/`` (a query per sampled passage), ``filter/`` (the recipe, with
the passages as the round trip's corpus), ``mine/`` (hard negatives from the same passages),
``relabel/`` (only with ``relabel=True``: an LLM judge looks again at the mined negatives) and
``export/``. At the end it prints the funnel, where the records went and why, and writes it
to ``RUN/pipeline.json``.

Re-running resumes. Generate finishes what it has not done (its own resume) and is skipped
outright when every sampled passage is done, so no model starts. Each later stage leaves a
marker in its folder naming its options and the SHA-256 of its inputs; a stage whose report
is there, untouched since, with a marker that matches is "done earlier", anything else runs
again. The stages write through their run folders (staged and swapped in whole, see
``curate.core.runner``), so a kill leaves the last whole output or none, never half of one,
and a stage that runs again replaces its output rather than adding to it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.markup import escape

from curate.core.errors import CurateError
from curate.core.jsonl import atomic_write_json, dumps, read_jsonl
from curate.llm.backend import LLMOptions
from curate.progress import console

GENERATE, FILTER, MINE, RELABEL, EXPORT = "generate", "filter", "mine", "relabel", "export"
REPORTS = {GENERATE: "summary.json", FILTER: "filter_report.json", MINE: "mine_report.json",
           RELABEL: "filter_report.json", EXPORT: "export_report.json"}
MARKER = ".curate-pipeline.json"  # a ".curate" name: export's check of its folder passes it by
FUNNEL = "pipeline.json"
DONE, RAN = "done earlier", "ran"
EXCERPT = 60  # characters of a dropped query shown in the funnel


@dataclass(kw_only=True)
class PipelineOptions:
    docs: str  # a BEIR folder, a corpus JSONL, a folder of .txt/.md/.html, or one such file
    out: str
    n: int = 200  # passages sampled; one query each
    seed: int = 0
    llm: LLMOptions = field(default_factory=LLMOptions)  # generate's backend, and relabel's judge
    task: str = "from-corpus"  # or from-corpus-multihop (queries over 2-3 related passages), or a spec file
    recipe: str = "from-corpus"
    relabel: bool = False  # off until measured
    teacher: str | None = None  # filter's and mine's teacher (default: the recipe's / the bundled one)
    formats: tuple[str, ...] = ("sentence-transformers",)
    license: str | None = None  # the export card's licence: the user's documents have no known one
    plots: bool = True
    prompts_dirs: tuple[str, ...] = ()


def run_pipeline(opts: PipelineOptions) -> dict[str, Any]:
    """Run (or resume) every stage, then print and return the funnel."""
    from curate.core.runner import open_run
    from curate.datasets.documents import read_documents
    from curate.filter.recipe import load_recipe

    if opts.n < 1:
        raise CurateError(f"-n must be at least 1, got {opts.n}")
    docs = read_documents(opts.docs)  # bad input is one line here, before any folder or model
    out = Path(opts.out)
    text_folder = docs.path.is_dir() and not (docs.path / "corpus.jsonl").is_file()
    if text_folder and docs.path.resolve() in (out.resolve(), *out.resolve().parents):
        raise CurateError(f"--out {out} lies inside DOCS {docs.path}: a re-run would read its files as documents")
    for recipe in (opts.recipe, RELABEL) if opts.relabel else (opts.recipe,):
        load_recipe(recipe)
    from curate.generate.from_corpus import check_spec
    from curate.taskspec import load_spec

    check_spec(load_spec(opts.task, ()))
    _check_formats(opts.formats)
    from curate.export.formats.hub import check_license

    check_license(opts.license)  # before any model starts
    llm = opts.llm if opts.llm.cache else dataclasses.replace(opts.llm, cache=str(out / ".cache" / "llm.sqlite"))
    params = {k: v for k, v in dataclasses.asdict(opts).items() if k not in ("llm", "out")}
    with open_run("pipeline", out, params, [opts.docs], staged=False) as run:
        states, stop = _run_stages(opts, docs, llm, out)
        funnel = build_funnel(opts, docs, states, stop)
        atomic_write_json(out / FUNNEL, funnel)
        run.counts.update({name: funnel[name][key] for name, key in (
            (GENERATE, "ok"), (FILTER, "records_kept"), (MINE, "records"), (EXPORT, "rows")) if funnel[name]})
    print_funnel(funnel)
    if stop:  # the funnel above says where the records went
        raise CurateError(stop)
    return funnel


def _run_stages(opts: PipelineOptions, docs, llm: LLMOptions, out: Path) -> tuple[dict[str, str], str | None]:
    """Each stage's state (ran / done earlier), and why the run stopped early (None: it did not)."""
    from curate.export.main import ExportOptions, run_export
    from curate.filter.main import FilterOptions, filter_main
    from curate.filter.recipe import find_recipe
    from curate.generate.from_corpus import CORPUS
    from curate.mine.main import MINED, MineOptions, mine_main

    gen = out / GENERATE
    corpus = gen / CORPUS
    states = {GENERATE: _generate(opts, docs, llm, gen)}

    generated = gen / "generated.jsonl"
    if not generated.is_file() or not generated.stat().st_size:
        return states, f"generate wrote no query (why: {gen / 'failed.jsonl'}); nothing to filter"
    f_opts = {"recipe": opts.recipe, "teacher": opts.teacher, "plots": opts.plots}
    inputs = [generated, corpus, find_recipe(opts.recipe)]  # an edited recipe file: filtered again
    states[FILTER] = stage(FILTER, out / FILTER, f_opts, inputs, lambda: filter_main(FilterOptions(
        inp=str(generated), out=str(out / FILTER), corpus=str(corpus), llm=llm, **f_opts)))

    filtered = out / FILTER / "filtered.jsonl"
    if not _report(out, FILTER)["records_kept"]:
        return states, f"the filter kept no query (why: {out / FILTER / 'rejected.jsonl'}); nothing to mine"
    m_opts = {"teachers": (opts.teacher,) if opts.teacher else (), "seed": opts.seed, "plots": opts.plots}
    states[MINE] = stage(MINE, out / MINE, m_opts, [filtered, corpus], lambda: mine_main(MineOptions(
        out=str(out / MINE), records=str(filtered), corpus=str(corpus), **m_opts)))

    mined = records = out / MINE / MINED
    if opts.relabel:
        r_opts = {"plots": opts.plots, "model": llm.model, "model_path": llm.model_path}  # another judge: again
        states[RELABEL] = stage(RELABEL, out / RELABEL, r_opts, [mined, find_recipe(RELABEL)], lambda: filter_main(
            FilterOptions(inp=str(mined), out=str(out / RELABEL), recipe=RELABEL, llm=llm, plots=opts.plots)))
        records = out / RELABEL / "filtered.jsonl"
    e_opts = {"formats": tuple(opts.formats), "seed": opts.seed, "license": opts.license}
    states[EXPORT] = stage(EXPORT, out / EXPORT, {**e_opts, "input": records.parent.name}, [records],
                           lambda: run_export(ExportOptions(inputs=(str(records),), out=str(out / EXPORT), **e_opts)))
    return states, None


def _generate(opts: PipelineOptions, docs, llm: LLMOptions, folder: Path) -> str:
    """Generate resumes by itself; when nothing is left to do it is not started at all (no model)."""
    from curate.generate.stage import GenerateOptions, generate_stage

    if _generated_all(opts, docs, folder):
        console.print(f"{GENERATE}: done earlier ({escape(str(folder / REPORTS[GENERATE]))})")
        return DONE
    generate_stage(GenerateOptions(out=str(folder), corpus=opts.docs, n=opts.n, seed=opts.seed, llm=llm,
                                   tasks=(opts.task,),
                                   prompts_dirs=tuple(opts.prompts_dirs)))
    return RAN


def _generated_all(opts: PipelineOptions, docs, folder: Path) -> bool:
    """Every sampled passage has its record or final failure, and the corpus file is these
    documents' passages: exactly when ``generate`` would send nothing and write the same."""
    from curate.generate.brainstorm import fixed_tasks
    from curate.generate.examples import finished_ids
    from curate.generate.from_corpus import CORPUS, corpus_items
    from curate.progress import RunStats
    from curate.taskspec import load_spec

    if not (folder / REPORTS[GENERATE]).is_file() or not (folder / CORPUS).is_file():
        return False
    spec = load_spec(opts.task, ())
    items = corpus_items(spec, docs, opts.n, fixed_tasks(spec), opts.seed, RunStats(stage=GENERATE))
    if not {it.id for it in items} <= finished_ids(folder):
        return False
    rows = "".join(dumps({"_id": p.id, "title": p.title, "text": p.text, "source": p.source}) + "\n"
                   for p in docs.passages)
    return (folder / CORPUS).read_text(encoding="utf-8") == rows


def stage(name: str, folder: Path, options: dict[str, Any], inputs: list[Path], run: Callable[[], Any]) -> str:
    """Run one stage unless an earlier run did it with these options on these very inputs."""
    report = folder / REPORTS[name]
    # inputs by content alone, no paths: a moved RUN is still done
    key = {"options": json.loads(json.dumps(options)), "inputs": [_sha256(p) for p in inputs]}
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
        done = marker == {**key, "report_mtime_ns": report.stat().st_mtime_ns}
    except (OSError, ValueError):
        done = False
    if done:
        console.print(f"{name}: done earlier ({escape(str(report))})")
        return DONE
    run()
    atomic_write_json(folder / MARKER, {**key, "report_mtime_ns": report.stat().st_mtime_ns})
    return RAN


def _sha256(path: Path) -> str | None:
    if not path.is_file():
        return None
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _check_formats(formats: tuple[str, ...]) -> None:
    from curate.export.formats import WRITERS

    unknown = [f for f in formats if f != "all" and f not in WRITERS]
    if unknown:
        raise CurateError(f"unknown --format {', '.join(unknown)} (choose from {', '.join(WRITERS)}, all)")


def _report(out: Path, name: str) -> dict[str, Any]:
    return json.loads((out / name / REPORTS[name]).read_text(encoding="utf-8"))


# ----------------------------------------------------------------------------- the funnel


def build_funnel(opts: PipelineOptions, docs, states: dict[str, str], stop: str | None = None) -> dict[str, Any]:
    """What each stage took in and kept, read back from the files the stages wrote (None: a stage
    not reached, or relabel when off)."""
    from curate.progress import reason_kind

    out = Path(opts.out)
    d = docs.report()
    gen = out / GENERATE
    queries = {obj.get("id"): obj.get("query") for _, obj in read_jsonl(gen / "generated.jsonl")}
    failed = [obj for _, obj in read_jsonl(gen / "failed.jsonl")] if (gen / "failed.jsonl").is_file() else []
    funnel: dict[str, Any] = {
        "docs": str(opts.docs), "out": str(out), "stages": states, "stopped": stop,
        "documents": {"files": d["files"], "documents": d["documents"], "passages": d["passages"],
                      "skipped": len(d["skipped"])},
        GENERATE: {"sampled": min(opts.n, d["passages"]), "ok": len(queries), "failed": len(failed),
                   "failure_reasons": dict(Counter(reason_kind(f.get("reason")) for f in failed).most_common())},
        FILTER: _filter_funnel(out, queries) if FILTER in states else None,
        MINE: _mine_funnel(out) if MINE in states else None,
        RELABEL: _relabel_funnel(out) if RELABEL in states else None,
        EXPORT: _export_funnel(out) if EXPORT in states else None,
    }
    return funnel


def _filter_funnel(out: Path, queries: dict[str, str]) -> dict[str, Any]:
    rep = _report(out, FILTER)
    examples: dict[str, dict[str, str]] = {}  # step -> the first record it dropped
    for _, row in read_jsonl(out / FILTER / "rejected.jsonl"):
        if row.get("target") == "record" and row.get("step") not in examples:
            examples[row["step"]] = {"reason": row.get("reason"), "query": _excerpt(queries.get(row.get("id")))}
    steps = [{"step": s["step"], "records_in": s["records_in"], "records_kept": s["records_kept"],
              "records_dropped": s["records_dropped"], "example": examples.get(s["step"])} for s in rep["steps"]]
    return {"records_in": rep["records_in"], "records_kept": rep["records_kept"], "steps": steps,
            "plots": [str(out / FILTER / Path(p).name) for p in rep.get("plots", [])]}


def _mine_funnel(out: Path) -> dict[str, Any]:
    rep = _report(out, MINE)
    return {"records_in": rep["queries_in"], "records": rep["queries_out"], "negatives": rep["negatives"],
            "negatives_per_record": rep["negatives_per_query"]["mean"],
            "plots": [str(out / MINE / p) for p in rep.get("plots", [])]}


def _relabel_funnel(out: Path) -> dict[str, Any]:
    rep = _report(out, RELABEL)
    note = next((s.get("notes", {}) for s in rep["steps"] if s["step"] == RELABEL), {})
    return {"records": rep["records_kept"], "candidates": note.get("candidates", 0),
            "verdicts": note.get("verdicts", {}), "records_changed": note.get("records_changed", 0),
            "negatives_in": rep["negatives_in"], "negatives_kept": rep["negatives_kept"]}


def _export_funnel(out: Path) -> dict[str, Any]:
    rep = _report(out, EXPORT)
    c = rep["counts"]
    split = {"train": c.get("train", 0), "dev": c.get("dev", 0)}
    return {"folder": str(out / EXPORT), "rows": split["train"] + split["dev"],
            "formats": {name: {**split, "files": files} for name, files in rep["outputs"].items()}}


def _excerpt(text: str | None) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= EXCERPT else text[:EXCERPT - 3].rstrip() + "..."


def print_funnel(f: dict[str, Any]) -> None:
    """The funnel, one line per fact; user text escaped so rich prints it as written."""
    def say(stage: str, text: str) -> None:
        console.print(f"  [bold]{stage:<9}[/bold] {text}", soft_wrap=True)

    console.print(f"[bold]pipeline[/bold] {escape(f['docs'])} -> {escape(f['out'])}", soft_wrap=True)
    d, g = f["documents"], f[GENERATE]
    skipped = f", {_n(d['skipped'], 'file')} skipped" if d["skipped"] else ""
    say("read", f"{_n(d['documents'], 'document')} from {_n(d['files'], 'file')}, "
                f"{_n(d['passages'], 'passage')} cut{skipped}")
    why = ", ".join(f"{k}: {v}" for k, v in g["failure_reasons"].items())
    say("generate", f"{g['sampled']} passages sampled, {g['ok']} queries written, {g['failed']} failed"
                    + (f" ({escape(why)})" if why else "") + _state(f, GENERATE))
    flt, m, r, e = f[FILTER], f[MINE], f[RELABEL], f[EXPORT]  # None: not reached (relabel: or off)
    if flt:
        say("filter", f"{flt['records_kept']} of {flt['records_in']} records kept" + _state(f, FILTER))
        for s in flt["steps"]:
            dropped = sum(s["records_dropped"].values())
            line = f"  {s['step']}: {s['records_kept']} of {s['records_in']} kept"
            if dropped:
                line += f", {dropped} dropped"
                if s["example"]:
                    line += f", e.g. {escape(str(s['example']['reason']))}: \"{escape(s['example']['query'])}\""
            say("", line)
    if m:
        say("mine", f"{m['records']} of {m['records_in']} records mined, {m['negatives']} negatives "
                    f"({m['negatives_per_record']:.2f} per record)" + _state(f, MINE))
        if r is None:
            say("relabel", "off (--relabel asks an LLM judge about the mined negatives)")
    if r:
        verdicts = ", ".join(f"{k} {v}" for k, v in r["verdicts"].items()) or "none"
        say("relabel", f"{r['candidates']} negatives judged: {verdicts}; {r['negatives_kept']} of "
                       f"{r['negatives_in']} negatives left, {r['records_changed']} records changed"
                       + _state(f, RELABEL))
    for name, rows in (e or {}).get("formats", {}).items():
        say("export", f"{name}: {_n(rows['train'], 'train row')}, {_n(rows['dev'], 'dev row')}"
                      + _state(f, EXPORT))
    plots = (flt or {}).get("plots", []) + (m or {}).get("plots", [])
    if plots:
        say("plots", escape(", ".join(plots)))
    if e:
        say("data", escape(e["folder"]))
    say("funnel", escape(str(Path(f["out"]) / FUNNEL)))


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _state(f: dict[str, Any], name: str) -> str:
    return " (done earlier)" if f["stages"].get(name) == DONE else ""
