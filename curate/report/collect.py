"""What the page shows, read from a run folder: a pipeline run, one stage's folder or an ablate run.

Every number comes from the files the stages wrote (``pipeline.json``, each ``report.json`` and
``run.json``, the drop records); the records shown are a seeded sample, the counts exact. Each
stage's own ``funnel`` function (its ``Stage``) says what it took in and kept, so this module
knows no stage's report layout beyond the few facts it draws charts and tables from."""

from __future__ import annotations

import json
import math
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from curate.core.errors import CurateError
from curate.core.records import Record
from curate.core.runner import REPORT, RUN_JSON
from curate.core.stage import STAGES, STARTED, Stage, llm_usage, stale_reason
from curate.report.sample import count_lines, records_by_id, sample_lines

ABLATE_REPORT = "ablate_report.json"
RANK_BUCKETS = (("1", 1, 1), ("2-3", 2, 3), ("4-10", 4, 10), ("11-100", 11, 100), (">100", 101, 10**12))


def _json(path: Path) -> dict[str, Any] | None:
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def collect(folder: str | Path, *, sample: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Everything the page shows about the run in ``folder``; ``sample`` kept and ``sample``
    dropped records at most, drawn with ``seed``."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CurateError(f"{folder}: no such run folder")
    run = _json(folder / RUN_JSON) or {}
    data: dict[str, Any] = {"folder": str(folder.resolve()), "made": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                            "funnel": [], "documents": None, "costs": [], "details": [], "ablate": None,
                            "records": [], "charts": [], "sample": None, "stopped": None, "earlier": [],
                            "unfinished": None}
    started = _json(folder / STARTED) or {}  # the runner's note, written before any stage
    orchestrator = _orchestrator(folder, started)
    if orchestrator is not None:
        data["kind"] = orchestrator.name
        record = orchestrator.path(folder, "funnel")
        pipeline = _json(record) if record.is_file() else {"finished": False}
        if pipeline is None:
            raise CurateError(f"{record}: not a JSON object")
        data["documents"] = pipeline.get("documents")
        data["stopped"] = pipeline.get("stopped")
        # only the stages this run reached, made from what their upstream holds now, are its own: a
        # folder an earlier run left (this one stopped before it, or wrote its upstream anew) is
        # named as such, never presented as this run's
        this_run = pipeline.get("stages") or {}
        order = pipeline.get("order") or list(this_run)
        digests: dict[Path, str | None] = {}  # each product hashed once for every stage's chain
        current = [name for name in this_run if name in STAGES and (folder / name).is_dir()
                   and stale_reason(folder / name, digests) is None]
        parts = [(name, folder / name, this_run[name], pipeline.get(name)) for name in current]
        followers = [name for name, stage in STAGES.items() if stage.follows in current
                     and _newer(folder / name / REPORT, folder / stage.follows / REPORT)
                     and stale_reason(folder / name, digests) is None]
        parts += [(name, folder / name, "ran", None) for name in followers]
        data["earlier"] = [name for name in dict.fromkeys((*order, *STAGES.names()))
                           if name not in current and name not in followers and (folder / name / RUN_JSON).is_file()]
        if not pipeline.get("finished", True):  # killed, or still running
            data["unfinished"] = [name for name in order if name not in this_run]
    elif (folder / ABLATE_REPORT).is_file():
        data["kind"] = "ablate"
        data["ablate"] = _ablate(folder)
        parts = []
    elif run.get("stage") in STAGES and STAGES.get(run["stage"]).members is None:
        data["kind"] = run["stage"]
        parts = [(run["stage"], folder, "ran", None)]
    else:
        records = ", ".join(s.writes["funnel"] for _, s in STAGES.items() if s.members is not None and "funnel" in s.writes)
        raise CurateError(f"{folder}: not a run folder (no {records}, {ABLATE_REPORT} or {RUN_JSON} of a stage)")
    data["title"] = f"curate {data['kind']}: {folder.name}"
    for name, path, state, entry in parts:
        report = _json(path / REPORT)
        if report is None:
            continue
        if entry is None:
            stage = STAGES.get(name)
            entry = stage.funnel(report, path) if stage.funnel else None
        data["funnel"].append(_funnel_row(name, state, entry))
        data["costs"].append(_cost_row(name, path, report))
        if STAGES.get(name).details is not None:
            data["details"].append({"stage": name, "rows": STAGES.get(name).details(report)})
    if parts:
        _sample_records(data, parts, sample, seed)
    return data


def _orchestrator(folder: Path, started: dict[str, Any]) -> Stage | None:
    """The orchestrator (a stage whose folder holds other stages' runs: ``Stage.members``) whose
    run ``folder`` holds: its record is there, or its run began there (the runner's note)."""
    for name, stage in STAGES.items():
        if stage.members is not None and (started.get("stage") == name or (
                "funnel" in stage.writes and stage.path(folder, "funnel").is_file())):
            return stage
    return None


def _newer(mine: Path, theirs: Path) -> bool:
    """``mine`` was written after ``theirs`` (a follower's report after the product it read)."""
    try:
        return mine.stat().st_mtime_ns >= theirs.stat().st_mtime_ns
    except OSError:
        return False


# ----------------------------------------------------------------------------- the funnel


def _funnel_row(name: str, state: str | None, entry: dict[str, Any] | None) -> dict[str, Any]:
    """One stage's line, drawn from the stage's own ``FunnelRow`` (what the terminal prints too):
    what it took in, kept and dropped (by reason), with each number's key in ``pipeline.json``
    so a reader (and a test) can check it there."""
    row: dict[str, Any] = {"stage": name, "state": state, "steps": [], "cells": [], "dropped": {}}
    stage = STAGES.get(name)
    if not entry or stage.present is None:
        return row
    shown = stage.present(entry)
    for label, key in shown.cells:
        value: Any = entry
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        # a number, or a short text a number needs beside it (train's verdict on its change)
        if (isinstance(value, (int, float)) and not isinstance(value, bool)) or (isinstance(value, str) and value):
            row["cells"].append({"label": label, "value": value, "key": f"{name}.{key}"})
    row["dropped"] = dict(shown.dropped)
    for i, (step, n_in, kept, lost) in enumerate(shown.steps):
        row["steps"].append({"step": step, "in": n_in, "kept": kept, "key": f"{name}.steps.{i}",
                             "dropped": [{"reason": r, "count": c, "share": c / n_in if n_in else 0.0}
                                         for r, c in sorted(lost.items(), key=lambda kv: -kv[1])]})
    return row


# ----------------------------------------------------------------------------- time and cost


def _cost_row(name: str, path: Path, report: dict[str, Any]) -> dict[str, Any]:
    """Wall time, requests, tokens and cost of one stage: the LLM numbers as the stage reads them
    from its report (``Stage.usage``)."""
    run = _json(path / RUN_JSON) or {}
    usage = STAGES.get(name).usage
    found = usage(report) if usage is not None else llm_usage(None, "")
    seconds = run.get("seconds")
    return {"stage": name, "seconds": seconds if isinstance(seconds, (int, float)) else None, **found}


# ----------------------------------------------------------------------------- export and ablate


def _ablate(folder: Path) -> dict[str, Any]:
    import base64

    from curate.flows.ablate.report import mixed_precision_warning

    report = _json(folder / ABLATE_REPORT) or {}
    chart = report.get("chart")
    png = folder / chart if isinstance(chart, str) else None
    picture = ("data:image/png;base64," + base64.b64encode(png.read_bytes()).decode("ascii")
               if png is not None and png.is_file() else None)
    rows = [{k: r.get(k) for k in ("arm", "kind", "mean", "std", "values", "vs_base", "vs_best_baseline", "train_s")}
            for r in report.get("summary") or []]
    return {"title": report.get("title"), "metric": report.get("metric"), "rows": rows, "chart": picture,
            "best_baseline": report.get("best_baseline"), "budget": report.get("budget"), "seeds": report.get("seeds"),
            "warning": mixed_precision_warning(report.get("precisions") or {})}


# ----------------------------------------------------------------------------- records


def _files(parts: list[tuple[str, Path, Any, Any]]) -> tuple[tuple[str, Path] | None, list[tuple[str, Path, Path | None]]]:
    """The run's final records file (with its stage), and each stage's drop file with the records it read."""
    final: tuple[str, Path] | None = None
    drops: list[tuple[str, Path, Path | None]] = []
    previous: Path | None = None
    for name, path, _state, _entry in parts:
        stage = STAGES.get(name)
        records = stage.path(path) if "records" in stage.writes else None
        source = previous if len(parts) > 1 else _input_of(path)
        if "drops" in stage.writes and stage.path(path, "drops").is_file():
            drops.append((name, stage.path(path, "drops"), source))
        if records is not None and records.is_file():
            final, previous = (name, records), records
    return final, drops


def _input_of(path: Path) -> Path | None:
    """The records file a single stage's run read, as its report names it."""
    given = (_json(path / REPORT) or {}).get("input")
    given = given.get("path") if isinstance(given, dict) else given
    if not isinstance(given, str):
        return None
    for candidate in (Path(given), path / given):
        if candidate.is_file():
            return candidate
    return None


def _sample_records(data: dict[str, Any], parts, k: int, seed: int) -> None:
    final, drops = _files(parts)
    kept_total, kept = sample_lines([final[1]], k, seed) if final else (0, [])
    drop_total, dropped = sample_lines([p for _, p, _ in drops], k, seed + 1)
    stage_of = {p: (name, source) for name, p, source in drops}
    wanted: dict[Path, set[str]] = {}
    for path, d in dropped:
        source = stage_of[path][1]
        if source is not None and isinstance(d.get("id"), str):
            wanted.setdefault(source, set()).add(d["id"])
    joined = {source: records_by_id(source, ids) for source, ids in wanted.items()}
    rows = [_record_row(obj, "kept", final[0]) for _, obj in kept] if final else []
    for path, d in dropped:
        name, source = stage_of[path]
        rec = joined.get(source, {}).get(d.get("id")) if source is not None else None
        rows.append(_drop_row(d, rec, name))
    data["records"] = rows
    data["sample"] = {"kept_total": kept_total, "kept_shown": len(kept), "dropped_total": drop_total,
                      "dropped_shown": len(dropped), "seed": seed, "per_side": k,
                      "kept_file": str(final[1]) if final else None, "drop_files": [str(p) for _, p, _ in drops]}
    data["charts"] = _charts(rows)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _record_row(obj: dict[str, Any], status: str, stage: str) -> dict[str, Any]:
    try:  # read as every stage reads it (older schemas upgraded); a row that is not a record shows what it has
        obj = Record.from_dict(obj).to_dict()
    except (ValueError, TypeError):
        pass
    teacher = obj.get("teacher") if isinstance(obj.get("teacher"), dict) else {}
    scores = obj.get("scores") if isinstance(obj.get("scores"), dict) else {}
    judges = scores.get("judges") if isinstance(scores.get("judges"), dict) else {}
    negatives = []
    for n in obj.get("negatives") or []:
        if not isinstance(n, dict):
            continue
        rank = n.get("teacher_rank") if n.get("teacher_rank") is not None else n.get("mine_rank")
        negatives.append({"text": _text(n.get("text")) or "", "level": n.get("level"), "score": n.get("score"),
                          "teacher_score": n.get("teacher_score"), "source": n.get("source"), "rank": rank,
                          "judges": n.get("judges")})
    return {"id": obj.get("id"), "status": status, "stage": stage, "step": None, "reason": None, "detail": None,
            "family": obj.get("task_type"), "task": _text(obj.get("task")), "query": _text(obj.get("query")) or "",
            "positive": _text(obj.get("positive")) or "", "positive_title": _text(obj.get("positive_title")),
            "language": obj.get("language"), "negatives": negatives,
            "teacher": {k: teacher.get(k) for k in ("model", "positive", "positive_rank", "margin", "pool")} if teacher else None,
            "judges": judges or None}


def _drop_row(d: dict[str, Any], rec: dict[str, Any] | None, stage: str) -> dict[str, Any]:
    """A drop record beside the record it dropped (or one negative of), when that record is found."""
    row = _record_row(rec or {}, "dropped", stage)
    row.update(id=d.get("id"), stage=d.get("stage") or stage, step=d.get("step"), reason=d.get("reason"),
               detail=d.get("detail"), target=d.get("target", "record"))
    if d.get("target") == "negative":
        row["dropped_negative"] = {"text": _text(d.get("text")) or "", "level": d.get("level")}
    if rec is None and not row["query"]:  # a generate failure: no record was made
        row["query"] = _text((d.get("detail") or {}).get("query") if isinstance(d.get("detail"), dict) else None) or ""
    return row


# ----------------------------------------------------------------------------- charts


def _histogram(values: list[float], span: tuple[float, float], bins: int = 20) -> list[dict[str, Any]]:
    """Counts over ``bins`` equal bins of ``span`` (shared by every series of a chart, so one axis
    reads for all of them); each bin has its edges."""
    if not values:
        return []
    lo, hi = span
    width = (hi - lo) / bins or 1.0
    counts = [0] * bins
    for v in values:
        counts[min(max(int((v - lo) / width), 0), bins - 1)] += 1
    edges = [lo + i * width for i in range(bins)] + [hi]
    return [{"label": f"{edges[i]:.3g}", "lo": edges[i], "hi": edges[i + 1], "count": c} for i, c in enumerate(counts)]


def _score_chart(title: str, note: str, series: dict[str, list[float]], bins: int = 20) -> dict[str, Any]:
    """A histogram chart whose series share one range, drawn on one axis from its low to its high end."""
    every = [v for values in series.values() for v in values]
    span = (min(every), max(every))
    if span[1] == span[0]:
        span = (span[0], span[0] + 1.0)
    return {"title": title, "note": note, "range": list(span),
            "series": [{"name": name, "bins": _histogram(values, span, bins)} for name, values in series.items()]}


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _charts(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Distributions over the sampled records: teacher scores, margins, positive ranks, judge
    scores and negatives per record (the page says they are of the sample)."""
    kept = [r for r in rows if r["status"] == "kept"]
    positive = [r["teacher"]["positive"] for r in kept if r["teacher"] and _num(r["teacher"].get("positive"))]
    negative = [n["teacher_score"] for r in kept for n in r["negatives"] if _num(n["teacher_score"])]
    margins = [r["teacher"]["margin"] for r in kept if r["teacher"] and _num(r["teacher"].get("margin"))]
    ranks = [r["teacher"]["positive_rank"] for r in kept if r["teacher"] and _num(r["teacher"].get("positive_rank"))]
    ranks += [r["detail"]["rank"] for r in rows if r["status"] == "dropped" and isinstance(r.get("detail"), dict)
              and _num(r["detail"].get("rank"))]
    judge: dict[str, list[float]] = {}
    for r in rows:
        for check, verdict in (r.get("judges") or {}).items():
            for key, value in (verdict.items() if isinstance(verdict, dict) else ()):
                if _num(value):
                    judge.setdefault(f"{check} {key}", []).append(float(value))
    charts = []
    if positive or negative:
        charts.append(_score_chart("teacher scores", "the teacher's score of each query's positive and of each negative",
                                   {"positive": positive, "negatives": negative}))
    if margins:
        charts.append(_score_chart("margins", "positive score minus the best negative's", {"margin": margins}))
    if ranks:
        bins = [{"label": label, "count": sum(lo <= x <= hi for x in ranks)} for label, lo, hi in RANK_BUCKETS]
        charts.append({"title": "positive ranks", "note": "where the teacher ranks each query's own passage",
                       "series": [{"name": "rank", "bins": bins}]})
    for name, values in sorted(judge.items()):
        charts.append(_score_chart(f"judge: {name}", "the LLM judge's scores", {name: values}, bins=10))
    per = Counter(len(r["negatives"]) for r in kept)
    if per:
        charts.append({"title": "negatives per record", "note": "kept records",
                       "series": [{"name": "records", "bins": [{"label": str(n), "count": per[n]} for n in sorted(per)]}]})
    return charts


__all__ = ["collect", "count_lines"]
