"""``curate train RUN``: a model fine-tuned on the run's export, and the number that says by how much.

The export a pipeline (or ``curate export``) wrote is what sentence-transformers' trainer reads:
its ``sentence-transformers`` Parquet files, in file order (the curriculum and batch layout the
export chose), with the loss its card recommends: distillation on the teacher's scores
(``DistillKLDivLoss``, the ``label`` column) when the rows carry them, else the contrastive
``MultipleNegativesRankingLoss`` (``--loss`` names another; ``--loss pick`` trains each of
``CANDIDATES`` and keeps the one the held-out queries score highest, since which recipe wins
depends on the data and no default won on every shipped set). The base model (default: the bundled
all-MiniLM-L6-v2, offline) and the trained one are both evaluated on every ``--eval`` BEIR folder,
and on the run's own held-out set when it has one (``RUN/holdout/eval``), so the report holds NDCG@10,
Recall@100 and MRR@10 before and after. Each evaluation also gets a verdict on its NDCG@10 change
(``curate.evaluate.paired``): too few queries to say (for the held-out set, with the ``-n`` that would
hold out enough), or the change's paired bootstrap interval and whether it is clear of zero. ``--light``
samples the ``--eval`` folders only: the held-out set is small by nature, and a fifth of it says nothing.

It is a stage made of two: ``fit`` (``RUN/train/fit``, the fine-tune alone) and ``eval`` of the
base and the fitted model on every set (``RUN/train/eval/<fingerprint>``), each run through the
stage runner, as an ablation cell runs them. Its folder (``RUN/train`` unless ``--out``) is opened by the runner, a killed run
leaves nothing half-written and starts again cleanly, and the same command again is "done
earlier" (training is the slow part). The fingerprint is the export's training files, the eval
folders and the options, so a new export trains again. An export that is not from the run's
current upstream (a pipeline re-run that stopped before it, or a stage before it made anew since)
is refused in one line before anything loads: the stage runner checks every stage's inputs so
(``curate.core.stage.check_upstream``). Training runs in one process (on a GPU
when there is one): a single model's optimiser steps do not split across Ray workers; ``curate
ablate --executor ray`` runs many trainings at once instead.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from curate.core.errors import CurateError
from curate.core.jsonl import read_json_object
from curate.core.stage import STAGES, FunnelRow, Stage
from curate.train.fit import Budget

if TYPE_CHECKING:
    from curate.evaluate.paired import Change

FIT_DIR = "fit"  # the fit stage's run inside this one's folder
MODEL = f"{FIT_DIR}/model"  # the fitted model (``curate.train.fit_stage.MODEL`` in the fit's folder)
FORMAT = "sentence-transformers"  # the export format the trainer reads
HELD_OUT = "holdout/eval"  # a pipeline run's held-out BEIR folder, when it wrote one
METRICS = ("ndcg@10", "recall@100", "mrr@10")
VERDICT_METRIC = "ndcg@10"  # the number the terminal prints, and the one its verdict is on
# the held-out size a too-small run is pointed to: three times the fewest a verdict needs
# (curate.evaluate.paired.MIN_QUERIES), since the split by document makes the count vary and
# a paired interval narrows as one over the root of the queries
SUGGESTED_QUERIES = 30
# the fewest steps a default run takes: the learning rate warms up over the first tenth of them, and
# a run of one step (a demo export of 9 rows) would take it at a learning rate of 0
MIN_STEPS = 10
# --loss pick's candidates, the plain contrastive recipe first: a tie keeps it. Which of them trains
# the better model depends on the data (labelled or LLM-written queries, how far the teacher's scores
# agree with the labels: docs/stages/train.md), so the user's held-out queries choose.
CANDIDATES = ("mnrl", "mnrl+distill-kl", "distill-kl")
CANDIDATES_DIR = "candidates"  # each candidate's fit, inside this run's folder; the kept one becomes FIT_DIR
_BUDGET = {f.name: f for f in fields(Budget)}  # the trainer's budget: its defaults and ranges, declared once


def _budget(name: str, help_text: str):
    """An option of ``TrainOptions`` that is one of the trainer's ``Budget`` fields, with its help."""
    return field(default=_BUDGET[name].default, metadata={**_BUDGET[name].metadata, "help": help_text})


