"""The worker's background thread (``ferrymq.storage.server.background``): work beside serving, one call at a
time, on a thread of its own."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time

from ferrymq.storage.server.background import in_background


def test_background_calls_run_one_after_another_on_one_thread_beside_the_loop() -> None:
    spans: list[tuple[int, float, float]] = []

    def call() -> None:
        started = time.monotonic()
        time.sleep(0.05)
        spans.append((threading.get_native_id(), started, time.monotonic()))

    async def scenario() -> None:
        await asyncio.gather(in_background(call), in_background(call), in_background(call))
        # then all ran on one thread other than the loop's, and none began before the one before it ended
        assert len({tid for tid, _, _ in spans}) == 1
        assert spans[0][0] != threading.get_native_id()
        for (_, _, ended), (_, began, _) in itertools.pairwise(spans):
            assert began >= ended

    asyncio.run(scenario())


def test_what_a_background_call_raises_reaches_its_caller() -> None:
    def fails(path: str) -> None:
        raise FileNotFoundError(path)

    async def scenario() -> None:
        try:
            await in_background(fails, "/nowhere")
        except FileNotFoundError as exc:
            assert exc.args == ("/nowhere",)
        else:
            raise AssertionError("the call's error was lost")

    asyncio.run(scenario())
