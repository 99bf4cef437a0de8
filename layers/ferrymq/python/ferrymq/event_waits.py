"""Waiting for an :class:`asyncio.Event` at most so long, in a way a cancellation always ends.

Not ``asyncio.wait_for(event.wait(), seconds)``: on Python 3.11, a cancellation that arrives in the turn the event
is set is swallowed (``wait_for`` returns the wait's result instead of raising), so a loop that waits so and goes
round again outlives the ``cancel()`` of its task, and whoever awaits that task to stop hangs. A worker told to
stop while its followers' trouble woke its controller did, until it was killed. ``asyncio.timeout`` tells its own
cancellation from another's, and lets the other through.
"""

from __future__ import annotations

import asyncio
import contextlib


async def wait_set(event: asyncio.Event, seconds: float) -> bool:
    """Wait until ``event`` is set or ``seconds`` pass; returns whether it is set."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()
    return event.is_set()