@dataclass
class TrainOptions:
    run: str = field(metadata={"argument": True, "path": "dir", "fingerprint": False,
                               "help": "A pipeline run folder (its export/) or an export folder."})
    out: str | None = field(default=None, metadata={
        "path": "dir", "help": "Folder for the model and report.json (default: RUN/train)."})
    base: str | None = field(default=None, metadata={
        "help": "Model to fine-tune: a sentence-transformers name or folder (default: the bundled all-MiniLM-L6-v2)."})
    loss: Literal["auto", "pick", "mnrl", "distill-kl", "mnrl+distill-kl", "margin-mse", "masked"] = field(
        default="auto", metadata={"help": "auto: distill-kl when the rows carry the teacher's scores and their "
                                          "queries were written from documents (the export card's recommendation), "
                                          "else mnrl (labelled queries, or no scores). pick: train mnrl, "
                                          "mnrl+distill-kl and distill-kl and keep the one the held-out set (else the "
                                          "first --eval) scores highest."})
    steps: int | None = field(default=None, metadata={
        "min": 1, "help": f"Optimiser steps (default: one pass over the rows, at least {MIN_STEPS})."})
    batch_size: int = _budget("batch_size", "Rows a step.")
    lr: float = _budget("lr", "Peak learning rate.")
    max_seq_length: int = _budget("max_seq_length", "Tokens per text while training.")
    seed: int = field(default=0, metadata={"help": "Seed of the training run."})
    eval: tuple[str, ...] = field(default=(), metadata={
        "path": "dir", "help": "A BEIR folder to evaluate the base and the trained model on (repeatable); the "
                               "run's own held-out set (RUN/holdout/eval) is always used when there is one."})
    eval_split: str = field(default="test", metadata={"help": "Qrels split of the --eval folders."})
    light: bool = field(default=False, metadata={
        "help": "Evaluate the --eval folders on Linq's light set (20% of the queries, the teacher's top 50) "
                "instead of the full split; the run's own held-out set is always scored whole."})

    def __post_init__(self) -> None:
        if self.out is None:  # beside the run's other stages
            self.out = str(Path(self.run) / "train")


def export_folder(run: str | Path) -> Path:
    """The export a run folder holds (``RUN/export``), or the folder itself when it is one: the
    one whose finished export wrote the sentence-transformers format."""
    from curate.export.main import written_files

    run = Path(run)
    for folder in (run / "export", run):
        if written_files(folder, FORMAT):
            return folder
    raise CurateError(f"{run}: no export here (no finished export with --format {FORMAT} in it or in "
                      f"{run / 'export'}): run curate pipeline, or curate export --format {FORMAT}, first")


def train_files(run: str | Path) -> list[Path]:
    from curate.export.main import written_files

    folder = export_folder(run)
    files = sorted(f for f in written_files(folder, FORMAT) if f.name.startswith("train-") and f.suffix == ".parquet")
    if not files:
        raise CurateError(f"{folder}: the export has no training rows (no {FORMAT} train-*.parquet)")
    return files


@dataclass(frozen=True)
class EvalSet:
    """One folder the base and the trained model are scored on; ``light`` only for an --eval folder
    when --light asks (the run's own held-out set is always scored whole)."""

    folder: str
    split: str
    held_out: bool = False
    light: bool = False


