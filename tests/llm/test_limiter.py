"""The adaptive in-flight limit (curate.llm.limiter): driven first by a simulated server on a
virtual clock (no waiting), then through the real client against the scripted server."""

from __future__ import annotations

import asyncio
import heapq
import time

import pytest

from curate.llm.client import ClientConfig, LLMClient
from curate.llm.limiter import MIN_ROUND, AdaptiveLimit
from tests.fake_llm_server import fake_llm_server

SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


class Clock:
    """A virtual clock the simulation moves."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class Server:
    """A simulated server kept busy through ``lim``: it works on ``capacity`` requests at once for
    ``service`` seconds each, in arrival order, or (``latency``) answers after ``latency``
    seconds whatever the load. Requests still out when a run ends are answered in the next."""

    def __init__(self, lim: AdaptiveLimit, clock: Clock, capacity: int = 1000, service: float = 0.1):
        self.lim, self.clock, self.service = lim, clock, service
        self.latency: float | None = None
        self.free = [clock.t] * capacity  # when each of the server's places is free next
        self.pending: list[tuple[float, int, object]] = []
        self.seq = 0

    def run(self, seconds: float) -> list[tuple[float, int]]:
        """Keep the limit full for ``seconds`` of virtual time; (time, limit) after each answer."""
        return asyncio.run(self._run(self.clock.t + seconds))

    async def _run(self, end: float) -> list[tuple[float, int]]:
        lim, clock, trace = self.lim, self.clock, []
        while clock.t < end:
            while lim.in_flight < lim.limit:
                slot = lim.slot()
                await slot.__aenter__()  # never waits: there is room
                if self.latency is not None:
                    done = clock.t + self.latency
                else:
                    done = max(clock.t, heapq.heappop(self.free)) + self.service
                    heapq.heappush(self.free, done)
                heapq.heappush(self.pending, (done, self.seq, slot))
                self.seq += 1
            clock.t, _, slot = heapq.heappop(self.pending)
            await slot.__aexit__(None, None, None)
            trace.append((clock.t, lim.limit))
        return trace


def test_slow_start_reaches_the_ceiling_of_a_fast_server_within_a_few_round_trips():
    clock = Clock()
    lim = AdaptiveLimit(256, clock=clock)
    assert lim.limit == 1  # it starts at low load, where the server's own latency is measured
    trace = Server(lim, clock, service=0.2).run(3.0)
    reached = next(t for t, limit in trace if limit == 256)
    assert reached <= 10 * 0.2, reached  # 1 -> 256 is eight doublings, one a round trip
    assert max(limit for _, limit in trace) == 256 and lim.slow_start


def test_additive_increase_after_a_cut_grows_one_a_round_trip():
    clock = Clock()
    lim = AdaptiveLimit(256, clock=clock)
    srv = Server(lim, clock, service=0.2)
    srv.run(3.0)
    lim.overloaded()
    assert lim.limit == 128 and not lim.slow_start
    srv.run(10 * 0.2)
    assert 128 + 8 <= lim.limit <= 128 + 11, lim.limit  # ten round trips of steady latency


def test_429_or_timeout_halves_the_limit_once_for_the_requests_sent_before_the_cut():
    clock = Clock()
    lim = AdaptiveLimit(64, clock=clock)
    srv = Server(lim, clock)
    srv.run(3.0)
    assert lim.limit == 64

    async def faults() -> list[int]:
        seen = []
        for _ in range(3):  # three 429s of requests that were out together: one cut, not three
            _, _, slot = heapq.heappop(srv.pending)
            await slot.__aexit__(RuntimeError, RuntimeError("429"), None)
            lim.overloaded(slot)
            seen.append(lim.limit)
        for _, _, slot in srv.pending:  # the others fail too (no sample), freeing their places
            await slot.__aexit__(RuntimeError, RuntimeError("429"), None)
        later = lim.slot()
        clock.t += 1.0
        await later.__aenter__()
        clock.t += 1.0
        await later.__aexit__(TimeoutError, TimeoutError(), None)
        lim.overloaded(later)  # sent after the cut: cuts again
        return seen + [lim.limit]

    assert asyncio.run(faults()) == [32, 32, 32, 16]


def test_latency_climbing_above_twice_the_low_load_latency_shrinks_the_limit():
    clock = Clock()
    lim = AdaptiveLimit(128, clock=clock)
    srv = Server(lim, clock, service=0.1)
    srv.run(3.0)
    assert lim.limit == 128 and lim.base == pytest.approx(0.1)
    srv.latency = 0.3  # the server slows down 3x for everyone (another client's load)
    trace = srv.run(0.1 + 0.3 * 2)
    first_cut = next(limit for _, limit in trace if limit < 128)
    assert first_cut == pytest.approx(128 * 2 / 3, abs=1), "scaled to where latency would be 2x again"
    assert not lim.slow_start


def test_a_queueing_server_is_kept_full_with_a_short_queue():
    """Capacity 16, 0.2 s each, ceiling 256: a fixed 256 would queue 240 and take 3.2 s a request."""
    clock = Clock()
    lim = AdaptiveLimit(256, clock=clock)
    trace = Server(lim, clock, capacity=16, service=0.2).run(30.0)
    steady = [limit for t, limit in trace if t > 5.0]
    assert min(steady) >= 16, "the server always has a full batch"
    assert max(steady) <= 16 * 4, "requests never wait more than about three service times"
    answered_per_s = sum(1 for t, _ in trace if t > 5.0) / 25.0
    assert answered_per_s >= 0.97 * 16 / 0.2


def test_the_limit_stays_between_one_and_the_ceiling():
    clock = Clock()
    lim = AdaptiveLimit(8, clock=clock)
    for _ in range(20):
        lim.overloaded()
    assert lim.limit == 1
    trace = Server(lim, clock, service=0.05).run(5.0)
    assert min(limit for _, limit in trace) >= 1 and max(limit for _, limit in trace) == 8
    clock2 = Clock()
    lim2 = AdaptiveLimit(8, clock=clock2)
    trace = Server(lim2, clock2, capacity=1, service=0.05).run(5.0)  # one place: down, never to 0
    assert min(limit for _, limit in trace) >= 1 and max(limit for t, limit in trace if t > 2.0) < 8


def test_a_server_that_became_slower_for_good_is_relearned_at_the_floor():
    clock = Clock()
    lim = AdaptiveLimit(32, clock=clock)
    srv = Server(lim, clock, service=0.05)
    srv.run(2.0)
    srv.latency = 1.0  # from now on 20x as long at any load: the old low-load latency is stale
    srv.run(60.0)
    assert lim.base == pytest.approx(1.0)
    assert lim.limit >= 16, "grown back once the new latency was measured at the floor"


def test_floor_equal_to_ceiling_is_a_fixed_limit():
    clock = Clock()
    lim = AdaptiveLimit(12, floor=12, clock=clock)
    lim.overloaded()
    trace = Server(lim, clock, capacity=4, service=0.1).run(5.0)
    assert {limit for _, limit in trace} == {12}


def test_waiters_get_places_in_arrival_order_and_a_cancelled_one_leaks_none():
    async def run() -> tuple[list[int], int]:
        lim = AdaptiveLimit(1, floor=1)
        order: list[int] = []
        gate = asyncio.Event()

        async def one(k: int) -> None:
            async with lim.slot():
                order.append(k)
                await gate.wait()

        first = asyncio.create_task(one(0))
        await asyncio.sleep(0)
        waiters = [asyncio.create_task(one(k)) for k in (1, 2, 3)]
        await asyncio.sleep(0)
        waiters[0].cancel()  # gives up while waiting: its turn passes to the next
        gate.set()
        await asyncio.gather(first, *waiters, return_exceptions=True)
        return order, lim.in_flight

    order, in_flight = asyncio.run(run())
    assert order == [0, 2, 3] and in_flight == 0


def test_a_round_needs_several_answers_before_it_judges_latency():
    clock = Clock()
    lim = AdaptiveLimit(64, clock=clock)
    for _ in range(MIN_ROUND - 1):
        lim.answered(0.1, sent=clock.t)
    assert lim.base is None
    lim.answered(5.0, sent=clock.t)
    assert lim.base == pytest.approx(0.1), "one slow answer does not set the low-load latency"


# --------------------------------------------------------------------------- through the client


def _client(url: str, **kw) -> LLMClient:
    cfg = dict(base_urls=[url], model="fake", api_key="k", backoff_base=0.01, max_reasks=0)
    return LLMClient(ClientConfig(**{**cfg, **kw}))


def _ask(client: LLMClient, marker: str, n: int, tag: str):
    """``n`` asks at once, each its own marker key (``marker`` then ``tag-i``)."""
    return asyncio.gather(*(client.ask_json([{"role": "user", "content": f"{marker} item {tag}-{i}"}], SCHEMA, {},
                                            seed=i) for i in range(n)))


def test_a_burst_of_429s_shrinks_the_limit_and_every_request_still_succeeds():
    async def run(url: str):
        client = _client(url, concurrency=16)
        warm = await _ask(client, "FAULTS[slow0.05]", 80, "warm")  # server time well above the client's own
        before = client.in_flight_limit()
        burst = await _ask(client, "FAULTS[429s0,429s0,ok]", 16, "burst")
        after = client.in_flight_limit()
        await client.close()
        return warm + burst, before, after

    with fake_llm_server() as srv:
        answers, before, after = asyncio.run(run(srv.base_url))
        throttled = srv.requests_for("burst")
        bodies = {}
        for r in throttled:
            bodies.setdefault(r.key, set()).add(repr(r.body))
    assert before == 16
    assert after <= 8, after  # 16 -> 8 -> 4 (the retries sent after the first cut), then +1 a round trip
    assert all(a.ok for a in answers) and sum(a.attempts for a in answers[80:]) == 48
    assert sorted(r.action for r in throttled).count("429s0") == 32
    assert all(len(b) == 1 for b in bodies.values()), "a retry sends the same body: same seed, same cache key"


def test_a_server_that_queues_is_not_overloaded_into_timeouts():
    """Two places, 0.1 s a request, 2 s timeout: a fixed 64 in flight would wait 3.2 s each."""
    async def run(url: str):
        client = _client(url, concurrency=64, timeout=2.0, max_retries=0)
        answers = await _ask(client, "FAULTS[slow0.1]", 60, "q")
        limit = client.in_flight_limit()
        await client.close()
        return answers, limit

    with fake_llm_server(capacity=2) as srv:
        started = time.monotonic()
        answers, limit = asyncio.run(run(srv.base_url))
        elapsed = time.monotonic() - started
        peak = srv.max_inflight()
    assert all(a.ok for a in answers), [a.reason for a in answers if not a.ok]
    assert limit < 64 and peak <= 16, (limit, peak)
    assert elapsed < 60 * 0.1 / 2 * 2, elapsed  # the two places stayed busy


def test_the_limit_reaches_the_ceiling_at_a_fast_server_and_sums_over_servers():
    async def run(urls: list[str]):
        client = _client(urls[0], concurrency=8)
        client2 = LLMClient(ClientConfig(base_urls=urls, model="fake", api_key="k", concurrency=8))
        assert client2.in_flight_limit() == 2  # one each to start
        answers = await _ask(client, "FAULTS[slow0.05]", 100, "fast")
        limit = client.in_flight_limit()
        await client.close()
        await client2.close()
        return answers, limit

    with fake_llm_server() as a, fake_llm_server() as b:
        answers, limit = asyncio.run(run([a.base_url, b.base_url]))
        assert all(x.ok for x in answers) and limit == 8
        assert a.max_inflight() <= 8


def test_a_server_of_known_slots_gets_them_all_from_the_first_request():
    """The embedded server is started with its slots (``--parallel``): the client sends that many at
    once from the start and keeps them, however its latency moves (``adaptive=False``)."""
    async def run(url: str):
        client = LLMClient(ClientConfig(base_urls=[url], model="fake", api_key="k", concurrency=4, adaptive=False))
        first = client.in_flight_limit()
        answers = await _ask(client, "FAULTS[slow0.05]", 24, "known")
        limit = client.in_flight_limit()
        await client.close()
        return first, answers, limit

    with fake_llm_server(capacity=2) as srv:  # a server that queues: an adaptive client would cut back
        first, answers, limit = asyncio.run(run(srv.base_url))
    assert first == limit == 4 and all(a.ok for a in answers)


# --------------------------------------------------------------------------- before the first reply


def test_a_server_that_never_replied_is_tried_by_one_request_then_given_up():
    """The limit starts at one and grows on answers: without the first-contact gate, 16 requests
    to a server that answers nothing timed out one after another."""
    async def run(url: str):
        client = _client(url, concurrency=16, timeout=0.5, max_retries=0)
        started = time.monotonic()
        answers = await _ask(client, "FAULTS[ok]", 16, "silent")
        elapsed = time.monotonic() - started
        await client.close()
        return answers, elapsed, client.fatal

    with fake_llm_server(silent=True) as srv:
        answers, elapsed, fatal = asyncio.run(run(srv.base_url))
        sent = len(srv.chat_requests)
    assert sent == 1 and elapsed < 16 * 0.5 / 4, (sent, elapsed)
    assert all(a.fatal and not a.ok for a in answers)
    assert fatal.startswith(f"the server at {srv.base_url} answered no request")


def test_a_server_that_replied_once_is_never_given_up_on():
    """Timeouts after the first reply are load (the limit is cut), not a dead server."""
    async def run(url: str):
        client = _client(url, concurrency=8, timeout=0.3, max_retries=0)
        first = await _ask(client, "FAULTS[ok]", 4, "up")
        slow = await _ask(client, "FAULTS[timeout]", 3, "slow")
        later = await _ask(client, "FAULTS[ok]", 4, "again")
        await client.close()
        return first, slow, later, client.fatal

    with fake_llm_server(timeout_sleep=3) as srv:
        first, slow, later, fatal = asyncio.run(run(srv.base_url))
    assert all(a.ok for a in first + later) and fatal is None
    assert all(a.reason.startswith("timeout") and not a.fatal for a in slow)
