"""``wait_set``: an event or a timeout ends the wait, and a cancellation always ends the task."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop

from ferrymq.event_waits import wait_set

Runner = Callable[[Coroutine[Any, Any, None]], None]


@pytest.mark.parametrize("run", [asyncio.run, uvloop.run], ids=["asyncio", "uvloop"])
def test_a_cancellation_in_the_turn_the_event_is_set_ends_the_wait(run: Runner) -> None:
    async def scenario() -> None:
        # given a task waiting for an event
        event = asyncio.Event()
        waiting = asyncio.create_task(wait_set(event, 5))
        await asyncio.sleep(0)
        # when the event is set and the task cancelled in the same turn (a controller woken as it is stopped)
        event.set()
        waiting.cancel()
        # then the task ends cancelled (``asyncio.wait_for`` on Python 3.11 returns True here and the loop goes on)
        with pytest.raises(asyncio.CancelledError):
            await waiting

    run(scenario())


def test_the_wait_ends_when_the_event_is_set_or_the_time_is_up() -> None:
    async def scenario() -> None:
        event = asyncio.Event()
        assert await wait_set(event, 0.01) is False
        asyncio.get_running_loop().call_later(0.01, event.set)
        assert await wait_set(event, 5) is True
        # a set event ends the wait at once
        assert await wait_set(event, 5) is True

    asyncio.run(scenario())