def auto_loss(run: str | Path, columns: list[str]) -> tuple[str, str]:
    """``--loss auto``'s choice and why, from a property of the rows: whether they carry the
    teacher's scores, and whether their queries came with labels (records mined from a dataset,
    which the export counts per source as ``dataset``) or were written by an LLM. Measured on
    SciFact, NFCorpus and NQ-UTD (docs: Train), distillation alone is the zero-label recipe and
    trains below the contrastive loss on every labelled set."""
    from curate.core.stage import report_of

    if "label" not in columns:
        return "mnrl", "the rows carry no teacher scores"
    sources = (report_of(export_folder(run)) or {}).get("sources") or []
    total = sum(int(src.get("records") or 0) for src in sources)
    labelled = sum(int(src.get("records") or 0) for src in sources if src.get("dataset"))
    if total and 2 * labelled >= total:
        return "mnrl", f"{labelled} of {total} records are labelled queries: the contrastive loss"
    return "distill-kl", "queries written from documents, with the teacher's scores: distillation alone"


def eval_sets(opts: TrainOptions) -> list[EvalSet]:
    """Every evaluation: the run's held-out set first, then each --eval."""
    held = Path(opts.run) / HELD_OUT
    queries = held / "queries.jsonl"  # empty when the pipeline held nothing out
    own = [EvalSet(str(held), "test", held_out=True)] if queries.is_file() and queries.stat().st_size else []
    return own + [EvalSet(str(Path(e)), opts.eval_split, light=opts.light) for e in opts.eval]


def check(opts: TrainOptions) -> None:
    import pyarrow.parquet as pq

    from curate.train.fit import SCORED

    files, sets = train_files(opts.run), eval_sets(opts)
    for s in sets:
        if not (Path(s.folder) / "corpus.jsonl").is_file():
            raise CurateError(f"--eval {s.folder}: not a BEIR folder (no corpus.jsonl)")
    scored = "label" in pq.read_schema(files[0]).names
    if opts.loss == "pick":
        if not sets:
            raise CurateError(f"--loss pick keeps the loss that held-out queries score highest, and {opts.run} has "
                              "none (no holdout/eval): give an --eval folder, or a --loss")
        if not scored:
            raise CurateError("--loss pick chooses among losses that read the teacher's scores, which this export's "
                              "rows do not carry (export with scores, or --loss mnrl)")
    elif opts.loss in SCORED and not scored:
        raise CurateError(f"--loss {opts.loss} reads the teacher's scores, which this export's rows do not carry "
                          "(export with scores, or --loss mnrl)")


def _also_reads(opts: TrainOptions) -> list[Path]:
    return train_files(opts.run)


def _evaluate(s: EvalSet, root: Path, which: str, **model: str | None) -> dict[str, Any]:
    """One set scored through the ``eval`` stage, in a folder of ``root`` named by what it scores."""
    from curate.core.progress import note
    from curate.core.stage import STAGES, placed, run_stage

    EVAL = STAGES.get("eval")
    note(f"train: evaluating the {which} model on {s.folder} ({s.split}{', light' if s.light else ''})")
    hashed: dict = {}  # the set and the model hashed once, for the folder's name and the run
    opts = placed(EVAL, EVAL.options(data=s.folder, out="", split=s.split, light=s.light, per_query=True, **model),
                  root, hashed)
    report, _ = run_stage(EVAL, opts, resume=True, quiet=True, hashed=hashed)
    return {"metrics": {k: report["metrics"].get(k) for k in METRICS}, "queries": report["queries"],
            "docs": report["docs"], "per_query": report["per_query"][VERDICT_METRIC]}


def more_queries(run: Path) -> str:
    """The ``-n`` of ``curate pipeline`` that would hold out about ``SUGGESTED_QUERIES`` queries.

    The held-out queries grow with the passages sampled: each yields a query, the filter keeps a
    share of them, and the holdout sets aside ``share`` of the documents with theirs. This run's own
    rate (its held-out share times the filtered queries per sampled passage) scales its ``-n``.
    Empty when the run is not a pipeline's (no ``-n`` to scale)."""
    from curate.core.stage import report_of

    held, pipeline = report_of(run / "holdout"), read_json_object(run / "pipeline.json")
    sampled = (pipeline.get("generate") or {}).get("sampled")
    if not held or not held.get("records_in") or not held.get("share") or not sampled:
        return ""
    per_passage = held["share"] * held["records_in"] / sampled
    n = math.ceil(SUGGESTED_QUERIES / per_passage)
    text = f"-n {n} would hold out about {round(per_passage * n)}"
    passages = (pipeline.get("documents") or {}).get("passages")
    if isinstance(passages, int) and n > passages:
        text += f", more than the {passages} passages the documents have: add documents"
    return text


