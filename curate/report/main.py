"""``curate report RUN``'s options and entry point."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from curate.report.page import REPORT_HTML, write_report


@dataclass(kw_only=True)
class ReportOptions:
    run: str = field(metadata={"argument": True, "path": "dir"})  # a pipeline, stage or ablate run folder
    out: str | None = field(default=None, metadata={
        "path": "file", "help": f"Write the page here (default: RUN/{REPORT_HTML})."})
    sample: int = field(default=2000, metadata={
        "min": 1, "help": "Records the browser holds, kept and dropped each (a seeded sample; counts stay exact)."})
    seed: int = field(default=0, metadata={"help": "Seed of the sample."})


def run_report(opts: ReportOptions) -> Path:
    """Write the page and return its path."""
    return write_report(opts.run, opts.out, sample=opts.sample, seed=opts.seed)
