"""``curate train RUN``: a model fine-tuned on the run's export, and the number that says by how much.

The export a pipeline (or ``curate export``) wrote is what sentence-transformers' trainer reads:
its ``sentence-transformers`` Parquet files, in file order (the curriculum and batch layout the
export chose), with the loss its card recommends: distillation on the teacher's scores
(``DistillKLDivLoss``, the ``label`` column) when the rows carry them, else the contrastive
``MultipleNegativesRankingLoss`` (``--loss`` picks another). The base model (default: the bundled
all-MiniLM-L6-v2, offline) and the trained one are both evaluated on every ``--eval`` BEIR folder,
and on the run's own held-out set when it has one (``RUN/holdout/eval``), so the report holds NDCG@10,
Recall@100 and MRR@10 before and after.

It is a stage: its folder (``RUN/train`` unless ``--out``) is opened by the runner, a killed run
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
from typing import Any, Literal

from curate.core.errors import CurateError
from curate.core.stage import STAGES, FunnelRow, Stage
from curate.train.fit import Budget

MODEL = "model"
FORMAT = "sentence-transformers"  # the export format the trainer reads
HELD_OUT = "holdout/eval"  # a pipeline run's held-out BEIR folder, when it wrote one
METRICS = ("ndcg@10", "recall@100", "mrr@10")
# the fewest steps a default run takes: the learning rate warms up over the first tenth of them, and
# a run of one step (a demo export of 9 rows) would take it at a learning rate of 0
MIN_STEPS = 10
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
    loss: Literal["auto", "mnrl", "distill-kl", "mnrl+distill-kl", "margin-mse", "masked"] = field(
        default="auto", metadata={"help": "auto: distill-kl on the teacher's scores when the rows carry them (the "
                                          "export card's recommendation), else mnrl."})
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
        "help": "Evaluate on Linq's light set (20% of the queries, the teacher's top 50) instead of the full split."})

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


def eval_sets(opts: TrainOptions) -> list[tuple[str, str]]:
    """(folder, split) of every evaluation: the run's held-out set first, then each --eval."""
    held = Path(opts.run) / HELD_OUT
    queries = held / "queries.jsonl"  # empty when the pipeline held nothing out
    own = [(str(held), "test")] if queries.is_file() and queries.stat().st_size else []
    return own + [(str(Path(e)), opts.eval_split) for e in opts.eval]


def check(opts: TrainOptions) -> None:
    train_files(opts.run)
    for folder, _ in eval_sets(opts):
        if not (Path(folder) / "corpus.jsonl").is_file():
            raise CurateError(f"--eval {folder}: not a BEIR folder (no corpus.jsonl)")


def _also_reads(opts: TrainOptions) -> list[Path]:
    return train_files(opts.run)


def _evaluate(model: str | None, folder: str, split: str, light: bool, which: str) -> dict[str, Any]:
    from curate.core.progress import note
    from curate.evaluate.main import EvalOptions, run_eval

    note(f"train: evaluating the {which} model on {folder} ({split})")
    report = run_eval(EvalOptions(data=folder, split=split, model=model, light=light))
    return {"metrics": {k: report["metrics"].get(k) for k in METRICS}, "queries": report["queries"],
            "docs": report["docs"]}