def _verdict(change: Change, s: EvalSet, run: Path) -> str:
    """The change's verdict; for a held-out set too small to say, with the ``-n`` that would do."""
    hint = more_queries(run) if s.held_out and change.low is None else ""
    return f"{change.verdict}; {hint}" if hint else change.verdict


# said beside the verdict of the set --loss pick chose on: the best of several on the same queries
# is read high, by about as much as the candidates differ there
PICKED_ON = "the loss was picked on these queries, so the change reads high"


def _evaluation(s: EvalSet, before: dict[str, Any], after: dict[str, Any], run: Path,
                picked_on: bool = False) -> dict[str, Any]:
    """One evaluation's entry in the report: sizes, both sides' means, and the change's verdict."""
    from curate.evaluate.paired import paired_change

    change = paired_change(before["per_query"], after["per_query"])
    return {"data": s.folder, "split": s.split, "held_out": s.held_out, "light": s.light,
            "queries": before["queries"], "docs": before["docs"], "before": before["metrics"],
            "after": after["metrics"], "change": {"metric": VERDICT_METRIC, **change.to_json()},
            "verdict": _verdict(change, s, run), "picked_on": picked_on}


def _fit(opts: TrainOptions, run, loss: str, budget: Budget, where: str):
    """One fine-tune through the ``fit`` stage in ``where`` inside this run: its options, report and seconds."""
    from curate.core.stage import STAGES, run_stage
    from curate.train.fit import Training

    FIT = STAGES.get("fit")
    fit = FIT.options(rows=str(export_folder(opts.run)), out=str(run.path(where)), base=opts.base, budget=budget,
                      seed=opts.seed, training=Training(loss=loss).changed())
    started = time.perf_counter()
    fitted, _ = run_stage(FIT, fit, quiet=True)
    return fit, fitted, time.perf_counter() - started


def _pick(opts: TrainOptions, run, budget: Budget, s: EvalSet) -> tuple[str, dict[str, Any]]:
    """``--loss pick``: every candidate fitted and scored on ``s``; the highest NDCG@10 is kept (a tie:
    the earlier candidate), its fit moved to ``FIT_DIR``. Each other candidate's report stays in
    ``CANDIDATES_DIR`` with its paired change against the kept one; its model is removed (a
    candidate is a whole model: three of a large one fill a disk)."""
    import os
    import shutil

    from curate.evaluate.paired import paired_change

    tried = []
    for loss in CANDIDATES:
        fit, fitted, seconds = _fit(opts, run, loss, budget, f"{CANDIDATES_DIR}/{loss}")
        scored = _evaluate(s, run.dir, f"{loss}-trained", fit=fit.out)
        tried.append({"loss": loss, "fit": fit, "training": fitted["training"], "train_s": seconds, **scored})
    best = max(tried, key=lambda t: t["metrics"][VERDICT_METRIC])  # max keeps the first of equals
    candidates = []
    for t in tried:
        entry = {"loss": t["loss"], VERDICT_METRIC: t["metrics"][VERDICT_METRIC], "train_s": round(t["train_s"], 1)}
        if t is best:
            os.replace(t["fit"].out, run.path(FIT_DIR))
            entry["kept"] = True
        else:
            change = paired_change(t["per_query"], best["per_query"])  # the kept one's lead over this one
            entry.update(kept=False, lead={"metric": VERDICT_METRIC, **change.to_json()}, verdict=change.verdict)
            shutil.rmtree(Path(t["fit"].out) / "model", ignore_errors=True)
        candidates.append(entry)
    return best["loss"], {"on": s.folder, "queries": best["queries"], "candidates": candidates,
                          "training": best["training"], "train_s": sum(t["train_s"] for t in tried)}


