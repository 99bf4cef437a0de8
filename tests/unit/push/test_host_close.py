"""A push host closing while a poller it stopped earlier (its mapping moved) still waits in a long poll."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from ferrymq.frontend.push import host as push_host
from ferrymq.frontend.push.host import PushHost
from ferrymq.frontend.push.poller import MappingPoller
from ferrymq.frontend.push.targets import Delivery
from ferrymq.metadata.event_source_mappings import Mapping
from ferrymq.push.mapping import MappingConfig
from ferrymq.settings import Settings

GUARD_SECONDS = 60.0
"""Only against a hung test: the close's drain allowance is set to an hour below."""


class _Target:
    async def deliver(self, body: bytes, timeout: float) -> Delivery:
        raise AssertionError("nothing is delivered here")

    def close(self) -> None:
        pass


class _Leases:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def release(self, *args: Any) -> None:
        self.calls.append("release")

    def report(self, *args: Any) -> None:
        self.calls.append("report")

    def forget_host(self, owner: str) -> None:
        self.calls.append("forget_host")


def test_close_ends_the_idle_long_poll_of_a_poller_stopped_before(monkeypatch: pytest.MonkeyPatch) -> None:
    # given receives that wait as long as a long poll with nothing to bring would, and a close that would give
    # pollers an hour to finish what they have under way
    polling = asyncio.Event()

    async def idle_receive(self: MappingPoller, count: int, wait: int) -> list[dict[str, Any]]:
        polling.set()
        await asyncio.sleep(3600)
        return []

    monkeypatch.setattr(MappingPoller, "_receive", idle_receive)
    monkeypatch.setattr(push_host, "CLOSE_DRAIN_SECONDS", 3600.0)

    async def scenario() -> list[str]:
        leases = _Leases()
        services = SimpleNamespace(settings=Settings(), metadata=None)
        host = PushHost(services, SimpleNamespace(), leases, owner="test-host",  # type: ignore[arg-type]
                        make_target=lambda mapping: _Target())
        mapping = Mapping("000000000000", "5d0e6b6e-6f0b-4c1e-9a57-1f2f3c4d5e6f",
                          MappingConfig("arn:aws:sqs:us-east-1:000000000000:q", None, "https://example.com/hook"),
                          1, 0.0)
        # and a mapping whose poller is in a long poll that holds nothing yet
        await host._start(mapping, 1)
        await polling.wait()
        # when the mapping is stopped (as when it moves to another host), its poller left to finish in the
        # background, and then the host closes
        await host._stop(mapping.uuid, release=False)
        await asyncio.wait_for(host.close(), GUARD_SECONDS)
        # then the close did not wait for that long poll, and the host gave up its item
        return leases.calls

    assert asyncio.run(scenario()) == ["forget_host"]
