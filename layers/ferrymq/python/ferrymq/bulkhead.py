"""Bulkheads: each dependency gets its own bounded share of the process, so that one that is slow or gone
holds up only the requests that need it.

A :class:`Bulkhead` admits at most ``max_concurrent`` calls at once; a call that finds it full waits at most
``max_wait_seconds`` for a slot, then is answered ServiceUnavailable instead of queueing without bound.
Blocking calls (boto3) run on the bulkhead's own threads, never on the event loop's shared default executor:
a DynamoDB that stops answering then ties up the metadata threads only, and each such call is given up after
``call_timeout_seconds`` (its thread keeps its slot until the call really returns, so a stuck dependency
can never have more than ``max_concurrent`` threads in it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from ferrymq.errors import ServiceUnavailable

T = TypeVar("T")


class Bulkhead:
    def __init__(self, name: str, *, max_concurrent: int, max_wait_seconds: float,
                 call_timeout_seconds: float | None = None) -> None:
        if max_concurrent < 1:
            raise ValueError("a bulkhead admits at least one call")
        self.name = name
        self.max_concurrent = max_concurrent
        self._max_wait = max_wait_seconds
        self._call_timeout = call_timeout_seconds
        self._slots = asyncio.Semaphore(max_concurrent)
        self._executor: ThreadPoolExecutor | None = None
        self.refused = 0
        """Calls answered ServiceUnavailable because no slot came free in time, or the call took too long."""

    @property
    def in_use(self) -> int:
        return self.max_concurrent - self._slots._value

    def try_acquire(self) -> bool:
        """Take a slot if one is free and nobody waits for one (what the semaphore's ``acquire`` does when it need
        not wait, without its ``locked()`` check or a coroutine); :meth:`release` gives it back."""
        slots = self._slots
        if slots._value > 0 and not slots._waiters:
            slots._value -= 1
            return True
        return False

    async def acquire(self) -> None:
        """Take a slot (for calls that are coroutines); ServiceUnavailable when none comes free in time.
        :meth:`release` gives it back."""
        if self.try_acquire():
            return
        if not self._slots.locked():
            await self._slots.acquire()
            return
        try:
            await asyncio.wait_for(self._slots.acquire(), self._max_wait)
        except TimeoutError:
            self.refused += 1
            raise ServiceUnavailable(f"Too many requests are waiting for the {self.name}.") from None

    def release(self) -> None:
        self._slots.release()

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` on the bulkhead's own threads, within its slots and its call timeout."""
        await self.acquire()
        loop = asyncio.get_running_loop()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.max_concurrent, thread_name_prefix=f"bulkhead-{self.name}")
        try:
            future = loop.run_in_executor(self._executor, fn, *args)
        except BaseException:
            self._slots.release()
            raise
        # The slot is freed when the thread is, not when the caller gives up.
        future.add_done_callback(lambda _: self._slots.release())
        try:
            return await asyncio.wait_for(asyncio.shield(future), self._call_timeout)
        except TimeoutError:
            self.refused += 1
            future.add_done_callback(_retrieve)
            raise ServiceUnavailable(f"The {self.name} did not answer in time.") from None

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)


def _retrieve(future: asyncio.Future[object]) -> None:
    # A call given up on may still fail later; its exception is nobody's to report.
    if not future.cancelled():
        future.exception()


async def off_loop(bulkhead: Bulkhead | None, fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)`` off the event loop: on ``bulkhead``'s threads, or on the loop's default ones without one."""
    if bulkhead is not None:
        return await bulkhead.run(fn, *args)
    return await asyncio.to_thread(fn, *args)
