"""Progress where no terminal draws a bar: plain lines with the count and an ETA."""

from __future__ import annotations

from curate.core.progress import PLAIN_EVERY_ENV, plain_line, track


def test_work_logged_to_a_file_says_how_far_it_is_and_how_long_is_left(monkeypatch, capsys):
    """stderr captured (not a terminal): every advance past the interval writes one plain line; the
    last item writes none (the stage's own summary says it ended)."""
    monkeypatch.setenv(PLAIN_EVERY_ENV, "0")
    with track(4, "encoding") as advance:
        for _ in range(4):
            advance()
    lines = capsys.readouterr().err.splitlines()
    assert [ln.split(",")[0] for ln in lines] == ["encoding: 1/4 (25%)", "encoding: 2/4 (50%)", "encoding: 3/4 (75%)"]
    assert all("so far, about " in ln and ln.endswith(" left") for ln in lines)


def test_a_short_piece_of_work_writes_nothing(monkeypatch, capsys):
    monkeypatch.setenv(PLAIN_EVERY_ENV, "30")
    with track(3, "encoding") as advance:
        for _ in range(3):
            advance()
    assert capsys.readouterr().err == ""


def test_the_estimate_follows_the_rate_so_far():
    assert plain_line("training", 10, 40, 90.0) == "training: 10/40 (25%), 1 min 30 s so far, about 4 min 30 s left"
    assert plain_line("search", 1, 3, 7200.0).endswith("2 h 0 min so far, about 4 h 0 min left")


def _bar_line(monkeypatch, width: int, done: int, total: int, elapsed: float) -> str:
    """One generate bar drawn on a terminal ``width`` columns wide, ``done`` items after ``elapsed`` s."""
    import io

    from rich.console import Console

    from curate.core import progress as p

    con = Console(file=io.StringIO(), width=width, force_terminal=True, color_system=None)
    monkeypatch.setattr(p, "console", con)
    stats = p.RunStats(stage="generate")
    stats.in_flight = lambda: 4
    stats.ok, stats.completion_tokens = done, 250 * done
    stats.started -= elapsed
    bars = p.progress_bar(None, "generate")
    assert isinstance(bars, p.Progress)
    task = bars.add_task("generate short-long", total=total, stats=stats)
    bars.tasks[0].start_time -= elapsed  # the bar has run this long
    bars.advance(task, done)
    with con.capture() as cap:
        con.print(bars.make_tasks_table(bars.tasks))
    return cap.get().rstrip("\n")


def test_the_bar_shows_its_time_left_on_an_80_column_terminal(monkeypatch):
    """The count, the time so far and the time left stay whole; the rate text, last, is what gets cut."""
    line = _bar_line(monkeypatch, 80, 2, 10, 60.0)
    assert "\n" not in line and len(line) <= 80
    assert "2/10" in line and "0:01:00" in line
    assert "0:04:00" in line  # 60 s for 2 items: 4 minutes for the 8 left


def test_the_time_left_follows_the_pace_of_items_slower_than_rich_measures(monkeypatch):
    """Items of tens of seconds (the bundled model's) gave rich's own column no speed, so it showed
    -:--:-- until the end; the estimate is the time so far over the items done."""
    line = _bar_line(monkeypatch, 160, 3, 5, 90.0)
    assert "-:--:--" not in line and "0:01:00" in line  # 30 s an item, 2 left
    assert "30 s/rec" in line and "in flight 4" in line  # a wide terminal shows the whole rate
    assert "-:--:--" in _bar_line(monkeypatch, 160, 0, 5, 10.0)  # nothing done yet: no estimate


def test_generate_logged_to_a_file_writes_its_progress_lines(monkeypatch, capsys):
    """stderr not a terminal: the stage's bars (one per family, with its stats) become plain lines
    with the count, the rate and the time left, as encoding's and training's do."""
    from curate.core import progress as p

    monkeypatch.setenv(PLAIN_EVERY_ENV, "0")
    stats = p.RunStats(stage="generate")
    with p.progress_bar(None, "generate") as bars:
        task = bars.add_task("generate short-long", total=3, completed=1, stats=stats)  # 1 done by an earlier run
        stats.ok = 1
        bars.advance(task)
        bars.advance(task)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2, lines  # the last item writes none; the end, one line a bar
    assert lines[0].startswith("generate short-long: 2/3 (67%), ")
    assert " rec/s " in lines[0] and "so far, about " in lines[0] and lines[0].endswith(" left")
    assert lines[1].startswith("generate short-long: 3/3, ") and lines[1].endswith(" in all")


def test_a_resumed_run_estimates_from_its_own_items():
    assert plain_line("generate", 6, 10, 20.0, base=5).endswith("20 s so far, about 1 min 20 s left")
    assert plain_line("generate", 5, 10, 20.0, base=5).endswith("no estimate yet")


def test_a_log_hears_from_slow_work_between_items(monkeypatch, capsys):
    """An item that takes longer than the interval (the bundled model's can take minutes) still
    gets a line each interval: the timer writes it, not the next finished item."""
    import time

    from curate.core import progress as p

    monkeypatch.setenv(PLAIN_EVERY_ENV, "0.2")
    with p.progress_bar(None, "generate") as bars:
        bars.add_task("generate sts", total=2, stats=p.RunStats(stage="generate"))
        time.sleep(0.7)
    lines = capsys.readouterr().err.splitlines()[:-1]  # the last: where the bar ended
    assert lines and all(ln.startswith("generate sts: 0/2 (0%), ") and ln.endswith("no estimate yet") for ln in lines)


def test_a_slow_models_rate_reads_as_seconds_a_record():
    from curate.core.progress import RunStats, _rate_text

    stats = RunStats(stage="generate", ok=2, completion_tokens=40)
    stats.started -= 480  # 2 records in 8 minutes
    assert _rate_text(stats).startswith("240 s/rec  0.1 tok/s  failed 0")
    stats.ok, stats.completion_tokens = 200, 20000
    assert _rate_text(stats).startswith("0.42 rec/s  42 tok/s")
