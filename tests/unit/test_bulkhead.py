"""Bulkhead: bounded concurrency, a bounded wait for a slot, a deadline per blocking call, and a slot held until
the thread is really done."""

from __future__ import annotations

import asyncio
import threading

import pytest

from ferrymq.bulkhead import Bulkhead, off_loop
from ferrymq.errors import ServiceUnavailable


def test_calls_beyond_the_limit_wait_for_a_slot_then_are_refused() -> None:
    async def scenario() -> None:
        bulkhead = Bulkhead("store", max_concurrent=2, max_wait_seconds=0.05)
        release = threading.Event()
        # given two blocking calls holding both slots
        held = [asyncio.ensure_future(bulkhead.run(release.wait)) for _ in range(2)]
        await asyncio.sleep(0.05)
        assert bulkhead.in_use == 2
        # when a third comes, it waits its bounded time and is refused as a 503, the others untouched
        with pytest.raises(ServiceUnavailable, match="Too many requests are waiting for the store"):
            await bulkhead.run(lambda: "never")
        assert bulkhead.refused == 1
        release.set()
        assert await asyncio.gather(*held) == [True, True]
        # and once they are done, calls go through again
        assert await bulkhead.run(lambda: "ok") == "ok"
        bulkhead.close()

    asyncio.run(scenario())


def test_a_call_past_its_deadline_is_given_up_but_keeps_its_slot_until_its_thread_returns() -> None:
    async def scenario() -> None:
        bulkhead = Bulkhead("store", max_concurrent=1, max_wait_seconds=0.01, call_timeout_seconds=0.05)
        release = threading.Event()
        with pytest.raises(ServiceUnavailable, match="did not answer in time"):
            await bulkhead.run(release.wait)
        # the stuck thread still holds the only slot: a new call cannot pile another thread onto it
        with pytest.raises(ServiceUnavailable, match="waiting"):
            await bulkhead.run(lambda: "never")
        release.set()
        await asyncio.sleep(0.05)
        assert bulkhead.in_use == 0
        assert await bulkhead.run(lambda: 7) == 7
        bulkhead.close()

    asyncio.run(scenario())


def test_coroutine_callers_take_and_give_back_slots_and_errors_pass_through() -> None:
    async def scenario() -> None:
        bulkhead = Bulkhead("worker", max_concurrent=1, max_wait_seconds=0.01)
        await bulkhead.acquire()
        with pytest.raises(ServiceUnavailable):
            await bulkhead.acquire()
        bulkhead.release()
        await bulkhead.acquire()
        bulkhead.release()

        def boom() -> None:
            raise KeyError("x")

        with pytest.raises(KeyError):
            await bulkhead.run(boom)
        assert bulkhead.in_use == 0
        assert await off_loop(None, lambda: "default threads") == "default threads"
        bulkhead.close()

    asyncio.run(scenario())


def test_a_free_slot_is_taken_at_once_but_never_ahead_of_a_caller_waiting_for_one() -> None:
    async def scenario() -> None:
        bulkhead = Bulkhead("worker", max_concurrent=1, max_wait_seconds=1.0)
        # given a free slot: it is taken without waiting, and the bulkhead is then full
        assert bulkhead.try_acquire()
        assert bulkhead.in_use == 1 and not bulkhead.try_acquire()
        # when a caller waits for it and it is given back
        waiting = asyncio.ensure_future(bulkhead.acquire())
        for _ in range(10):  # a few turns: its wait starts in a task of its own
            await asyncio.sleep(0)
        bulkhead.release()
        # then the slot is the waiting caller's, not taken from under it
        assert not bulkhead.try_acquire()
        await asyncio.wait_for(waiting, 1.0)
        assert bulkhead.in_use == 1
        bulkhead.release()
        assert bulkhead.in_use == 0 and bulkhead.try_acquire()

    asyncio.run(scenario())
