"""The log writer's I/O thread: calls run in the order given, off the event loop, each outcome handed back to
the loop; an error is handed back, not lost; a loop gone meanwhile does not stop the thread; nothing is taken
after shutdown."""

from __future__ import annotations

import asyncio
import gc
import threading

import pytest

from ferrymq.storage.log.io_thread import IoThread


def test_calls_run_in_order_in_the_thread_and_their_outcomes_come_back_to_the_loop() -> None:
    async def scenario() -> tuple[list[int], list[str], list[str]]:
        # given an I/O thread and calls that note where they ran
        io = IoThread("test-io")
        loop = asyncio.get_running_loop()
        ran: list[int] = []
        where: list[str] = []
        told: list[str] = []
        done = asyncio.Event()

        def work(n: int) -> int:
            ran.append(n)
            where.append(threading.current_thread().name)
            return n * 10

        def outcome(result: int, error: BaseException | None) -> None:
            told.append(f"{result} {error} {threading.current_thread() is threading.main_thread()}")
            if len(told) == 5:
                done.set()

        # when five are submitted at once
        for n in range(5):
            io.submit(loop, work, (n,), outcome)
        await done.wait()
        io.shutdown()
        return ran, where, told

    ran, where, told = asyncio.run(scenario())
    # then they ran in that order, in the I/O thread, and each outcome came back in the loop's thread
    assert ran == [0, 1, 2, 3, 4]
    assert set(where) == {"test-io"}
    assert told == [f"{n * 10} None True" for n in range(5)]


def test_an_error_in_a_call_is_raised_to_its_caller_and_the_thread_goes_on() -> None:
    async def scenario() -> int:
        io = IoThread("test-io")

        def broken() -> None:
            raise OSError(5, "Input/output error")

        # when a call fails, then its caller gets that error
        with pytest.raises(OSError, match="Input/output error"):
            await io.call(broken)
        # and the next call still runs
        answer = await io.call(int, "42")
        io.shutdown()
        return answer

    assert asyncio.run(scenario()) == 42


def test_a_loop_closed_before_its_outcome_arrives_does_not_stop_the_thread() -> None:
    # given a call that waits, submitted from a loop that is then closed
    io = IoThread("test-io")
    gate = threading.Event()
    gone = asyncio.new_event_loop()
    io.submit(gone, gate.wait, (), lambda result, error: None)
    gone.close()
    gate.set()

    # when another loop submits a call afterwards, then it is run and answered
    async def later() -> str:
        return await io.call(str, 7)

    assert asyncio.run(later()) == "7"
    io.shutdown()


def test_shutdown_runs_what_was_submitted_then_takes_nothing_more() -> None:
    async def scenario() -> list[int]:
        io = IoThread("test-io")
        loop = asyncio.get_running_loop()
        ran: list[int] = []
        for n in range(3):
            io.submit(loop, ran.append, (n,), lambda result, error: None)
        # when it is shut down, then what was submitted ran
        io.shutdown()
        assert ran == [0, 1, 2]
        # and a call after that is refused, not silently dropped
        with pytest.raises(RuntimeError, match="shut down"):
            io.submit(loop, ran.append, (3,), lambda result, error: None)
        return ran

    assert asyncio.run(scenario()) == [0, 1, 2]


def test_a_thread_dropped_without_shutdown_ends_with_its_owner() -> None:
    async def scenario() -> threading.Thread:
        # given an I/O thread that ran a call, then dropped by its owner without a shutdown
        io = IoThread("test-io")
        assert await io.call(str, 1) == "1"
        thread = io._thread
        assert thread is not None and thread.is_alive()
        del io
        gc.collect()
        return thread

    thread = asyncio.run(scenario())
    # then its thread ends rather than waiting for calls for good
    thread.join(timeout=10)
    assert not thread.is_alive()
