"""The table ``curate eval`` prints: the scores, the light-vs-full gaps, sizes and seconds."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from curate.evaluate.metrics import DEFAULT_METRICS

_HEAD = {"ndcg@10": "NDCG@10", "recall@100": "Recall@100", "mrr@10": "MRR@10"}


def _cells(metrics: dict[str, float] | None, signed: bool = False) -> list[str]:
    fmt = "{:+.4f}" if signed else "{:.4f}"
    return [fmt.format(metrics[m]) if metrics and m in metrics else "-" for m, _, _ in DEFAULT_METRICS]


def report_table(report: dict[str, Any]) -> Table:
    model = report["model"]
    name = model["name"] + (f" + BM25 at {model['bm25_weight']:g}" if model.get("bm25_weight") else "")
    table = Table(title=f"curate eval: {name} on {report['dataset']['path']} "
                        f"({report['dataset']['split']})", title_justify="left")
    table.add_column("run")
    for m, _, _ in DEFAULT_METRICS:
        table.add_column(_HEAD.get(m, m), justify="right")
    for col in ("queries", "docs", "seconds"):
        table.add_column(col, justify="right")
    secs = f"{report['seconds']['evaluation']:.1f}"
    table.add_row(f"{report['mode']} ({model['precision']})", *_cells(report["metrics"]),
                  str(report["queries"]), str(report["docs"]), secs)
    light = report.get("light_set")
    if light:
        diff = report["difference"]
        full = diff.get("full")
        if full:
            seconds = full.get("seconds")
            table.add_row(f"full ({full['precision']}, {full['source']})", *_cells(full["metrics"]),
                          str(light["full"]["queries"]), str(light["full"]["docs"]),
                          f"{seconds:.1f}" if isinstance(seconds, (int, float)) else "-")
            table.add_row("light - full", *_cells(diff["model"], signed=True), "", "", "")
        ts = light["teacher_scores"]
        table.add_section()
        table.add_row("teacher full", *_cells(ts["full"]), str(light["full"]["queries"]),
                      str(light["full"]["docs"]), "")
        table.add_row("teacher light", *_cells(ts["light"]), str(light["queries"]), str(light["docs"]), "")
        table.add_row("teacher light - full", *_cells(ts["difference"], signed=True), "", "", "")
    notes = [f"encoded {report['encoded']}, from cache {report['cache_hits']}",
             f"cpu {report['cpu_seconds']:.1f} s"]
    if light:
        notes.append(f"light set {'built' if light['built'] else 'reused'}: {light['path']}")
    table.caption = "; ".join(notes)
    table.caption_justify = "left"
    return table


def print_report(report: dict[str, Any]) -> None:
    Console(soft_wrap=False).print(report_table(report))
