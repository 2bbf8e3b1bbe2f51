"""Run statistics, a live progress bar, and the end-of-run summary."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Column, Table
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
        super().__init__(table_column=Column(overflow="ellipsis"))  # the one column a narrow terminal cuts
        self.stats = stats

    def render(self, task) -> Text:
        s = task.fields.get("stats") or self.stats
        if s is None:
            return Text("")
        return Text(_rate_text(s), no_wrap=True, overflow="ellipsis")


def _rate_text(s: RunStats) -> str:
    """``0.25 rec/s  40 tok/s  failed 0``; a slow model's pace as seconds a record (``27 s/rec``),
    which two decimals of records a second would show as 0.00."""
    t = max(s.elapsed, 1e-6)
    rec = f"{s.ok / t:.2f} rec/s" if s.ok / t >= 0.1 or not s.ok else f"{t / s.ok:.0f} s/rec"
    tok = s.completion_tokens / t
    flight = f"  in flight {s.in_flight()}" if s.in_flight is not None else ""
    return f"{rec}  {tok:.0f} tok/s  failed {s.failed}{flight}" if tok >= 10 or not s.completion_tokens else \
        f"{rec}  {tok:.1f} tok/s  failed {s.failed}{flight}"


def time_left(elapsed: float, done: int, left: int) -> float | None:
    """Seconds left at the pace so far: ``elapsed`` over the ``done`` items this run finished,
    times the ``left`` items; None before the first item (no pace yet)."""
    return elapsed / done * left if done > 0 and elapsed > 0 else None


class _EtaColumn(ProgressColumn):
    """Time left at the pace since the bar started (``time_left``). rich's own column measures the
    speed over the last 30 seconds only, so work whose items take longer than that (the bundled
    model writes one in tens of seconds) showed ``-:--:--`` until it ended."""

    max_refresh = 0.5

    def render(self, task) -> Text:
        if task.finished:
            return Text("0:00:00", style="progress.remaining")
        left = None
        if task.total is not None and task.elapsed:
            left = time_left(task.elapsed, int(task.completed - task.fields.get("base", 0)),
                             int(task.total - task.completed))
        if left is None:
            return Text("-:--:--", style="progress.remaining")
        return Text(str(timedelta(seconds=int(left))), style="progress.remaining")


class _Bars(Progress):
    """rich's Progress that remembers each bar's starting count (``base``: items done by an
    earlier run), so the time left follows only this run's pace."""

    def add_task(self, description: str, start: bool = True, total: float | None = 100.0, completed: int = 0,
                 visible: bool = True, **fields: Any):
        fields.setdefault("base", completed)
        return super().add_task(description, start=start, total=total, completed=completed, visible=visible,
                                **fields)


