"""The leader cut off from its followers while clients still reach it (a partial network partition).

Each worker's followers fetch through a proxy of its own (``FERRYMQ_WORKER_REPLICATION_PORT``), while the
front end goes to the worker directly. Switching the leader's proxy off cuts replication only: the leader
can no longer commit, so it acknowledges nothing more; once its replies have been stuck for a lease it lets
its lease lapse, an in-sync follower takes the next epoch, and the old leader, learning of it, follows. The
checker then finds nothing acknowledged lost.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.e2e.conftest import Stack
from tests.fault.conftest import fault_stack
from tests.fault.test_failover import cluster_status, leader, run_scenario, wait_healthy
from tests.support.ports import consecutive_free_ports
from tests.support.tcp_proxy import SwitchableProxy


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, list[SwitchableProxy]]]:
    workers = consecutive_free_ports(3)
    first_proxy = consecutive_free_ports(3, avoid=range(workers, workers + 3))
    proxies = [
        SwitchableProxy(lambda i=i: ("127.0.0.1", workers + i), port=first_proxy + i)  # type: ignore[misc]
        for i in range(3)
    ]
    try:
        # No handover back to the preferred replica: the cut-off worker would get leadership back while cut.
        yield from (
            (stack, proxies)
            for stack in fault_stack(
                tmp_path_factory,
                "cut-off-stack",
                FERRYMQ_WORKER_PORT=str(workers),
                FERRYMQ_WORKER_REPLICATION_PORT=str(first_proxy),
                FERRYMQ_LEADER_HANDOVER_SECONDS="0",
            )
        )
    finally:
        for proxy in proxies:
            proxy.close()


def test_a_leader_cut_off_from_its_followers_stops_acknowledging_and_is_replaced(
    proxied: tuple[Stack, list[SwitchableProxy]],
) -> None:
    stack, proxies = proxied
    victim = leader(stack)
    proxy = proxies[int(victim.split("-")[1])]

    def cut_off() -> None:
        proxy.enabled = False
        try:
            deadline = time.monotonic() + 30
            while cluster_status(stack)["partitions"][0]["leader"] == victim:
                assert time.monotonic() < deadline, "no follower took over from the cut-off leader"
                time.sleep(0.5)
        finally:
            proxy.enabled = True

    run_scenario(stack, cut_off)
    # and the old leader rejoined as a follower once it could be reached again
    healed = wait_healthy(stack)["partitions"][0]
    assert healed["leader"] != victim and victim in healed["isr"]
