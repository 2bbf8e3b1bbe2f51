"""The page: ``collect``'s facts in one HTML file, its style, script and data inline.

Static parts (the funnel, time and cost, the export, the ablation) are written here, escaped by
Jinja; the charts and the record browser are drawn in the browser from the embedded JSON, which
keeps a page of thousands of records one small file. The file is written whole or not at all."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from curate.core.estimate import duration
from curate.core.jsonl import atomic_write_text
from curate.report.collect import collect

REPORT_HTML = "report.html"
_ASSETS = Path(__file__).with_name("assets")


def _duration(seconds: Any) -> str:
    return duration(seconds) if isinstance(seconds, (int, float)) else ""


def _fixed(value: Any, signed: bool = False) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return ""
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def _finite(obj: Any) -> Any:
    """``obj`` with every NaN or infinity made None."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def render(data: dict[str, Any]) -> str:
    """The page's HTML for ``collect``'s facts."""
    import jinja2

    from curate import __version__

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(_ASSETS)), autoescape=True,
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters.update(duration=_duration, fixed=_fixed)
    # no "<", ">" or "&" of the data reaches the HTML: "</script>" or "<!--" in a record's text
    # would otherwise end or bend the data block; "\u003c" is the same character to JSON
    try:
        payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)
    except ValueError:  # a NaN or infinity somewhere in a record: JSON.parse would refuse the page
        payload = json.dumps(_finite(data), ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)
    payload = payload.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return env.get_template("report.html.j2").render(
        d=data, version=__version__, payload=payload,
        css=(_ASSETS / "report.css").read_text(encoding="utf-8"),
        script=(_ASSETS / "report.js").read_text(encoding="utf-8").replace("</", "<\\/"))


def write_report(folder: str | Path, out: str | Path | None = None, *, sample: int = 2000, seed: int = 0) -> Path:
    """Write the report of the run in ``folder`` (to ``folder/report.html`` unless ``out``)
    and return its path."""
    from curate.core.progress import console

    data = collect(folder, sample=sample, seed=seed)
    path = Path(out) if out is not None else Path(folder) / REPORT_HTML
    atomic_write_text(path, render(data))  # whole or not at all
    for line in _partial(data):  # said where a person reads, not only on the page
        console.print(f"report: {line}", markup=False, highlight=False, soft_wrap=True)
    return path


def _partial(data: dict[str, Any]) -> list[str]:
    """What the page says about a run that did not finish, or stopped before an earlier run's stages."""
    lines = []
    if data.get("unfinished") is not None:
        missing = ", ".join(data["unfinished"]) or "not every stage's result"
        lines.append(f"this run did not finish (stopped, or still running): no result yet from {missing}; "
                     "run the same command again to resume")
    if data.get("earlier"):
        lines.append(f"not part of this run: {', '.join(data['earlier'])} (folders an earlier run left; not shown)")
    return lines
