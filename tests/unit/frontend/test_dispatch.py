"""Dispatcher.call: which failures are retried, against which worker.  The operations are stand-ins that
record the client they were given; no worker is reached."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from ferrymq.aws.queue_store import QueueRecord
from ferrymq.clock import ManualClock, SystemClock
from ferrymq.errors import InvalidParameterValue, NotLeader, QueueDoesNotExist, ServiceUnavailable, SqsError
from ferrymq.frontend.dispatch import Dispatcher, WorkerLimits, WorkerShunned
from ferrymq.rpc.client import WorkerClient, WorkerTimeout, WorkerUnreachable
from ferrymq.rpc.leaders import Endpoint, LeaderClients

QUEUE = QueueRecord(account="000000000000", name="q", queue_id="000000000000/q/1", partition=2)


class Leaders:
    """Partition 2's leader, moved by hand."""

    def __init__(self) -> None:
        self.address = Endpoint("h", 7000)

    async def lookup(self, partition: int) -> Endpoint:
        return self.address


def dispatcher(leaders: Leaders) -> Dispatcher:
    return Dispatcher(LeaderClients(leaders.lookup, clock=ManualClock(), ttl=60))


def failing(
    errors: list[SqsError], seen: list[WorkerClient], on_call: Callable[[], None] = lambda: None
) -> Callable[[WorkerClient], Awaitable[str]]:
    """An operation raising ``errors`` one per call, then answering "ok"."""

    async def op(client: WorkerClient) -> str:
        seen.append(client)
        on_call()
        if errors:
            raise errors.pop(0)
        return "ok"

    return op


@pytest.mark.parametrize("idempotent", [True, False])
def test_an_unreachable_worker_is_retried_once_for_idempotent_operations_only(idempotent: bool) -> None:
    async def scenario() -> None:
        # given an operation whose first attempt finds the worker unreachable
        d, seen = dispatcher(Leaders()), []
        op = failing([ServiceUnavailable("connection lost")], seen)
        # when it is dispatched
        if idempotent:
            # then an idempotent one is tried again, once, and answers
            assert await d.call(QUEUE, op, idempotent=True) == "ok"
            assert len(seen) == 2
        else:
            # then a send is not: the client's own retry of the 503 follows
            with pytest.raises(ServiceUnavailable):
                await d.call(QUEUE, op, idempotent=False)
            assert len(seen) == 1

    asyncio.run(scenario())


def test_a_retry_goes_to_the_leader_s_new_address() -> None:
    async def scenario() -> None:
        # given a worker that fails because it restarted on a new port meanwhile
        leaders = Leaders()
        d, seen = dispatcher(leaders), []

        def restart() -> None:
            leaders.address = Endpoint("h", 7100)

        # when an idempotent operation is dispatched
        assert await d.call(QUEUE, failing([ServiceUnavailable("refused")], seen, restart), idempotent=True) == "ok"
        # then the retry went to the new address, on a new client, and the old client was closed
        assert [c.port for c in seen] == [7000, 7100]
        assert seen[0].closed and not seen[1].closed

    asyncio.run(scenario())


def test_a_timeout_is_not_retried_against_the_same_worker() -> None:
    async def scenario() -> None:
        # given a worker that does not answer in time and is still the leader
        d, seen = dispatcher(Leaders()), []
        op = failing([WorkerTimeout("no answer")], seen)
        # when an idempotent operation is dispatched, then the timeout is the answer, after one attempt
        with pytest.raises(WorkerTimeout):
            await d.call(QUEUE, op, idempotent=True)
        assert len(seen) == 1

    asyncio.run(scenario())


def test_a_timeout_is_retried_when_the_partition_has_a_new_leader() -> None:
    async def scenario() -> None:
        # given a hung worker whose partition another worker has taken by the time its deadline passes
        leaders = Leaders()
        d, seen = dispatcher(leaders), []

        def taken_over() -> None:
            leaders.address = Endpoint("h2", 7000)

        op = failing([WorkerTimeout("no answer")], seen, taken_over)
        # when an idempotent operation is dispatched, then it is retried on the new leader
        assert await d.call(QUEUE, op, idempotent=True) == "ok"
        assert [c.host for c in seen] == ["h", "h2"]

    asyncio.run(scenario())


def test_errors_of_the_request_are_not_retried() -> None:
    async def scenario() -> None:
        d, seen = dispatcher(Leaders()), []
        op = failing([InvalidParameterValue("bad receipt")], seen)
        with pytest.raises(InvalidParameterValue):
            await d.call(QUEUE, op, idempotent=True)
        assert len(seen) == 1

    asyncio.run(scenario())


