"""How long and how much an LLM stage takes: one line before its first request, one once the
first answers are in.

Before anything is sent, the work is known: how many requests, about how many prompt tokens
(the rendered prompts' characters / ``CHARS_PER_TOKEN``, from an even sample of them) and at
most how many completion tokens (each request's ``max_tokens``); with a price, what that costs
at most. Time is not known until the servers answer, so ``Pace`` measures it in whole waves (as
many answers as there are requests in flight): a wave sent together comes back together, so 3
answers of 4 sent at once would read as 3/4 of the real rate, and 10 of 256 as a twenty-fifth.
The first wave is also slower than the rest: it pays the server's cold start (weights paged in,
an empty prompt-prefix cache; on the embedded model it ran at half the later pace), so with
room for it (three waves or more) the rate is the second wave's: answers after the first wave
over the seconds since it ended. A stage of one or two waves takes the first wave's rate. A stage
with no more requests than fit in flight sends them all at once and has nothing to extrapolate
from its own answers; it goes by the wave time an earlier run measured against the same model,
servers and slots (``PACE_FILE`` in curate's cache folder, written by ``Pace.finish``), and
without one its first line says there is no estimate until the answers are in (the line is left
out when there is no price to show either).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from curate.core.progress import console, token_cost

CHARS_PER_TOKEN = 4  # prose in a BPE vocabulary: about four characters a token
SAMPLE = 200  # prompts rendered to estimate them all (rendering 50,000 would cost seconds)
PACE_FILE = "pace.json"  # the wave times measured so far, by server (in curate's cache folder)

T = TypeVar("T")


@dataclass
class Estimate:
    """A stage's plan, then its measured time (``Pace`` fills ``seconds``, ``rate``, ``cost``)."""

    what: str  # how its lines begin: "generate", "brainstorm short-long", "judge_query"
    requests: int
    prompt_tokens: int
    completion_tokens_max: int | None  # None: a request without max_tokens, so no bound
    in_flight: int = 1  # requests sent at once
    price: float | None = None  # of 1,000 tokens
    seconds: float | None = None  # measured: the stage's whole time, first request to last answer
    rate: float | None = None  # measured: requests answered a second
    cost: float | None = None  # measured tokens per answer, for every request, at the price
    # what answers at this pace: model, servers and requests in flight (None: no history kept)
    key: str | None = None
    wave_before: float | None = None  # seconds one wave took when an earlier run measured this key
    batch: str | None = None  # --batch api / vllm: the requests go out as batches, not waves

    @property
    def measurable(self) -> bool:
        """More requests than fit in flight: the first wave's pace says how long the rest takes."""
        return self.requests > self.in_flight

    @property
    def steady(self) -> bool:
        """Room for a second wave after the first and more after it: its pace, not the cold
        first wave's, stands for the rest."""
        return self.requests >= 3 * self.in_flight

    @property
    def worth_saying(self) -> bool:
        """Whether to print the plan: a stage that sends everything at once, with no earlier wave
        time and no price to show, has nothing to say ahead of its answers."""
        return self.measurable or self.price is not None or self.wave_before is not None or self.batch is not None

    def announce(self) -> None:
        if self.worth_saying:
            say(self.plan_line())

    def plan_line(self) -> str:
        most = ("completion tokens unbounded (no max_tokens)" if self.completion_tokens_max is None
                else f"up to {self.completion_tokens_max:,} completion tokens")
        line = f"{self.what}: estimate {self.requests:,} requests, ~{self.prompt_tokens:,} prompt tokens, {most}"
        if self.price is not None and self.completion_tokens_max is not None:
            line += f" (up to ~{money(token_cost(self.prompt_tokens + self.completion_tokens_max, self.price))} " \
                    f"at ${self.price:g}/1k{', the batch price' if self.batch else ''})"
        if self.batch == "api":
            return line + "; sent as batches, each answered within the provider's 24 h window"
        if self.batch:
            return line + "; sent as batches to vLLM's offline runner, which shows its own progress in its log"
        if self.measurable:
            return line + "; time once the first answers are in"
        if self.wave_before is not None:
            return line + (f"; all sent at once: about {duration(self.wave_before)}, the time a wave took the last "
                           "time these servers answered this model")
        return line + "; all sent at once, so it takes about as long as the slowest answer (no estimate before it)"

    def time_line(self, left: float) -> str:
        line = (f"{self.what}: estimate ~{duration(self.seconds)} in all for {self.requests:,} requests at "
                f"{self.rate:.2f} requests/s measured (about {duration(left)} left)")
        if self.cost is not None:
            line += f", ~{money(self.cost)} at ${self.price:g}/1k"
        return line

    def as_dict(self, requests: int | None = None) -> dict[str, Any]:
        """What the stage's report keeps, beside its actual numbers; ``requests``: only the share
        of that many of its requests (a family's, of one queue's), so the shares add up."""
        share = 1.0 if requests is None or not self.requests else requests / self.requests

        def part(value, digits=0):
            return None if value is None else round(value * share, digits) if digits else round(value * share)

        out = {"requests": part(self.requests), "prompt_tokens": part(self.prompt_tokens),
               "completion_tokens_max": part(self.completion_tokens_max), "seconds": part(self.seconds, 2)}
        if self.price is not None:
            out["cost"] = part(self.cost, 4)
        return out


