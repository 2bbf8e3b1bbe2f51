"""curate as Python calls: each stage takes its typed options and returns its run summary.

    from curate import api
    api.mine(api.MineOptions(out="runs/mined", data="scifact", split="train"))
    api.export(api.ExportOptions(inputs=("runs/mined/mined.jsonl",), out="runs/export"))

Each call does what the command of the same name does: the stages run through the one stage
runner (``curate.core.stage.run_stage``, which also takes ``resume=True`` to skip a run whose
fingerprint finished before), with the same checks, the same run folder (lock, staged outputs,
``report.json``, ``run.json``) and the same outputs. Errors a user can fix raise ``CurateError`` with the one-line message the
command prints.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from curate.convert.main import ConvertOptions
from curate.core.errors import CurateError
from curate.core.executor import Executor
from curate.core.stage import STAGES, run_stage
from curate.evaluate.main import EvalOptions
from curate.export.main import ExportOptions
from curate.filter.main import FilterOptions
from curate.generate.stage import GenerateOptions, StageOptions
from curate.llm.options import LLMOptions
from curate.mine.main import MineOptions
from curate.flows.pipeline import PipelineOptions
from curate.report.main import ReportOptions
from curate.train.main import TrainOptions

__all__ = ["CurateError", "ConvertOptions", "EvalOptions", "Executor", "ExportOptions", "FilterOptions", "GenerateOptions",
           "LLMOptions", "MineOptions", "PipelineOptions", "ReportOptions", "StageOptions", "TrainOptions", "brainstorm",
           "convert", "evaluate", "export", "filter", "generate", "mine", "pipeline", "report", "run", "train"]


def brainstorm(opts: StageOptions, n: int = 50) -> dict[str, Any]:
    from curate.generate.stage import brainstorm_stage

    return brainstorm_stage(opts, n)


def run(stage: str, opts: Any, resume: bool = False) -> dict[str, Any]:
    """Run the stage registered as ``stage`` (``curate.core.stage.STAGES``: a plugin's too) with
    its options; ``resume``: not when a run with the same fingerprint finished in ``opts.out``."""
    return run_stage(STAGES.get(stage), opts, resume=resume)[0]


def generate(opts: GenerateOptions) -> dict[str, Any]:
    return run("generate", opts)


def filter(opts: FilterOptions) -> dict[str, Any]:  # noqa: A001  (the stage's name)
    return run("filter", opts)


def mine(opts: MineOptions) -> dict[str, Any]:
    return run("mine", opts)


def export(opts: ExportOptions) -> dict[str, Any]:
    return run("export", opts)


def evaluate(opts: EvalOptions) -> dict[str, Any]:
    from curate.evaluate.main import run_eval

    return run_eval(opts)


def convert(opts: ConvertOptions) -> dict[str, Any]:
    return run("convert", opts)


def train(opts: TrainOptions) -> dict[str, Any]:
    """Fine-tune on a run's export, scored before and after; done earlier when nothing changed."""
    return run("train", opts, resume=True)


def pipeline(opts: PipelineOptions) -> dict[str, Any]:
    """generate --from-corpus, filter, mine, [relabel,] export in one call; returns the funnel."""
    from curate.flows.pipeline import run_pipeline

    return run_pipeline(opts)


def report(opts: ReportOptions) -> Path:
    """Write a run folder's HTML page (``curate report``); returns its path."""
    from curate.report.main import run_report

    return run_report(opts)
