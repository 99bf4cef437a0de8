"""Long polls: a receive that found nothing waits until its queue may have something, or its time is up.

A waiting receive is woken by whatever can make a message visible on its queue (sends, deletes that unlock
a FIFO group or free in-flight room, visibility changes, hand-overs) through :meth:`LongPolls.wake`, and by
the engine's next timer on that queue (a delay or visibility timeout running out).  It then polls again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ferrymq.clock import Clock
from ferrymq.storage.engine import Engine


class LongPolls:
    def __init__(self, engine: Engine, clock: Clock) -> None:
        self._engine = engine
        self._clock = clock
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}
        self._closed: BaseException | None = None

    def close(self, error: BaseException) -> None:
        """Answer every waiting receive with ``error``, and any that would start waiting (the replica no
        longer leads: polling again would touch an engine that is not its to change)."""
        self._closed = error
        waiters, self._waiters = self._waiters, {}
        for futs in waiters.values():
            for fut in futs:
                if not fut.done():
                    fut.set_exception(error)

    def wake(self, queue_id: str) -> None:
        """Let long polls on the queue look again (something may have become visible, or a timer moved)."""
        waiters = self._waiters.pop(queue_id, None)
        if waiters:
            for fut in waiters:
                resolve(fut)

    def waiting(self) -> int:
        return sum(len(w) for w in self._waiters.values())

    async def wait_for(
        self, queue_id: str, wait_seconds: float, poll: Callable[[], list], max_in_flight: int | None
    ) -> list:
        """Call ``poll`` each time the queue may have changed until it finds something or ``wait_seconds``
        pass; returns what it found (empty when the time ran out)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        while True:
            if self._closed is not None:
                raise self._closed
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            timeout = remaining
            due = self._engine.next_change(queue_id, max_in_flight)
            if due is not None:
                # The engine's clock may be injected: its timers are turned into a delay on the loop's clock.
                timeout = min(timeout, max(due - self._clock.now(), 0.0) + 0.001)
            fut: asyncio.Future[None] = loop.create_future()
            waiters = self._waiters.get(queue_id)
            if waiters is None:
                waiters = self._waiters[queue_id] = set()
            waiters.add(fut)
            timer = loop.call_later(timeout, resolve, fut)
            try:
                await fut
            finally:
                timer.cancel()
                waiters.discard(fut)
                if not waiters and self._waiters.get(queue_id) is waiters:
                    del self._waiters[queue_id]
            found = poll()
            if found:
                return found


def resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
