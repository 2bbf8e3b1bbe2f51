"""One release only: the results of grids run before each cell was a list of stages, read so a
finished grid's table is shown again without training anything.

Before, a grid kept each result in ``OUT/grid-<budget key>/runs/<arm key>/seed-S.json`` and its
report, ``OUT/ablate_report.json``, named each arm's key. That report is kept beside the runs it
names (the first new report replaces it at the top), and an arm of today's grid takes an old
result when the old report held an arm with the same options (by options, not by name, so a
renamed arm keeps it) under the same budget. Delete this module one release after the move.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

from curate.core.jsonl import read_json_object
from curate.flows.ablate.grid import Arm, Grid

OLD_REPORT = "ablate_report.json"


def legacy_results(out: Path, grid: Grid) -> dict[tuple[str, int], dict[str, Any]]:
    """Old results for today's arms, by (arm, seed)."""
    _keep_old_report(out)
    found: dict[tuple[str, int], dict[str, Any]] = {}
    for path in sorted(out.glob("grid-*/" + OLD_REPORT)):
        old = read_json_object(path)
        if not _same_budget(old, grid):
            continue
        for arm in grid.arms:
            key = _old_key(old, arm)
            for seed in grid.seeds if key else ():
                result = read_json_object(path.parent / "runs" / key / f"seed-{seed}.json")
                if isinstance(result.get("metrics"), dict):
                    found.setdefault((arm.name, seed), {**result, "arm": arm.name, "legacy": key})
    return found


def _keep_old_report(out: Path) -> None:
    """The old-style report at the top, copied beside the runs it names, before a new one replaces it."""
    old = read_json_object(out / OLD_REPORT)
    work = out / Path(str(old.get("work") or "")).name
    if work.name.startswith("grid-") and (work / "runs").is_dir() and not (work / OLD_REPORT).exists():
        shutil.copyfile(out / OLD_REPORT, work / OLD_REPORT)


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _same_budget(old: dict[str, Any], grid: Grid) -> bool:
    """The old grid trained and scored as today's does (data by folder name: a checkout moves)."""
    def name(path: Any) -> str:
        return Path(str(path)).name

    old_eval = old.get("eval") or [None, None, None]
    return (old.get("budget") == _plain(asdict(grid.budget)) and old.get("student") == grid.student
            and old.get("queries") == grid.queries and old.get("shown_positives") == grid.shown_positives
            and old.get("holdout") == grid.holdout and old.get("split") == grid.split
            and name(old.get("data")) == name(grid.data) and list(old_eval[1:]) == [grid.eval_split, grid.light]
            and (grid.holdout or name(old_eval[0]) == name(grid.eval_data)))


def _old_key(old: dict[str, Any], arm: Arm) -> str | None:
    """The key of the old arm with this arm's options (its own name first, when several had them)."""
    spec = _plain(asdict(arm))
    defaults = _plain(asdict(Arm("")))  # an option the old report lacks was at its default then
    matches = []
    for name, entry in (old.get("arms") or {}).items():
        if not isinstance(entry, dict) or not entry.get("key"):
            continue
        if all(entry.get(k, defaults.get(k)) == v for k, v in spec.items() if k != "name"):
            matches.append((name != arm.name, entry["key"]))
    return min(matches)[1] if matches else None