class _PlainBars:
    """The bars' stand-in when stderr is not a terminal (a log file, CI, a background job), where
    redraws are lost: the same calls (``add_task``, ``advance``, ``update``), and for each bar a
    ``plain_line`` once every ``$CURATE_PROGRESS_SECONDS`` (30) seconds, none after its last item.
    Used as a context manager, a timer writes the lines even while no item finishes (the bundled
    model takes minutes over some), so a log is never silent for long. ``track`` and
    ``progress_bar`` both use it: every stage logs its progress the one way."""

    def __init__(self, stats: RunStats | None = None, final: bool = False):
        import threading

        self.stats = stats
        self.final = final  # at the end, one line a bar with where it ended (as rich's bars leave theirs)
        self.every = _plain_every()
        self._bars: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._timer: threading.Thread | None = None

    def __enter__(self) -> _PlainBars:
        import threading

        if self.every > 0:
            self._timer = threading.Thread(target=self._tick, name="curate-progress", daemon=True)
            self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._timer is not None:
            self._timer.join()
        if self.final:
            now = time.perf_counter()
            for bar in self._bars:
                s = bar["stats"]
                rate = f", {_rate_text(s)}" if s is not None else ""
                console.print(f"{bar['description']}: {bar['completed']}/{bar['total']}{rate}, "
                              f"{_duration(now - bar['started'])} in all", markup=False, highlight=False,
                              soft_wrap=True)

    def _tick(self) -> None:
        while not self._stop.wait(min(self.every, 5.0)):
            for bar in list(self._bars):
                self._maybe_say(bar)

    def add_task(self, description: str, total: float | None = None, completed: int = 0, **fields: Any) -> int:
        now = time.perf_counter()
        self._bars.append({"description": description, "total": int(total or 0), "completed": int(completed),
                           "base": int(completed), "started": now, "said": now,
                           "stats": fields.get("stats") or self.stats})
        return len(self._bars) - 1

    def advance(self, task: int, advance: float = 1) -> None:
        bar = self._bars[task]
        bar["completed"] += int(advance)
        self._maybe_say(bar)

    def update(self, task: int, completed: float | None = None, advance: float | None = None, **_: Any) -> None:
        bar = self._bars[task]
        if completed is not None:
            bar["completed"] = int(completed)
        if advance:
            bar["completed"] += int(advance)
        self._maybe_say(bar)

    def _maybe_say(self, bar: dict[str, Any]) -> None:
        with self._lock:
            now = time.perf_counter()
            if now - bar["said"] < self.every or bar["completed"] >= bar["total"]:
                return
            bar["said"] = now
        s = bar["stats"]
        console.print(plain_line(bar["description"], bar["completed"], bar["total"], now - bar["started"],
                                 base=bar["base"], rate=_rate_text(s) if s is not None else None),
                      markup=False, highlight=False, soft_wrap=True)


def progress_bar(stats: RunStats | None, description: str) -> Progress | _PlainBars:
    """Bars for a stage's LLM work (one per family: ``add_task(..., stats=...)``); on a terminal,
    rich's live bars with the time left; elsewhere, plain lines (``_PlainBars``)."""
    if not console.is_terminal:
        return _PlainBars(stats, final=True)
    return _Bars(
        TextColumn("[bold]{task.description}"),
        BarColumn(bar_width=20),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        _EtaColumn(),
        _RateColumn(stats),  # last: on a narrow terminal it is cut, not the count or the time left
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


def quiet_bars(quiet: bool = True) -> bool:
    """Show (or not) the bars ``track`` draws unless a caller asks otherwise; what it was before
    (for the caller to put back)."""
    before, _bars["quiet"] = _bars["quiet"], quiet
    return before


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
        with _PlainBars() as bars:
            task = bars.add_task(description, total=total)
            yield lambda n=1: bars.advance(task, n)
        return
    with _Bars(TextColumn("[bold]{task.description}"), BarColumn(bar_width=20), MofNCompleteColumn(),
               TimeElapsedColumn(), _EtaColumn(), console=console, transient=False, refresh_per_second=2) as progress:
        task = progress.add_task(description, total=total)
        yield lambda n=1: progress.advance(task, n)


def _plain_every() -> float:
    """Seconds between two plain progress lines (``$CURATE_PROGRESS_SECONDS``, default 30)."""
    import os

    try:
        return float(os.environ.get(PLAIN_EVERY_ENV) or 30)
    except ValueError:
        return 30.0


def plain_line(description: str, done: int, total: int, elapsed: float, base: int = 0,
               rate: str | None = None) -> str:
    """``encoding: 120/2196 (5%), 1 min 25 s so far, about 24 min left``; ``base``: items done
    before this run (a resumed one), left out of the pace; ``rate``: a stage's own rate text
    (generate: records and tokens a second), put after the count."""
    left = time_left(elapsed, done - base, total - done)
    eta = f"about {_duration(left)} left" if left is not None else "no estimate yet"
    return f"{description}: {done}/{total} ({done / total:.0%}), {rate + ', ' if rate else ''}" \
           f"{_duration(elapsed)} so far, {eta}"


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"
