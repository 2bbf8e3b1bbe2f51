"""Run statistics, a live progress bar, and the end-of-run summary."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)
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
    price: float | None = None  # of 1,000 tokens (--price-per-1k-tokens): the run's cost is reported with it
    in_flight: Any = None  # () -> requests the servers take at once now (the client's adaptive limit), for the bar

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
            **({"cost": token_cost(self.prompt_tokens + self.completion_tokens, self.price)}
               if self.price is not None else {}),
            **self.extra,
        }


def token_cost(tokens: int | float, price: float | None) -> float | None:
    """What ``tokens`` cost at ``price`` per 1,000 (None: no price given)."""
    return None if price is None else round(tokens / 1000 * price, 4)


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
        flight = f"  in flight {s.in_flight()}" if s.in_flight is not None else ""
        return Text(f"{s.ok / t:.2f} rec/s  {s.completion_tokens / t:.0f} tok/s  failed {s.failed}{flight}")


def progress_bar(stats: RunStats | None, description: str) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        _RateColumn(stats),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
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
    if d.get("cost") is not None:
        table.add_row("cost", f"${d['cost']:,.4f} at ${stats.price:g} per 1,000 tokens")
    console.print(table)


_bars = {"quiet": False}  # curate ablate turns the stages' bars off (its own lines stay readable)


def quiet_bars(quiet: bool = True) -> None:
    """Show (or not) the bars ``track`` draws unless a caller asks otherwise."""
    _bars["quiet"] = quiet


def note(line: str) -> None:
    """One plain progress line (a stage's next step), unless bars are quiet (``quiet_bars``)."""
    if not _bars["quiet"]:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


PLAIN_EVERY_ENV = "CURATE_PROGRESS_SECONDS"  # how often a plain progress line is written (default 30)


@contextmanager
def track(total: int, description: str, quiet: bool | None = None) -> Iterator[Callable[[int], None]]:
    """One bar with an ETA for a long piece of work (encoding, searching, judging, training);
    yields ``advance(n=1)``. Callers open it only for work big enough to matter. Nothing when
    ``quiet`` (default: ``quiet_bars``) or when ``total`` is 0. When stderr is not a terminal (a
    log file, CI, a background job) a bar's redraws would be lost, so a plain line with the count
    and the ETA is written instead every ``$CURATE_PROGRESS_SECONDS`` (30) seconds of work."""
    quiet = _bars["quiet"] if quiet is None else quiet
    if quiet or total <= 0:
        yield lambda n=1: None
        return
    if not console.is_terminal:
        yield _plain_lines(total, description)
        return
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), console=console, transient=False, refresh_per_second=2) as progress:
        task = progress.add_task(description, total=total)
        yield lambda n=1: progress.advance(task, n)


def _plain_lines(total: int, description: str) -> Callable[[int], None]:
    """``advance`` for a log: a ``plain_line`` once every interval, none for the last item."""
    import os

    try:
        every = float(os.environ.get(PLAIN_EVERY_ENV) or 30)
    except ValueError:
        every = 30.0
    started = said = time.perf_counter()
    done = 0

    def advance(n: int = 1) -> None:
        nonlocal done, said
        done += n
        now = time.perf_counter()
        if now - said >= every and done < total:
            said = now
            console.print(plain_line(description, done, total, now - started), markup=False, highlight=False,
                          soft_wrap=True)

    return advance


def plain_line(description: str, done: int, total: int, elapsed: float) -> str:
    """``encoding: 120/2196 (5%), 1 min 25 s so far, about 24 min left``."""
    left = elapsed / done * (total - done) if done else None
    eta = f"about {_duration(left)} left" if left is not None else "no estimate yet"
    return f"{description}: {done}/{total} ({done / total:.0%}), {_duration(elapsed)} so far, {eta}"


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"
