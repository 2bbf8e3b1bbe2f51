"""A long filter step says which it is while it runs; a quick one says nothing."""

from __future__ import annotations

import io
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from curate.core import progress
from curate.core.records import Record
from curate.filter import run as filter_run
from curate.filter.base import STEPS, FilterContext, register
from curate.filter.recipe import Recipe, StepConfig


@dataclass
class _NoParams:
    pass


def test_a_step_still_running_after_a_few_seconds_is_named(tmp_path, monkeypatch):
    @register("nap_quick", _NoParams)
    def quick(records, params, ctx):
        return records

    @register("nap_slow", _NoParams)
    def slow(records, params, ctx):
        time.sleep(0.5)
        return records[:1]

    try:
        monkeypatch.setattr(filter_run, "ANNOUNCE_AFTER", 0.2)
        monkeypatch.setitem(progress._bars, "quiet", False)
        log = io.StringIO()
        monkeypatch.setattr(progress, "console", Console(file=log, force_terminal=False, width=200))
        records = [Record(id=f"r{i}", task_type="t", task="t", query=f"q{i}", positive="p") for i in range(3)]
        recipe = Recipe("r", Path("r.yaml"), [StepConfig("nap_quick"), StepConfig("nap_slow"), StepConfig("nap_quick")])
        kept, rows = filter_run.run_steps(records, recipe, FilterContext(out_dir=tmp_path))
    finally:
        STEPS.unregister("nap_quick")
        STEPS.unregister("nap_slow")
    assert len(kept) == 1 and [r["step"] for r in rows] == ["nap_quick", "nap_slow", "nap_quick"]
    assert log.getvalue().splitlines() == ["filter: step 2 of 3, nap_slow, on 3 records (running for 0 s)"]
