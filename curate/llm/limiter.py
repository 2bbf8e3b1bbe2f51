"""How many requests one server gets at once: a limit that follows the server's latency.

A fixed number in flight either under-fills a server or overloads it. Self-hosted vLLM does not
answer 429 when its batch is full: it queues, every request takes longer, and some time out. So
the client keeps, per server, a limit between ``floor`` (1) and ``ceiling`` (``--concurrency``):

* **slow start**: from one request in flight (so the first answers measure the server at low
  load), one more per answer that came back in time: the limit doubles each round trip, and a
  fast server reaches a ceiling of 256 in eight;
* **additive increase**: after the first cut, one more per round trip (``1/limit`` per answer);
* **multiplicative decrease**: halved when the server says or shows it is full (429, 503, 504, a
  timeout); scaled down when a round trip's median latency climbs above ``tolerance`` times the
  latency measured at low load, by as much as brings it back under that line if latency grows in
  step with the requests queued (never by more than half).

The rule reads one property of the traffic: how long a request takes now compared with how long
it took when the server had little to do. Twice as long (the default ``tolerance``) means at most
half of a request's time is spent waiting behind others: a server that queues is still kept full
(the limit stays above its batch size), and a server that batches is filled until batching has
doubled each request's time, where adding more buys little. Growth needs an answer within that
line, and a cut only counts requests sent after the previous one, so one slow round trip cannot
cut twice. The low-load latency is the lowest round-trip median seen (at least ``MIN_ROUND``
answers each, so one short answer does not set it), measured again whenever the limit is at its
floor, so a server that became slower for good is re-learned there.

Only when requests are sent changes, never which are sent or what they say. Time spent waiting
for a slot here is not time at the server: the caller's timeout starts once the slot is held.

Before a server has replied at all, ``FirstContact`` lets one request try it at a time, so a
server that never answers costs one request's attempts, not a timeout per request.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import deque
from typing import Callable

MIN_ROUND = 8  # answers in the smallest round trip whose median is trusted
OVERLOAD_STATUS = frozenset({429, 503, 504})  # the server (or its gateway) says it is full


class Slot:
    """One request's place in flight; ``async with limiter.slot() as s:`` holds it for the request.

    Leaving the block normally counts the request as answered (its latency is a sample);
    leaving it by an exception frees the place without a sample (then tell
    :meth:`AdaptiveLimit.overloaded` if the server was full)."""

    __slots__ = ("limiter", "sent", "held")

    def __init__(self, limiter: "AdaptiveLimit"):
        self.limiter = limiter
        self.sent = 0.0  # when the place was taken: the request's latency counts from here
        self.held = False

    async def __aenter__(self) -> "Slot":
        await self.limiter._acquire()
        self.held = True
        self.sent = self.limiter.clock()
        return self

    async def __aexit__(self, kind, exc, tb) -> None:
        self.limiter._release(self, answered=kind is None)


class AdaptiveLimit:
    """Requests allowed in flight to one server, adapted to its latency (see the module)."""

    def __init__(self, ceiling: int, floor: int = 1, tolerance: float = 2.0,
                 clock: Callable[[], float] = time.monotonic):
        if ceiling < 1:
            raise ValueError("the ceiling must be at least 1")
        self.ceiling = ceiling
        self.floor = max(1, min(floor, ceiling))  # floor == ceiling: a fixed limit (adaptation off)
        self.tolerance = tolerance
        self.clock = clock
        self.in_flight = 0
        self.base: float | None = None  # latency at low load: the lowest round-trip median
        self.slow_start = self.floor < self.ceiling
        self._limit = float(self.floor)
        self._waiting: deque[asyncio.Future] = deque()
        self._round: list[float] = []  # latencies of requests sent since the round began
        self._round_began = clock()
        self._round_size = MIN_ROUND
        self._last_cut = float("-inf")

    @property
    def limit(self) -> int:
        """Requests allowed in flight now."""
        return int(self._limit)

    def slot(self) -> Slot:
        return Slot(self)

    def answered(self, latency: float, sent: float) -> None:
        """A request sent at ``sent`` was answered after ``latency`` seconds at the server."""
        holds = self.base is None or latency <= self.tolerance * self.base
        if holds and (self._waiting or self.in_flight >= self.limit):  # grow only a limit in use
            step = 1.0 if self.slow_start else 1.0 / self._limit
            self._limit = min(float(self.ceiling), self._limit + step)
        if sent >= self._round_began:
            self._round.append(latency)
            if len(self._round) >= self._round_size:
                self._end_round()

    def overloaded(self, slot: Slot | None = None) -> None:
        """The server answered 429/503/504 or a request timed out: halve the limit, once for all
        the requests that were sent before this cut."""
        if slot is None or slot.sent >= self._last_cut:
            self._cut(0.5)

    def _end_round(self) -> None:
        now = statistics.median(self._round)
        if self.base is None or now < self.base or self._limit <= self.floor:
            self.base = now
        elif now > self.tolerance * self.base:
            # latency in step with the queue: this factor brings it back to the line
            self._cut(max(0.5, self.tolerance * self.base / now))
            return
        self._new_round()

    def _cut(self, factor: float) -> None:
        self.slow_start = False
        self._limit = max(float(self.floor), self._limit * factor)
        self._last_cut = self.clock()
        self._new_round()

    def _new_round(self) -> None:
        self._round = []
        self._round_began = self.clock()
        self._round_size = max(MIN_ROUND, self.limit)

    async def _acquire(self) -> None:
        if self.in_flight < self.limit and not self._waiting:
            self.in_flight += 1
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiting.append(fut)
        try:
            await fut  # _wake counted this request in flight before setting the result
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():  # handed a place, then cancelled: pass it on
                self.in_flight -= 1
                self._wake()
            elif fut in self._waiting:  # cancelled while waiting (_wake may have dropped it already)
                self._waiting.remove(fut)
            raise

    def _release(self, slot: Slot, answered: bool) -> None:
        if not slot.held:
            return
        slot.held = False
        if answered:
            self.answered(self.clock() - slot.sent, slot.sent)
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiting and self.in_flight < self.limit:
            fut = self._waiting.popleft()
            if not fut.done():  # a waiter cancelled a moment ago is passed over
                self.in_flight += 1
                fut.set_result(None)


class FirstContact:
    """Until a server has replied once, one request at a time tries it (the probe).

    The adaptive limit starts at one and grows only on answers, so against a server that never
    answers each request waited for the one before it to time out: a run cost a timeout per
    request, whatever ``--concurrency``. Here the probe tries the server with all its retries
    while the other requests wait; the first reply of any kind (an error status too: someone is
    there) opens the gate for good, and a probe that gives up without one marks the server
    ``dead``, so the waiting requests, and every later one, are refused at once instead of each
    timing out in turn. The gate only decides when a request may go, like the limit."""

    def __init__(self) -> None:
        self.replied = False
        self.dead: str | None = None  # why the server is given up on (its probe's last failure)
        self._probing = False
        self._waiting: deque[asyncio.Future] = deque()

    @property
    def open(self) -> bool:
        """No more probing: the server replied, or it is given up on."""
        return self.replied or self.dead is not None

    async def turn(self) -> bool:
        """Wait while another request probes; True when this request is the probe (it then
        calls :meth:`release` when its attempts are over or the server replied)."""
        while not self.open:
            if not self._probing:
                self._probing = True
                return True
            fut = asyncio.get_running_loop().create_future()
            self._waiting.append(fut)
            try:
                await fut
            finally:
                if fut in self._waiting:  # cancelled while waiting
                    self._waiting.remove(fut)
        return False

    def reply(self) -> None:
        """The server sent a reply: the gate opens for every request."""
        self.replied = True
        self._wake()

    def give_up(self, reason: str) -> None:
        """The probe gave up without a reply: refuse every request from now on."""
        if not self.replied:
            self.dead = reason
        self._wake()

    def release(self) -> None:
        """The probe is over (answered, given up or cancelled): another may probe if still shut."""
        self._probing = False
        self._wake()

    def _wake(self) -> None:
        """Everyone waiting looks again: all go when open, else the first to run probes next."""
        while self._waiting:
            fut = self._waiting.popleft()
            if not fut.done():
                fut.set_result(None)
