"""A periodic step: run at once and then again after each wait, a failing run logged without ending the task."""

from __future__ import annotations

import asyncio
import logging

import pytest

from ferrymq.periodic import Periodic


def test_a_step_runs_again_after_a_failure_and_stops_when_closed(caplog: pytest.LogCaptureFixture) -> None:
    runs: list[int] = []

    async def step() -> None:
        runs.append(len(runs))
        if len(runs) == 2:
            raise RuntimeError("the second run fails")

    async def scenario() -> int:
        periodic = Periodic("the test step", 0.01, step)
        periodic.start()
        while len(runs) < 4:
            await asyncio.sleep(0.005)
        await periodic.close()
        stopped_at = len(runs)
        await asyncio.sleep(0.05)
        return stopped_at

    with caplog.at_level(logging.WARNING):
        stopped_at = asyncio.run(scenario())
    assert len(runs) == stopped_at >= 4
    assert "the test step failed: RuntimeError('the second run fails')" in caplog.text


def test_a_plain_function_is_a_step_too() -> None:
    calls: list[None] = []

    async def scenario() -> None:
        periodic = Periodic("a plain step", 0.01, lambda: calls.append(None))
        periodic.start()
        while len(calls) < 2:
            await asyncio.sleep(0.005)
        await periodic.close()
        await periodic.close()  # closing twice is harmless

    asyncio.run(scenario())
    assert len(calls) >= 2
