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
    it = iter(items)
    pending: dict[asyncio.Task, T] = {}

    def refill() -> None:
        while len(pending) < limit:
            try:
                item = next(it)
            except StopIteration:
                return
            pending[asyncio.ensure_future(fn(item))] = item

    refill()
    try:
        while pending:
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for fut in done:
                item = pending.pop(fut)
                yield item, fut.result()
            refill()
    finally:
        for fut in pending:
            fut.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
