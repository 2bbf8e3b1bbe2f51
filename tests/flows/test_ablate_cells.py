"""A cell's stages through ``run_steps`` (``curate.flows.ablate.cells``): each placed by what it
reads, a dropped model fitted again only when a new score needs it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from curate.core.stage import REPORT, STAGES, Stage
from curate.flows.ablate.arms import Step
from curate.flows.ablate.cells import drop_model, run_steps


@dataclass(kw_only=True)
class FitOptions:
    out: str


@dataclass(kw_only=True)
class ScoreOptions:
    out: str
    fit: str
    data: str


def test_a_score_added_after_the_model_was_dropped_fits_once_and_is_done_from_then_on(tmp_path, monkeypatch):
    """A grid scores its cells, drops the models, and later gains a set to score on: the cell's
    model is fitted again (its report, which names the score, is new) and the new score is named
    by that report, so the next run of the grid finds it done instead of fitting again."""
    fits: list[float] = []

    def fit(opts, run):
        (Path(run.dir) / "model").mkdir()
        (Path(run.dir) / "model" / "weights").write_text("w")
        fits.append(time.time())
        return {"train_s": fits[-1]}  # like a real fit's report: no two alike

    FIT = Stage("fit", FitOptions, fit, writes={"model": "model"})
    SCORE = Stage("eval", ScoreOptions, lambda opts, run: {"score": 1.0},
                  also_reads=lambda opts: [Path(opts.fit) / REPORT])
    real_get = STAGES.get
    monkeypatch.setattr(STAGES, "get", lambda name, *a, **kw: FIT if name == "fit" else real_get(name, *a, **kw))

    def steps(data: str) -> list[Step]:
        return [Step("fit", FIT, lambda found: FitOptions(out="")),
                Step("eval", SCORE, lambda found: ScoreOptions(out="", fit=found["fit"].out, data=data))]

    drop_model(run_steps(steps("set-a"), tmp_path))
    assert len(fits) == 1
    drop_model(run_steps(steps("set-a"), tmp_path))
    assert len(fits) == 1, "scored already: no model needed"
    found = run_steps(steps("set-b"), tmp_path)
    assert len(fits) == 2, "a new score on a dropped model fits it again"
    assert (Path(found["eval"].out) / REPORT).is_file()
    drop_model(found)
    run_steps(steps("set-b"), tmp_path)
    assert len(fits) == 2, "the new score is done: its folder is named by the report it was made from"