def train_stage(opts: TrainOptions, run) -> dict[str, Any]:
    """``fit`` on the export, then ``eval`` of the base and the fitted model on every set, each a
    stage run of its own inside this run's folder (``FIT``, ``eval/<fingerprint>``)."""
    import os

    import pyarrow.parquet as pq

    os.environ.setdefault("TQDM_DISABLE", "1")  # the libraries' bars (datasets, the model card's widget
    # examples): curate's own training bar and lines stay
    files = train_files(opts.run)
    columns = pq.read_schema(files[0]).names
    rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    steps = opts.steps or max(MIN_STEPS, math.ceil(rows / opts.batch_size))
    budget = Budget(steps=steps, batch_size=opts.batch_size, lr=opts.lr, max_seq_length=opts.max_seq_length)
    sets = eval_sets(opts)
    before = [_evaluate(s, run.dir, "base", model=opts.base) for s in sets]
    pick, why = None, None
    if opts.loss == "pick":  # check() made sure there is a set to pick on and scores to distil
        from curate.evaluate.paired import MIN_QUERIES

        if before[0]["queries"] < MIN_QUERIES:  # known once scored: the held-out split is by document
            hint = more_queries(Path(opts.run)) if sets[0].held_out else ""
            raise CurateError(f"--loss pick: {sets[0].folder} has {before[0]['queries']} queries, too few to pick a "
                              f"loss by (at least {MIN_QUERIES}){'; ' + hint if hint else ''}; or give a --loss")
        loss, pick = _pick(opts, run, budget, sets[0])
        training, seconds = pick.pop("training"), pick.pop("train_s")
    else:
        loss, why = (opts.loss, None) if opts.loss != "auto" else auto_loss(opts.run, columns)
        _, fitted, seconds = _fit(opts, run, loss, budget, FIT_DIR)
        training = fitted["training"]
    after = [_evaluate(s, run.dir, "trained", fit=str(run.path(FIT_DIR))) for s in sets]
    evaluations = [_evaluation(s, b, a, Path(opts.run), picked_on=pick is not None and i == 0)
                   for i, (s, b, a) in enumerate(zip(sets, before, after))]
    add_to_model_card(run.path(MODEL), evaluations, pick)
    return {"export": str(export_folder(opts.run)), "files": [f.name for f in files], "base": opts.base or
            "all-MiniLM-L6-v2 (bundled)", "model": MODEL, "loss": loss, **({"loss_why": why} if why else {}),
            "training": training,
            "train_s": round(seconds, 1), "evaluations": evaluations, "light": opts.light,
            **({"pick": pick} if pick else {})}


def add_to_model_card(model: Path, evaluations: list[dict[str, Any]], pick: dict[str, Any] | None = None) -> None:
    """The model's README.md (sentence-transformers' card) ends with the before -> after table, so
    the model carries its own number wherever it is copied or pushed (and, picked, how its loss was)."""
    if not evaluations:
        return
    head = "| data | queries | " + " | ".join(f"{m} before | {m} after" for m in METRICS) + " | verdict |"
    lines = ["", "## Evaluation by curate train", "",
             "The base model and this one on the same queries (a run's held-out set holds queries an LLM "
             "wrote for documents kept out of training); the verdict is on the NDCG@10 change.", "", head,
             "|" + " --- |" * (3 + 2 * len(METRICS))]
    for e in evaluations:
        cells = [f"{e['before'][m]:.4f} | {e['after'][m]:.4f}" for m in METRICS]
        lines.append(f"| {Path(e['data']).as_posix()} ({e['split']}) | {e['queries']} | " + " | ".join(cells)
                     + f" | {_said(e).replace('|', '/')} |")
    if pick:
        lines += ["", _picked(pick)]
    card = model / "README.md"
    text = card.read_text(encoding="utf-8") if card.is_file() else ""
    card.write_text(text.rstrip("\n") + "\n" + "\n".join(lines) + "\n", encoding="utf-8")


