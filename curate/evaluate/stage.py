"""The ``eval`` stage: one model scored on one BEIR folder, as a run of its own.

``curate train`` and each ablation cell score their models through it, so a score is made,
skipped when done and named like every other run (``curate.core.stage.run_stage``). The model
is a name (``model``, the untrained student) or a ``fit`` run's folder; a fitted model is known
by the fit's report, so a cell whose model was removed after scoring is still done. The
evaluation's own caches (light sets, full results) stay caches under it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from curate.core.stage import REPORT, STAGES, Stage

FITTED = "model"  # where a fit run keeps its model (``curate.train.fit_stage``)


@dataclass
class EvalRunOptions:
    data: str = field(metadata={"path": "dir", "help": "BEIR folder to score on."})
    out: str = field(metadata={"path": "dir"})
    split: str = "test"
    model: str | None = None  # a model name or folder (None: the bundled MiniLM)
    # a fit run's folder: its model is scored instead of ``model`` (known by the fit's report, not the path)
    fit: str | None = field(default=None, metadata={"fingerprint": False})
    light: bool = False
    per_query: bool = False
    # what a light set is scored at: ``resolve_precision``'s choice on the machine that builds these
    # options (bf16 on one CPU, int8 on another), unless the caller pins one. It is part of the
    # identity, so a folder finished on another machine scores again instead of mixing two
    # precisions in one table. A full run is fp32 everywhere and leaves it out.
    precision: str | None = field(default=None, metadata={"fingerprint": "if-set"})

    def __post_init__(self) -> None:
        if self.light and self.precision is None:
            from curate.evaluate.main import resolve_precision

            self.precision = resolve_precision("auto", light=True, device=None)


def model_of(opts: EvalRunOptions) -> str | None:
    """The model this run scores."""
    return str(Path(opts.fit) / FITTED) if opts.fit else opts.model


def _fit_report(opts: EvalRunOptions) -> list[Path]:
    """A fitted model is what its fit made: the fit's report (its fingerprint and numbers)."""
    return [Path(opts.fit) / REPORT] if opts.fit else []


def run(opts: EvalRunOptions, run) -> dict[str, Any]:
    from curate.evaluate.main import EvalOptions, run_eval

    report = run_eval(EvalOptions(data=opts.data, split=opts.split, model=model_of(opts), light=opts.light,
                                  per_query=opts.per_query, precision=opts.precision or "auto"))
    run.counts.update({"queries": report["queries"], "docs": report["docs"]})
    return report


def summary(report: dict[str, Any], folder: Path) -> list[str]:
    return [f"eval: ndcg@10 {report['metrics'].get('ndcg@10')} on {report['queries']} queries ({folder})"]


STAGE = Stage("eval", EvalRunOptions, run, reads=("data",), also_reads=_fit_report, summary=summary)
STAGES.register(STAGE.name, STAGE)
