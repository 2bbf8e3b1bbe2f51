"""Run many coroutines with a bounded number in flight, yielding results as they finish.

Creating every task up front would hold all prompts in memory for a 50,000-item run;
this keeps only ``limit`` alive.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


async def bounded(items: Iterable[T], fn: Callable[[T], Awaitable[R]], limit: int) -> AsyncIterator[tuple[T, R]]:
    """Finished tasks arrive through a queue: waiting on the whole in-flight set at every
    completion (``asyncio.wait``) costs O(limit) each time, which shows at 256 in flight."""
    it = iter(items)
    running: set[asyncio.Future] = set()
    finished: asyncio.Queue = asyncio.Queue()

    def refill() -> None:
        while len(running) < limit:
            try:
                item = next(it)
            except StopIteration:
                return
            fut = asyncio.ensure_future(fn(item))
            running.add(fut)
            fut.add_done_callback(lambda f, item=item: finished.put_nowait((item, f)))

    refill()
    try:
        while running:
            item, fut = await finished.get()
            running.discard(fut)
            refill()  # the next request starts before the caller handles this result
            yield item, fut.result()
    finally:
        for fut in running:
            fut.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