def funnel(report: dict[str, Any], folder: Path) -> dict[str, Any]:
    """The training and every evaluation; the first evaluation (the held-out set when there is
    one) is the page's number, with its size and verdict."""
    evaluations = [{k: e.get(k) for k in ("data", "queries", "before", "after", "held_out", "change", "verdict",
                                          "picked_on")}
                   for e in report["evaluations"]]
    first = evaluations[0] if evaluations else None
    return {"rows": report["training"]["rows"], "steps": report["training"]["steps"], "loss": report["loss"],
            "loss_why": report.get("loss_why"),
            "train_s": report["train_s"], "model": str(folder / report["model"]),
            "ndcg_before": first["before"]["ndcg@10"] if first else None,
            "ndcg_after": first["after"]["ndcg@10"] if first else None,
            "eval": first["data"] if first else None, "queries": first["queries"] if first else None,
            "held_out_queries": first["queries"] if first and first["held_out"] else None,
            "verdict": _said(first) if first else None, "evaluations": evaluations,
            "pick": _picked(report["pick"]) if report.get("pick") else None}


def _said(e: dict[str, Any]) -> str:
    """An evaluation's verdict, with its interval when it has one (a report from before verdicts: none)."""
    change = e.get("change") or {}
    note = f"; {PICKED_ON}" if e.get("picked_on") else ""
    if change.get("low") is None:
        return (e.get("verdict") or "no verdict (trained before curate gave one: train again to get it)") + note
    level = round(100 * change["level"])
    return f"{e['verdict']} ({level}% interval {change['low']:+.4f} to {change['high']:+.4f}){note}"


def _picked(pick: dict[str, Any]) -> str:
    """``--loss pick``'s choice in one line: each candidate's NDCG@10 on the set it was picked on,
    and the kept one's lead over each other with its interval."""
    kept = next(c for c in pick["candidates"] if c["kept"])
    tried = ", ".join(f"{c['loss']} {c[VERDICT_METRIC]:.4f}" for c in pick["candidates"])
    leads = []
    for c in pick["candidates"]:
        lead = c.get("lead") or {}
        if not c["kept"]:
            interval = "" if lead.get("low") is None else f", 95% interval {lead['low']:+.4f} to {lead['high']:+.4f}"
            leads.append(f"{lead.get('mean', 0):+.4f} over {c['loss']} ({c['verdict']}{interval})")
    return (f"loss picked on {Path(pick['on']).as_posix()} ({pick['queries']} queries): {tried}; kept {kept['loss']}, "
            + "; ".join(leads))


def _line(e: dict[str, Any]) -> str:
    b, a = e["before"]["ndcg@10"], e["after"]["ndcg@10"]
    return f"NDCG@10 {b:.4f} -> {a:.4f} ({a - b:+.4f}) on {e['data']}, {e['queries']} queries: {_said(e)}"


def present(f: dict[str, Any]) -> FunnelRow:
    line = f"{f['steps']} steps on {f['rows']} rows ({f['loss']}, {f['train_s']:.0f} s) -> {f['model']}"
    lines = [("train", line)] + ([("", f["pick"])] if f.get("pick") else [])
    lines += [("", f"loss auto: {f['loss_why']}")] if f.get("loss_why") else []
    lines += [("", _line(e)) for e in f.get("evaluations") or []]
    if not f.get("evaluations"):
        lines.append(("", "no evaluation: the run has no held-out set (RUN/holdout/eval) and no --eval was given"))
    first = (f.get("evaluations") or [{}])[0]
    size = ("held-out queries", "held_out_queries") if first.get("held_out") else ("eval queries", "queries")
    return FunnelRow(lines=lines, cells=[("rows", "rows"), ("steps", "steps"), ("NDCG@10 before", "ndcg_before"),
                                         ("NDCG@10 after", "ndcg_after"), size, ("verdict", "verdict")])


STAGE = Stage("train", TrainOptions, train_stage, check=check, reads=("eval",), also_reads=_also_reads,
              writes={"model": MODEL}, funnel=funnel, present=present, follows="export")
STAGES.register(STAGE.name, STAGE)
