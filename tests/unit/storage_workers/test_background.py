"""The worker's background thread (``ferrymq.storage.server.background``): work beside serving, at nice 19."""

from __future__ import annotations

import asyncio
import os
import threading

from ferrymq.storage.server.background import LOWEST_PRIORITY, in_background


def _where() -> tuple[int, int]:
    tid = threading.get_native_id()
    return tid, os.getpriority(os.PRIO_PROCESS, tid)


def test_background_calls_run_one_after_another_on_a_thread_at_the_lowest_priority() -> None:
    async def scenario() -> None:
        loop_thread = _where()
        first, second = await asyncio.gather(in_background(_where), in_background(_where))
        # then both ran on one thread other than the loop's, at nice 19, and the loop's thread kept its priority
        assert first == second
        assert first[0] != loop_thread[0] and first[1] == LOWEST_PRIORITY
        assert _where() == loop_thread

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
