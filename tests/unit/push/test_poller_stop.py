"""A mapping's poller stopping while a loop waits out its back-off after failed deliveries."""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace

from ferrymq.frontend.push.poller import MappingPoller
from ferrymq.frontend.push.targets import Delivery
from ferrymq.metadata.event_source_mappings import Mapping
from ferrymq.push.mapping import MappingConfig
from ferrymq.settings import Settings

HOUR = 3600.0
GUARD_SECONDS = 60.0
"""Only against a hung test: without the stop, the back-off below lasts an hour."""


class _LongestWaits(random.Random):
    """Jitter that always draws an hour: a loop that sleeps its back-off out would outlast any test."""

    def uniform(self, a: float, b: float) -> float:
        return HOUR


class _Target:
    async def deliver(self, body: bytes, timeout: float) -> Delivery:
        raise AssertionError("nothing is delivered here")

    def close(self) -> None:
        pass


def test_a_loop_waiting_out_a_back_off_ends_as_soon_as_its_poller_is_stopped() -> None:
    async def scenario() -> list[str]:
        # given a poller whose delivery keeps failing, so that its loop backs off before the next receive
        mapping = Mapping("000000000000", "5d0e6b6e-6f0b-4c1e-9a57-1f2f3c4d5e6f",
                          MappingConfig("arn:aws:sqs:us-east-1:000000000000:q", None, "https://example.com/hook"),
                          1, 0.0)
        reports: list[str] = []

        async def report(result: str) -> None:
            reports.append(result)

        poller = MappingPoller(mapping, SimpleNamespace(settings=Settings()), _Target(), report,  # type: ignore[arg-type]
                               rng=_LongestWaits())
        failed = asyncio.Event()

        async def failing_once() -> None:
            await poller._failed("PROBLEM: Function call failed: test", throttled=False)
            failed.set()

        poller._once = failing_once  # type: ignore[method-assign]
        running = asyncio.create_task(poller.run())
        await failed.wait()
        # when it is stopped while that loop waits out its back-off
        poller.stop()
        # then the loop ends, and the poller with it, without receiving again
        await asyncio.wait_for(running, GUARD_SECONDS)
        return reports

    assert asyncio.run(scenario()) == ["PROBLEM: Function call failed: test"]