def train_stage(opts: TrainOptions, run) -> dict[str, Any]:
    import os

    import datasets

    os.environ.setdefault("TQDM_DISABLE", "1")  # the libraries' bars (datasets, the model card's widget
    datasets.disable_progress_bars()           # examples): curate's own training bar and lines stay

    from curate.train.fit import SCORED, Training, fine_tune

    files = train_files(opts.run)
    rows = datasets.load_dataset("parquet", data_files=[str(f) for f in files], split="train")
    loss = opts.loss if opts.loss != "auto" else ("distill-kl" if "label" in rows.column_names else "mnrl")
    if loss in SCORED and "label" not in rows.column_names:
        raise CurateError(f"--loss {loss} reads the teacher's scores, which this export's rows do not carry "
                          "(export with scores, or --loss mnrl)")
    steps = opts.steps or max(MIN_STEPS, math.ceil(len(rows) / opts.batch_size))
    budget = Budget(steps=steps, batch_size=opts.batch_size, lr=opts.lr, max_seq_length=opts.max_seq_length)
    sets = eval_sets(opts)
    before = [_evaluate(opts.base, folder, split, opts.light, "base") for folder, split in sets]
    started = time.perf_counter()
    trained = fine_tune(opts.base, rows, budget, opts.seed, True, run.path(MODEL), Training(loss=loss))
    seconds = time.perf_counter() - started
    after = [_evaluate(str(run.path(MODEL)), folder, split, opts.light, "trained") for folder, split in sets]
    evaluations = [{"data": folder, "split": split, "queries": b["queries"], "docs": b["docs"],
                    "before": b["metrics"], "after": a["metrics"]}
                   for (folder, split), b, a in zip(sets, before, after)]
    add_to_model_card(run.path(MODEL), evaluations)
    return {"export": str(export_folder(opts.run)), "files": [f.name for f in files], "base": opts.base or
            "all-MiniLM-L6-v2 (bundled)", "model": MODEL, "loss": loss, "training": trained,
            "train_s": round(seconds, 1), "evaluations": evaluations, "light": opts.light}


def add_to_model_card(model: Path, evaluations: list[dict[str, Any]]) -> None:
    """The model's README.md (sentence-transformers' card) ends with the before -> after table, so
    the model carries its own number wherever it is copied or pushed."""
    if not evaluations:
        return
    head = "| data | queries | " + " | ".join(f"{m} before | {m} after" for m in METRICS) + " |"
    lines = ["", "## Evaluation by curate train", "",
             "The base model and this one on the same queries (a run's held-out set holds queries an LLM "
             "wrote for documents kept out of training).", "", head, "|" + " --- |" * (2 + 2 * len(METRICS))]
    for e in evaluations:
        cells = [f"{e['before'][m]:.4f} | {e['after'][m]:.4f}" for m in METRICS]
        lines.append(f"| {Path(e['data']).as_posix()} ({e['split']}) | {e['queries']} | " + " | ".join(cells) + " |")
    card = model / "README.md"
    text = card.read_text(encoding="utf-8") if card.is_file() else ""
    card.write_text(text.rstrip("\n") + "\n" + "\n".join(lines) + "\n", encoding="utf-8")


def funnel(report: dict[str, Any], folder: Path) -> dict[str, Any]:
    first = report["evaluations"][0] if report["evaluations"] else None
    return {"rows": report["training"]["rows"], "steps": report["training"]["steps"], "loss": report["loss"],
            "train_s": report["train_s"], "model": str(folder / report["model"]),
            "ndcg_before": first["before"]["ndcg@10"] if first else None,
            "ndcg_after": first["after"]["ndcg@10"] if first else None,
            "eval": first["data"] if first else None, "queries": first["queries"] if first else None}


def present(f: dict[str, Any]) -> FunnelRow:
    line = f"{f['steps']} steps on {f['rows']} rows ({f['loss']}, {f['train_s']:.0f} s) -> {f['model']}"
    lines = [("train", line)]
    if f["ndcg_before"] is not None:
        lines.append(("", f"NDCG@10 {f['ndcg_before']:.4f} -> {f['ndcg_after']:.4f} "
                          f"({f['ndcg_after'] - f['ndcg_before']:+.4f}) on {f['eval']}, {f['queries']} queries"))
    else:
        lines.append(("", "no evaluation: the run has no held-out set (RUN/holdout/eval) and no --eval was given"))
    return FunnelRow(lines=lines, cells=[("rows", "rows"), ("steps", "steps"), ("NDCG@10 before", "ndcg_before"),
                                         ("NDCG@10 after", "ndcg_after")])


STAGE = Stage("train", TrainOptions, train_stage, check=check, reads=("eval",), also_reads=_also_reads,
              writes={"model": MODEL}, funnel=funnel, present=present, follows="export")
STAGES.register(STAGE.name, STAGE)