@dataclass
class Pace:
    """Measures an estimate's time from its answers: ``begin`` as the first request goes,
    ``answered`` after each answer; the answer that completes the wave it measures (the second
    when the estimate is ``steady``, else the first) fills the estimate and prints its time line."""

    estimate: Estimate
    started: float | None = None
    answers: int = 0
    tokens: int = 0
    first_wave: tuple[float, int] | None = None  # when the first wave was in, and the answers then

    def begin(self) -> None:
        if self.started is None:
            self.started = time.perf_counter()

    def answered(self, n: int = 1, tokens: int = 0) -> None:
        self.begin()
        now = time.perf_counter()
        before, self.answers = self.answers, self.answers + n
        self.tokens += tokens
        e = self.estimate
        if not e.measurable:
            return
        wave = e.in_flight
        if before < wave <= self.answers:
            self.first_wave = (now, self.answers)
            if not e.steady:
                say(e.time_line(self.measure(now)))
        elif e.steady and before < 2 * wave <= self.answers:
            say(e.time_line(self.measure(now)))

    def finish(self, fresh: int) -> None:
        """Keep the wave time this stage measured for the next run against the same servers
        (``fresh``: answers the servers gave, not the cache: a cached answer measures nothing)."""
        e = self.estimate
        if e.key is None or self.started is None or fresh < max(1, min(e.requests, e.in_flight)):
            return
        seconds = time.perf_counter() - self.started
        waves = max(1.0, fresh / e.in_flight)
        remember_wave(e.key, round(seconds / waves, 2))

    def measure(self, now: float) -> float:
        """Fill the estimate from the answers so far; the seconds left. The rate is the answers
        since the first wave over the time since it, when there are any; else the answers over
        the time since the first request."""
        e = self.estimate
        start = self.started if self.started is not None else now
        elapsed = max(now - start, 1e-6)
        if self.first_wave is not None and self.answers > self.first_wave[1] and now > self.first_wave[0]:
            rate = (self.answers - self.first_wave[1]) / (now - self.first_wave[0])
        else:
            rate = self.answers / elapsed
        left = max(0, e.requests - self.answers) / rate
        e.seconds, e.rate = round(elapsed + left, 2), round(rate, 3)
        if e.price is not None and self.tokens:
            e.cost = token_cost(self.tokens / self.answers * e.requests, e.price)
        return left


def plan(what: str, prompts: Sequence[str], requests: int, completion_tokens_max: int | None, in_flight: int,
         price: float | None, key: str | None = None, batch: str | None = None) -> Estimate:
    """The estimate of ``requests`` requests, ``in_flight`` at once, answered with at most
    ``completion_tokens_max`` tokens in all; ``prompts``: some of their prompts' texts
    (``sample``), whose mean length stands for every prompt's; ``key``: the server's pace
    history to read and to write."""
    mean_chars = sum(map(len, prompts)) / len(prompts) if prompts else 0.0
    return Estimate(what, requests, round(mean_chars * requests / CHARS_PER_TOKEN), completion_tokens_max,
                    max(1, in_flight), price, key=key, wave_before=earlier_wave(key) if key else None, batch=batch)


def _pace_path():
    from curate.embed.cache import default_cache_dir

    return default_cache_dir().parent / PACE_FILE


def earlier_wave(key: str) -> float | None:
    """The seconds one wave took when a run last measured ``key`` (None: never, or unreadable)."""
    try:
        value = json.loads(_pace_path().read_text(encoding="utf-8")).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def remember_wave(key: str, seconds: float) -> None:
    """Keep ``seconds`` as ``key``'s wave time; a cache that cannot be written is no error."""
    from curate.core.jsonl import atomic_write_json

    path = _pace_path()
    try:
        known = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        known = known if isinstance(known, dict) else {}
        known[key] = seconds
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, known)
    except (OSError, ValueError):
        pass


def most_tokens(max_tokens: Sequence[int | None]) -> int | None:
    """The completion tokens of requests with these ``max_tokens`` at most (None: one has none)."""
    return None if any(m is None for m in max_tokens) else sum(int(m) for m in max_tokens)


def sample(items: Sequence[T], k: int = SAMPLE) -> list[T]:
    """Up to ``k`` of ``items``, evenly spread (all of them when there are no more)."""
    n = len(items)
    return list(items) if n <= k else [items[i * n // k] for i in range(k)]


def prompt_text(messages: Sequence[dict[str, Any]]) -> str:
    """What a request's prompt tokens are counted from: its messages' text."""
    return "".join(str(m.get("content") or "") for m in messages)


def say(line: str) -> None:
    console.print(line, soft_wrap=True, markup=False, highlight=False)


def duration(seconds: float | None) -> str:
    """``4m10s``, ``52s``, ``2h05m``: short enough for one line."""
    if seconds is None:
        return "?"
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def money(amount: float | None) -> str:
    """Dollars: cents from 10 cents up, four decimals below (a small run's cost is not $0.00)."""
    if amount is None:
        return "?"
    return f"${amount:,.2f}" if amount >= 0.1 else f"${amount:.4f}"