def test_a_worker_saying_the_queue_is_gone_drops_it_from_the_cache_and_is_not_retried() -> None:
    async def scenario() -> None:
        # given a dispatcher told where to report queues gone
        gone: list[QueueRecord] = []
        d = Dispatcher(LeaderClients(Leaders().lookup, clock=ManualClock(), ttl=60), on_queue_gone=gone.append)
        seen: list[WorkerClient] = []
        # when the worker answers that the queue id was dropped (deleted since the front end cached it)
        with pytest.raises(QueueDoesNotExist):
            await d.call(QUEUE, failing([QueueDoesNotExist()], seen), idempotent=True)
        # then the caller gets the error once, and the queue is reported so the next request reads the catalog
        assert len(seen) == 1
        assert gone == [QUEUE]

    asyncio.run(scenario())


@pytest.mark.parametrize("idempotent", [True, False])
def test_not_leader_is_retried_once_against_the_refreshed_leader_for_every_operation(idempotent: bool) -> None:
    async def scenario() -> None:
        # given a worker that no longer serves the queue's partition, which another worker took meanwhile
        leaders = Leaders()
        d, seen = dispatcher(leaders), []

        def moved() -> None:
            leaders.address = Endpoint("h2", 7200)

        op = failing([NotLeader(partition=2, worker="w-old")], seen, moved)
        # when an operation is dispatched, a send included (a NotLeader request was not executed)
        answer = await d.call(QUEUE, op, idempotent=idempotent)
        # then it is retried once, against the leader looked up again
        assert answer == "ok"
        assert [(c.host, c.port) for c in seen] == [("h", 7000), ("h2", 7200)]

    asyncio.run(scenario())


def test_not_leader_is_retried_only_once() -> None:
    async def scenario() -> None:
        # given workers that both answer NotLeader
        d, seen = dispatcher(Leaders()), []
        op = failing([NotLeader(partition=2, worker="w-a"), NotLeader(partition=2, worker="w-b")], seen)
        # when an operation is dispatched, then the second NotLeader is the answer, a 503
        with pytest.raises(NotLeader) as raised:
            await d.call(QUEUE, op, idempotent=False)
        assert len(seen) == 2
        assert raised.value.status == 503 and isinstance(raised.value, ServiceUnavailable)
        assert "partition 2" in raised.value.message and "w-b" in raised.value.message

    asyncio.run(scenario())


def test_a_worker_that_could_not_be_reached_was_never_asked_so_every_operation_is_retried() -> None:
    async def scenario() -> None:
        # given a send whose first attempt found no connection to the worker (nothing was sent)
        d, seen = dispatcher(Leaders()), []
        op = failing([WorkerUnreachable("connection refused")], seen)
        # when it is dispatched, then it is retried although it is not idempotent
        assert await d.call(QUEUE, op, idempotent=False) == "ok"
        assert len(seen) == 2

    asyncio.run(scenario())


def test_a_send_whose_outcome_is_unknown_is_resent_naming_no_time() -> None:
    async def scenario() -> None:
        # given a standard send whose leader stepped down before committing it (outcome unknown)
        clock = ManualClock(start=1_000.0)
        d = Dispatcher(LeaderClients(Leaders().lookup, clock=clock, ttl=60), clock=clock)
        seen: list[WorkerClient] = []
        op = failing([ServiceUnavailable("stepped down before the request was committed")], seen)
        resent: list[WorkerClient] = []

        async def resend(client: WorkerClient) -> str:
            resent.append(client)
            return "resent"

        # when it is dispatched with a resend
        answer = await d.call(QUEUE, op, idempotent=False, resend=resend)
        # then the retry is the resend (the same message ids; no time of this front end's clock goes with it)
        assert answer == "resent" and len(seen) == 1 and len(resent) == 1

    asyncio.run(scenario())


def test_a_request_waits_for_the_next_leader_until_the_failover_time_is_up() -> None:
    async def scenario() -> None:
        # given a partition whose leader keeps answering NotLeader (no new leader is elected)
        leaders = Leaders()
        d = Dispatcher(LeaderClients(leaders.lookup, clock=SystemClock(), ttl=60), failover_seconds=0.4)
        seen: list[WorkerClient] = []
        op = failing([NotLeader()] * 100, seen)
        # when a request is dispatched, then it is retried for the failover time, then answered 503
        with pytest.raises(ServiceUnavailable):
            await d.call(QUEUE, op, idempotent=False)
        assert 3 <= len(seen) < 100
        # and when a leader turns up within the failover time, the request succeeds there
        leaders.address = Endpoint("h", 7001)
        op = failing([NotLeader(), NotLeader()], seen := [])
        assert await d.call(QUEUE, op, idempotent=False) == "ok"

    asyncio.run(scenario())


