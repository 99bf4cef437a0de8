"""LeaderClients: the leader lookup and one client per worker address, found per partition; shared by the front
end and the workers.

No worker is ever reached: clients are made but never connect, and the lookups are tables the tests fill in.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from ferrymq.clock import ManualClock
from ferrymq.errors import ServiceUnavailable
from ferrymq.rpc.leaders import Endpoint, LeaderClients


class Table:
    """A leader lookup the test changes by hand, counting the lookups made."""

    def __init__(self, **leaders: Endpoint) -> None:
        self.leaders = {int(p.removeprefix("p")): a for p, a in leaders.items()}
        self.lookups = 0

    async def lookup(self, partition: int) -> Endpoint | None:
        self.lookups += 1
        return self.leaders.get(partition)


def leader_clients(table: Table, clock: ManualClock, ttl: float = 30) -> LeaderClients:
    return LeaderClients(table.lookup, clock=clock, ttl=ttl, connect_timeout=1, request_timeout=2)


def test_a_partition_s_client_is_kept_while_its_lookup_is_fresh() -> None:
    async def scenario() -> None:
        # given a leader for partition 3
        table, clock = Table(p3=Endpoint("10.0.0.1", 7000)), ManualClock()
        leaders = leader_clients(table, clock, ttl=30)
        # when its client is asked for twice within the ttl
        first = await leaders.client(3)
        clock.advance(29)
        second = await leaders.client(3)
        # then it is one client, for that address, with the options given, found with one lookup
        assert first is second
        assert (first.host, first.port, first._request_timeout) == ("10.0.0.1", 7000, 2)
        assert table.lookups == 1

    asyncio.run(scenario())


def test_an_unchanged_leader_keeps_its_client_after_the_ttl_and_after_forget() -> None:
    async def scenario() -> None:
        table, clock = Table(p3=Endpoint("10.0.0.1", 7000)), ManualClock()
        leaders = leader_clients(table, clock, ttl=30)
        first = await leaders.client(3)
        # when the ttl runs out, and later the client is forgotten after a failure
        clock.advance(30)
        after_ttl = await leaders.client(3)
        leaders.forget(3)
        after_forget = await leaders.client(3)
        # then each time the leader is looked up again, and the same client stays, open
        assert table.lookups == 3
        assert after_ttl is first and after_forget is first
        assert not first.closed

    asyncio.run(scenario())


def test_a_moved_leader_replaces_the_client_and_closes_the_old_one() -> None:
    async def scenario() -> None:
        # given clients for partitions 1 and 2
        table, clock = Table(p1=Endpoint("h", 7001), p2=Endpoint("h", 7002)), ManualClock()
        leaders = leader_clients(table, clock)
        old = await leaders.client(1)
        other = await leaders.client(2)
        # when partition 1's worker restarts on one new port after another
        for port in (8001, 8002, 8003):
            table.leaders[1] = Endpoint("h", port)
            leaders.forget(1)
            await leaders.client(1)
        # then there is still one client per partition, partition 1's for its latest address
        held = leaders.clients()
        assert set(held) == {1, 2}
        assert (held[1].host, held[1].port) == ("h", 8003)
        assert held[2] is other
        # and the first client was closed, for good
        assert old.closed
        with pytest.raises(ServiceUnavailable):
            await old.ping()

    asyncio.run(scenario())


def test_no_leader_is_service_unavailable_and_drops_the_client() -> None:
    async def scenario() -> None:
        table, clock = Table(p5=Endpoint("h", 7005)), ManualClock()
        leaders = leader_clients(table, clock)
        old = await leaders.client(5)
        # when partition 5 loses its leader and the lookup is made again
        del table.leaders[5]
        leaders.forget(5)
        # then the call is ServiceUnavailable naming the partition, and nothing is held for it any more
        with pytest.raises(ServiceUnavailable, match="partition 5"):
            await leaders.client(5)
        assert leaders.clients() == {}
        assert old.closed

    asyncio.run(scenario())


def test_a_failed_lookup_propagates_and_is_not_cached() -> None:
    async def scenario() -> None:
        calls: list[int] = []

        async def flaky(partition: int) -> Endpoint:
            calls.append(partition)
            if len(calls) == 1:
                raise ServiceUnavailable("partition map unreachable")
            return Endpoint("h", 7000)

        leaders = LeaderClients(flaky, clock=ManualClock(), ttl=30)
        # when the first lookup fails, then the caller sees its error
        with pytest.raises(ServiceUnavailable, match="unreachable"):
            await leaders.client(0)
        # and the next call looks up again, and gets a client
        assert (await leaders.client(0)).port == 7000
        assert calls == [0, 0]

    asyncio.run(scenario())


def test_concurrent_callers_share_one_lookup() -> None:
    async def scenario() -> None:
        release = asyncio.Event()
        calls: list[int] = []

        async def slow(partition: int) -> Endpoint:
            calls.append(partition)
            await release.wait()
            return Endpoint("h", 7000)

        leaders = LeaderClients(slow, clock=ManualClock(), ttl=30)
        # given ten requests for partition 0 waiting on its lookup
        waiting = [asyncio.ensure_future(leaders.client(0)) for _ in range(10)]
        await asyncio.sleep(0)
        # when the lookup answers
        release.set()
        got = await asyncio.gather(*waiting)
        # then it was made once and all ten got the same client
        assert calls == [0]
        assert all(c is got[0] for c in got)

    asyncio.run(scenario())


def test_a_blocking_lookup_runs_off_the_event_loop() -> None:
    async def scenario() -> None:
        loop_thread = threading.get_ident()
        threads: list[int] = []

        def blocking(partition: int) -> Endpoint:
            threads.append(threading.get_ident())
            return Endpoint("h", 7000 + partition)

        leaders = LeaderClients(blocking, clock=ManualClock(), ttl=30)
        # when a client is asked for with a plain (blocking) lookup
        client = await leaders.client(4)
        # then the lookup ran in another thread, and its answer is used
        assert client.port == 7004
        assert threads and threads[0] != loop_thread

    asyncio.run(scenario())


def test_close_closes_every_client_and_hands_out_no_more() -> None:
    async def scenario() -> None:
        table, clock = Table(p0=Endpoint("h", 7000), p1=Endpoint("h", 7001)), ManualClock()
        leaders = leader_clients(table, clock)
        clients = [await leaders.client(0), await leaders.client(1)]
        # when closed
        await leaders.close()
        # then every client is closed and none is held, and asking for one is ServiceUnavailable
        assert all(c.closed for c in clients)
        assert leaders.clients() == {}
        with pytest.raises(ServiceUnavailable):
            await leaders.client(0)

    asyncio.run(scenario())


def test_a_lookup_under_way_when_closed_hands_out_no_client() -> None:
    async def scenario() -> None:
        release = asyncio.Event()

        async def slow(partition: int) -> Endpoint:
            await release.wait()
            return Endpoint("h", 7000)

        leaders = LeaderClients(slow, clock=ManualClock(), ttl=30)
        # given a caller waiting on a lookup
        waiting = asyncio.ensure_future(leaders.client(0))
        await asyncio.sleep(0)
        # when the clients are closed and the lookup then answers
        await leaders.close()
        release.set()
        # then the caller is told the service is unavailable, and no client was made
        with pytest.raises(ServiceUnavailable, match="closed"):
            await waiting
        assert leaders.clients() == {}

    asyncio.run(scenario())


def test_partitions_of_one_worker_share_its_client() -> None:
    async def scenario() -> None:
        # given partitions 0, 1 and 2 led by one worker, and partition 3 by another
        same = Endpoint("h", 7000)
        table, clock = Table(p0=same, p1=same, p2=same, p3=Endpoint("h", 7003)), ManualClock()
        leaders = leader_clients(table, clock)
        # when a client is asked for each partition
        clients = [await leaders.client(p) for p in range(4)]
        # then the first three share one client, and there is one client per worker address
        assert clients[0] is clients[1] is clients[2]
        assert clients[3] is not clients[0]
        assert set(leaders.workers()) == {("h", 7000), ("h", 7003)}
        assert leaders.clients() == {0: clients[0], 1: clients[0], 2: clients[0], 3: clients[3]}

    asyncio.run(scenario())


def test_a_worker_s_client_is_closed_once_no_partition_points_at_it() -> None:
    async def scenario() -> None:
        # given partitions 0 and 1 led by one worker
        table, clock = Table(p0=Endpoint("h", 7000), p1=Endpoint("h", 7000)), ManualClock()
        leaders = leader_clients(table, clock)
        shared = await leaders.client(0)
        assert await leaders.client(1) is shared
        # when partition 0 moves to another worker, then the shared client stays open for partition 1
        table.leaders[0] = Endpoint("h", 7100)
        leaders.forget(0)
        moved = await leaders.client(0)
        assert moved is not shared and not shared.closed
        assert await leaders.client(1) is shared
        # and when partition 1 moves there too, then the old worker's client is closed and not held any more
        table.leaders[1] = Endpoint("h", 7100)
        leaders.forget(1)
        assert await leaders.client(1) is moved
        assert shared.closed
        assert set(leaders.workers()) == {("h", 7100)}

    asyncio.run(scenario())
