"""Run statistics, a live progress bar, and the end-of-run summary."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

console = Console(stderr=True)


@dataclass
class RunStats:
    stage: str
    total: int = 0
    ok: int = 0
    failed: int = 0
    resumed: int = 0  # already done by an earlier run, not redone
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0
    cached: int = 0
    reasons: Counter = field(default_factory=Counter)
    started: float = field(default_factory=time.perf_counter)
    ended: float | None = None  # set when the work ended before the run did (a family of a shared queue)
    extra: dict[str, Any] = field(default_factory=dict)

    def add(self, ok: bool, prompt_tokens: int = 0, completion_tokens: int = 0, reason: str | None = None,
            cached: bool = False) -> None:
        if ok:
            self.ok += 1
        else:
            self.failed += 1
            self.reasons[reason_kind(reason)] += 1
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.cached += int(cached)

    @property
    def elapsed(self) -> float:
        return (self.ended or time.perf_counter()) - self.started

    def as_dict(self) -> dict[str, Any]:
        wall = self.elapsed
        return {
            "stage": self.stage,
            "counts": {"requested": self.total, "ok": self.ok, "failed": self.failed, "resumed": self.resumed},
            "failure_reasons": dict(self.reasons.most_common()),
            "tokens": {"prompt": self.prompt_tokens, "completion": self.completion_tokens},
            "requests_sent": self.requests,
            "answers_from_cache": self.cached,
            "wall_seconds": round(wall, 2),
            "records_per_second": round(self.ok / wall, 3) if wall > 0 else None,
            "completion_tokens_per_second": round(self.completion_tokens / wall, 1) if wall > 0 else None,
            **self.extra,
        }


def reason_kind(reason: str | None) -> str:
    """The reason's family ('http-429', 'schema', ...) for counting; details stay in failed.jsonl."""
    return (reason or "unknown").split(":", 1)[0].split(" ", 1)[0]


class _RateColumn(ProgressColumn):
    """A bar's rate: of the stats its task was added with (``add_task(..., stats=...)``: one bar
    per family of a shared queue), else of the progress's own."""

    def __init__(self, stats: RunStats | None):
        super().__init__()
        self.stats = stats

    def render(self, task) -> Text:
        s = task.fields.get("stats") or self.stats
        if s is None:
            return Text("")
        t = max(s.elapsed, 1e-6)
        return Text(f"{s.ok / t:.2f} rec/s  {s.completion_tokens / t:.0f} tok/s  failed {s.failed}")


def progress_bar(stats: RunStats | None, description: str) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        _RateColumn(stats),
        TimeElapsedColumn(),
        console=console,
        transient=False,
        refresh_per_second=2,  # redrawing costs CPU that the event loop needs at thousands of requests/s
    )


def print_summary(stats: RunStats, title: str) -> None:
    d = stats.as_dict()
    table = Table(title=title, show_header=False, title_justify="left")
    c = d["counts"]
    table.add_row("records", f"{c['ok']} ok, {c['failed']} failed, {c['resumed']} already done")
    for reason, n in d["failure_reasons"].items():
        table.add_row(f"  failed: {reason}", str(n))
    table.add_row("tokens", f"{d['tokens']['prompt']} prompt, {d['tokens']['completion']} completion")
    table.add_row("requests", f"{d['requests_sent']} sent, {d['answers_from_cache']} answers from cache")
    table.add_row("wall time", f"{d['wall_seconds']:.1f} s")
    if d["completion_tokens_per_second"] is not None:
        table.add_row("throughput", f"{d['records_per_second']} records/s, {d['completion_tokens_per_second']} tokens/s")
    console.print(table)