def test_a_worker_leaving_requests_unanswered_is_shunned_until_its_cooldown_ends() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        d = Dispatcher(LeaderClients(Leaders().lookup, clock=clock, ttl=60), clock=clock,
                       limits=WorkerLimits(breaker_failures=2, breaker_cooldown_seconds=1.0))
        seen: list[WorkerClient] = []
        # given two requests in a row that the worker never answered
        for _ in range(2):
            with pytest.raises(WorkerTimeout):
                await d.call(QUEUE, failing([WorkerTimeout("silent")], seen), idempotent=False)
        # when the next comes, it is not sent at all: a 503 at once, the operation never run
        with pytest.raises(WorkerShunned):
            await d.call(QUEUE, failing([], seen), idempotent=True)
        assert len(seen) == 2
        # and after the cooldown one trial goes through; its answer closes the breaker
        clock.advance(1.0)
        assert await d.call(QUEUE, failing([], seen), idempotent=True) == "ok"
        assert await d.call(QUEUE, failing([], seen), idempotent=True) == "ok"
        assert len(seen) == 4

    asyncio.run(scenario())


def test_a_refusal_from_the_worker_counts_as_an_answer() -> None:
    async def scenario() -> None:
        clock = ManualClock()
        d = Dispatcher(LeaderClients(Leaders().lookup, clock=clock, ttl=60), clock=clock,
                       limits=WorkerLimits(breaker_failures=1))
        seen: list[WorkerClient] = []
        with pytest.raises(InvalidParameterValue):
            await d.call(QUEUE, failing([InvalidParameterValue("no")], seen), idempotent=True)
        assert await d.call(QUEUE, failing([], seen), idempotent=True) == "ok"

    asyncio.run(scenario())


def test_requests_beyond_a_workers_in_flight_limit_are_not_sent() -> None:
    async def scenario() -> None:
        d = Dispatcher(LeaderClients(Leaders().lookup, clock=ManualClock(), ttl=60),
                       limits=WorkerLimits(max_in_flight=1, max_wait_seconds=0.01))
        gate = asyncio.Event()

        async def slow(client: WorkerClient) -> str:
            await gate.wait()
            return "slow"

        first = asyncio.ensure_future(d.call(QUEUE, slow, idempotent=False))
        await asyncio.sleep(0.01)
        ran: list[WorkerClient] = []
        with pytest.raises(WorkerShunned, match="Too many requests are waiting"):
            await d.call(QUEUE, failing([], ran), idempotent=False)
        assert ran == []
        gate.set()
        assert await first == "slow"

    asyncio.run(scenario())


def test_walls_of_workers_no_partition_leads_any_more_are_dropped() -> None:
    async def scenario() -> None:
        # given a partition whose leader keeps restarting on a new port (a restart binds a new one)
        leaders = Leaders()
        d, seen = dispatcher(leaders), []
        for port in range(7000, 7050):
            leaders.address = Endpoint("h", port)
            d._leaders.forget(2)
            # when a request goes to each new address
            assert await d.call(QUEUE, failing([], seen), idempotent=True) == "ok"
        # then only the addresses still in use keep a bulkhead and breaker, not all fifty
        assert [c.port for c in seen] == list(range(7000, 7050))
        assert d.walled_workers <= 2

    asyncio.run(scenario())


def test_a_wall_with_a_request_in_flight_is_kept() -> None:
    async def scenario() -> None:
        # given a request still running on a worker that has since lost the partition
        leaders = Leaders()
        d = dispatcher(leaders)
        gate = asyncio.Event()

        async def slow(client: WorkerClient) -> str:
            await gate.wait()
            return "slow"

        first = asyncio.ensure_future(d.call(QUEUE, slow, idempotent=True))
        await asyncio.sleep(0.01)
        leaders.address = Endpoint("h", 7100)
        d._leaders.forget(2)
        # when a request goes to the new leader
        assert await d.call(QUEUE, failing([], []), idempotent=True) == "ok"
        # then the old worker's wall stays while its request runs (its slot is released into it)
        assert d.walled_workers == 2
        gate.set()
        assert await first == "slow"

    asyncio.run(scenario())
