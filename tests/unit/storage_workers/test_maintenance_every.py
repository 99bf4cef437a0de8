"""``maintenance.every``: periodic work done in steps, the loop free between them."""

from __future__ import annotations

import asyncio
from itertools import pairwise

from ferrymq.storage.server.maintenance import every


def test_work_left_after_a_step_is_done_at_once_in_further_steps_with_the_loop_running_between_them() -> None:
    async def scenario() -> list[str]:
        happened: list[str] = []
        steps_left = [3]

        def step() -> bool:
            happened.append("step")
            steps_left[0] -= 1
            return steps_left[0] > 0

        async def ticker() -> None:
            while True:
                happened.append("tick")
                await asyncio.sleep(0)

        # given periodic work that takes three steps, and another task that runs whenever the loop is free
        tasks = [asyncio.create_task(ticker()), asyncio.create_task(every("work", 0.01, step))]
        await asyncio.sleep(0.03)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return happened

    happened = asyncio.run(scenario())
    # then the three steps of the first period ran one after another, the other task running between each two
    # (a fourth step is the next period's)
    steps = [i for i, what in enumerate(happened) if what == "step"][:3]
    assert len(steps) == 3
    assert all("tick" in happened[a:b] for a, b in pairwise(steps))
    assert steps[-1] - steps[0] < 10


def test_a_failing_step_is_logged_and_the_work_goes_on_next_period() -> None:
    async def scenario() -> int:
        calls = [0]

        def step() -> bool:
            calls[0] += 1
            raise RuntimeError("boom")

        task = asyncio.create_task(every("work", 0.01, step))
        await asyncio.sleep(0.055)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return calls[0]

    assert asyncio.run(scenario()) >= 2
