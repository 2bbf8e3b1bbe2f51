"""Time and cost ahead and during a run: the estimate's arithmetic, the price's cost, and that a
price changes no run's identity (curate.core.estimate, curate.core.progress)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from curate.core import estimate as est
from curate.core.estimate import Estimate, Pace, duration, money, most_tokens, plan, sample
from curate.core.progress import RunStats, print_summary, token_cost


def test_plan_counts_prompt_tokens_from_characters_and_bounds_completion_tokens():
    e = plan("generate", ["x" * 1040, "y" * 1040], requests=200, completion_tokens_max=200 * 512, in_flight=4,
             price=0.002)
    assert e.prompt_tokens == 200 * 1040 // est.CHARS_PER_TOKEN == 52_000
    assert e.completion_tokens_max == 102_400
    assert e.plan_line() == ("generate: estimate 200 requests, ~52,000 prompt tokens, up to 102,400 completion "
                             "tokens (up to ~$0.31 at $0.002/1k); time once the first answers are in")


def test_plan_without_a_price_shows_no_cost_and_without_max_tokens_no_bound():
    e = plan("judge_query", ["abcd"], requests=3, completion_tokens_max=None, in_flight=3, price=None)
    line = e.plan_line()
    assert "$" not in line and "unbounded" in line
    assert "all sent at once" in line  # no more requests than fit in flight: nothing to extrapolate
    assert "cost" not in e.as_dict()


def test_only_a_plan_with_something_to_say_is_printed(monkeypatch):
    lines = []
    monkeypatch.setattr(est, "say", lines.append)
    plan("a", ["x"], requests=3, completion_tokens_max=None, in_flight=3, price=None).announce()  # one wave, no price
    assert lines == []
    plan("b", ["x"], requests=3, completion_tokens_max=None, in_flight=3, price=0.1).announce()  # its cost
    plan("c", ["x"], requests=9, completion_tokens_max=None, in_flight=3, price=None).announce()  # its time to come
    assert [line.split(":")[0] for line in lines] == ["b", "c"]


def test_most_tokens_is_unbounded_when_one_request_has_no_max():
    assert most_tokens([512, 256]) == 768
    assert most_tokens([512, None]) is None


def test_sample_spreads_evenly_and_keeps_short_lists_whole():
    assert sample(list(range(5)), 10) == [0, 1, 2, 3, 4]
    assert sample(list(range(100)), 4) == [0, 25, 50, 75]


def test_measured_total_is_elapsed_plus_what_is_left_at_the_measured_rate():
    e = plan("generate", ["x" * 400], requests=200, completion_tokens_max=200 * 512, in_flight=4, price=0.002)
    pace = Pace(e, started=100.0, answers=4, tokens=4 * 700)
    left = pace.measure(105.0)  # 4 answers in 5 s: 0.8 a second, 196 to go
    assert left == pytest.approx(196 / 0.8)
    assert e.rate == pytest.approx(0.8)
    assert e.seconds == pytest.approx(5 + 196 / 0.8)
    assert e.cost == pytest.approx(round(700 * 200 / 1000 * 0.002, 4))  # measured tokens per answer, every request
    assert e.time_line(left) == ("generate: estimate ~4m10s in all for 200 requests at 0.80 requests/s measured "
                                 "(about 4m05s left), ~$0.28 at $0.002/1k")


def test_pace_prints_its_line_once_the_second_wave_is_in(monkeypatch):
    lines = []
    monkeypatch.setattr(est, "say", lines.append)
    e = plan("generate", ["x"], requests=40, completion_tokens_max=None, in_flight=4, price=None)
    pace = Pace(e)
    pace.begin()
    for _ in range(7):
        pace.answered()
    assert lines == [] and e.seconds is None  # the cold first wave and 3 of the next: too early to tell
    pace.answered()
    assert len(lines) == 1 and lines[0].startswith("generate: estimate ~") and e.seconds is not None
    for _ in range(10):
        pace.answered()
    assert len(lines) == 1  # one line, not one per answer


def test_the_rate_is_the_second_waves_when_the_first_one_starts_cold(monkeypatch):
    """A server whose first wave takes 10 s (cold start) and each later one 2 s: 40 requests, 4 at
    once, take 10 + 9 * 2 = 28 s; measured from the first request the rate would say 2 waves in
    12 s, 6 s a wave: 60 s."""
    clock = {"now": 0.0}
    monkeypatch.setattr(est.time, "perf_counter", lambda: clock["now"])
    monkeypatch.setattr(est, "say", lambda line: None)
    e = plan("generate", ["x"], requests=40, completion_tokens_max=None, in_flight=4, price=None)
    pace = Pace(e)
    pace.begin()
    for wave_ends in (10.0, 12.0):
        clock["now"] = wave_ends
        for _ in range(4):
            pace.answered()
    assert e.rate == pytest.approx(2.0) and e.seconds == pytest.approx(12 + 32 / 2.0) == 28


def test_two_waves_take_the_first_waves_rate(monkeypatch):
    lines = []
    monkeypatch.setattr(est, "say", lines.append)
    e = plan("generate", ["x"], requests=8, completion_tokens_max=None, in_flight=4, price=None)
    pace = Pace(e)
    for _ in range(4):
        pace.answered()
    assert len(lines) == 1 and e.seconds is not None  # no room for a second wave to measure


def test_pace_never_measures_when_everything_went_at_once(monkeypatch):
    lines = []
    monkeypatch.setattr(est, "say", lines.append)
    e = plan("brainstorm sts", ["x"], requests=3, completion_tokens_max=None, in_flight=3, price=None)
    pace = Pace(e)
    for _ in range(3):
        pace.answered()
    assert lines == [] and e.seconds is None


def test_a_family_gets_its_share_of_the_queue_estimate():
    e = Estimate("generate", 40, 10_000, 81_920, in_flight=4, price=0.01, seconds=5.0, rate=8.0, cost=0.9)
    parts = [e.as_dict(10), e.as_dict(30)]
    assert sum(p["requests"] for p in parts) == 40
    assert sum(p["seconds"] for p in parts) == pytest.approx(5.0)
    assert sum(p["cost"] for p in parts) == pytest.approx(0.9)


def test_duration_and_money_read_well():
    assert [duration(s) for s in (0.4, 52, 250, 7500)] == ["0s", "52s", "4m10s", "2h05m"]
    assert money(0.3088) == "$0.31" and money(0.0123) == "$0.0123" and money(1234.5) == "$1,234.50"


def test_cost_is_tokens_over_a_thousand_times_the_price():
    assert token_cost(154_400, 0.002) == pytest.approx(0.3088)
    assert token_cost(1, 0.002) == 0.0  # rounded to 4 decimals
    assert token_cost(1000, None) is None


def test_run_stats_report_and_print_cost_only_when_priced(monkeypatch):
    plain = RunStats("generate")
    plain.add(True, 1000, 500)
    assert "cost" not in plain.as_dict()
    priced = RunStats("generate", price=0.002)
    priced.add(True, 1000, 500)
    assert priced.as_dict()["cost"] == pytest.approx(0.003)
    out = io.StringIO()
    monkeypatch.setattr("curate.core.progress.console", Console(file=out, width=200))
    print_summary(priced, "generate x")
    assert "cost" in out.getvalue() and "$0.0030" in out.getvalue()
    out.truncate(0)
    print_summary(plain, "generate x")
    assert "cost" not in out.getvalue()


def test_a_price_changes_no_fingerprint():
    from curate.core.stage import fingerprint
    from curate.generate.stage import STAGE, GenerateOptions
    from curate.llm.options import LLMOptions

    plain = GenerateOptions(tasks=("sts",), out="x")
    priced = GenerateOptions(tasks=("sts",), out="x", llm=LLMOptions(price_per_1k_tokens=0.5))
    assert fingerprint(STAGE, plain) == fingerprint(STAGE, priced)


def test_track_draws_an_eta_bar_on_a_terminal_and_nothing_elsewhere(monkeypatch):
    from curate.core import progress

    monkeypatch.setitem(progress._bars, "quiet", False)
    out = io.StringIO()
    monkeypatch.setattr(progress, "console", Console(file=out, force_terminal=True, width=120))
    with progress.track(10, "encoding") as advance:
        for _ in range(10):
            advance()
    assert "encoding" in out.getvalue() and "10/10" in out.getvalue()
    piped = io.StringIO()
    monkeypatch.setattr(progress, "console", Console(file=piped, force_terminal=False))
    with progress.track(10, "encoding") as advance:
        advance(10)
    assert piped.getvalue() == ""


def test_all_at_once_goes_by_the_wave_time_an_earlier_run_measured(tmp_path, monkeypatch):
    """Every request in flight at once leaves nothing to extrapolate from this run's answers: the
    estimate is the wave time the last run against the same servers measured; cached answers
    measure nothing, and a stage with no history says it has no estimate yet."""
    monkeypatch.setenv("CURATE_CACHE_DIR", str(tmp_path))
    clock = [100.0]
    monkeypatch.setattr(est.time, "perf_counter", lambda: clock[0])
    first = plan("generate", ["x" * 40], requests=4, completion_tokens_max=400, in_flight=4, price=None, key="k")
    assert first.wave_before is None and not first.worth_saying
    assert first.plan_line().endswith("(no estimate before it)")
    pace = Pace(first)
    pace.begin()
    clock[0] += 95.0
    pace.answered(4)
    pace.finish(fresh=0)  # all from the cache: no wave time kept
    assert plan("generate", ["x"], 4, 400, 4, None, key="k").wave_before is None
    pace.finish(fresh=4)
    second = plan("generate", ["x" * 40], requests=3, completion_tokens_max=300, in_flight=4, price=None, key="k")
    assert second.wave_before == 95.0 and second.worth_saying
    assert "all sent at once: about 1m35s" in second.plan_line()
    assert plan("generate", ["x"], 3, 300, 8, None, key="other").wave_before is None, "another server: no history"
