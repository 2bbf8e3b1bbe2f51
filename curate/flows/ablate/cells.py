"""Running a cell's stages, and reading what a finished cell made: every stage through
``run_stage`` in the folder ``placed`` names, so a killed cell resumes at its first stage that
is not done, and two cells that share a stage run it once."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from curate.core.stage import is_done, placed, report_of, run_stage
from curate.flows.ablate.arms import Step


def walk(steps: list[Step], root: Path, upto: str | None = None) -> tuple[dict[str, Any], int | None]:
    """Each step's placed options, by label, as far as the steps are done (nothing runs), and the
    index of the first that is not (None: all done). ``upto``: stop before this label."""
    found: dict[str, Any] = {}
    for i, step in enumerate(steps):
        if step.label == upto:
            return found, None
        hashed: dict = {}
        opts = placed(step.stage, step.options(found), root, hashed)
        if not is_done(step.stage, opts, hashed=hashed):
            return found, i
        found[step.label] = opts
    return found, None


def run_steps(steps: list[Step], root: Path, upto: str | None = None) -> dict[str, Any]:
    """Run (or find done) each step in order, up to the label ``upto``; their placed options."""
    found: dict[str, Any] = {}
    for step in steps:
        if step.label == upto:
            break
        hashed: dict = {}  # each input hashed once, for the folder's name and the run
        opts = placed(step.stage, step.options(found), root, hashed)
        if step.label == "eval" and "fit" in found and not is_done(step.stage, opts, hashed=hashed) \
                and _model_back(found["fit"]):
            hashed = {}  # the fit wrote a new report, which the score is named by
            opts = placed(step.stage, step.options(found), root, hashed)
        run_stage(step.stage, opts, resume=True, quiet=True, hashed=hashed)
        found[step.label] = opts
    return found


def _model_back(fit: Any) -> bool:
    """A fit whose model was removed after an earlier score is fitted again before a new score;
    whether it was."""
    from curate.core.stage import STAGES

    FIT = STAGES.get("fit")
    if FIT.path(fit.out, "model").is_dir():
        return False
    run_stage(FIT, fit, quiet=True)
    return True


def drop_model(found: dict[str, Any]) -> None:
    """Remove a scored cell's model (its fit stays done: its report is what scores it)."""
    from curate.core.stage import STAGES

    if "fit" in found:
        shutil.rmtree(STAGES.get("fit").path(found["fit"].out, "model"), ignore_errors=True)


def result(found: dict[str, Any]) -> dict[str, Any] | None:
    """A finished cell's figures, from its fit's and eval's reports (None: not finished)."""
    if "eval" not in found:
        return None
    scored = report_of(found["eval"].out)
    fitted = report_of(found["fit"].out) if "fit" in found else None
    if not scored or not isinstance(scored.get("metrics"), dict):
        return None
    return {"metrics": scored["metrics"], "queries": scored["queries"], "docs": scored["docs"],
            "precision": scored["model"]["precision"], "eval_s": scored["seconds"]["total"],
            **({"training": fitted["training"]} if fitted else {}),
            "stages": {label: Path(o.out).name for label, o in found.items()}}


def records_of(steps: list[Step], found: dict[str, Any]) -> Path | None:
    """The records a curate cell exports (the product of the step before its export), once placed."""
    labels = [s.label for s in steps]
    if "rows" not in labels or steps[labels.index("rows")].stage.name != "export":
        return None
    step = steps[labels.index("rows") - 1]
    return step.stage.path(found[step.label].out) if step.label in found else None
