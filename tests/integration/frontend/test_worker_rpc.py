"""The front end's side of the worker RPC against real worker processes: deadlines when a worker hangs
(SIGSTOP: alive, connected, silent), and one client per partition when a worker comes back on a new port."""

from __future__ import annotations

import asyncio
import os
import signal
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from ferrymq.aws.partitions import PartitionMap
from ferrymq.aws.queue_store import QueueRecord
from ferrymq.clock import SystemClock
from ferrymq.errors import ServiceUnavailable
from ferrymq.frontend.dispatch import Dispatcher
from ferrymq.rpc.client import WorkerClient, WorkerTimeout
from ferrymq.rpc.leaders import LeaderClients
from ferrymq.settings import Settings
from tests.integration.conftest import WorkerProcess

RETENTION = 345600
NOTHING = {"visible": 0, "in_flight": 0, "delayed": 0}


@pytest.mark.timeout(120)
def test_a_hung_worker_is_service_unavailable_and_serves_again_once_resumed(
    start_worker: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    # given a worker and a client with a half-second deadline, connected
    worker = start_worker(tmp_path / "w", worker_id="w-hung", extra_args=["--no-register"])
    where = f"{worker.host}:{worker.port}"

    async def scenario() -> None:
        client = WorkerClient(worker.host, worker.port, connect_timeout=2, request_timeout=0.5)
        try:
            assert (await client.ping())["worker_id"] == "w-hung"
            # when the worker is stopped (not killed) and a call and a long poll are made on the connection
            os.kill(worker.proc.pid, signal.SIGSTOP)
            try:
                ping, poll = await asyncio.gather(
                    client.ping(),
                    client.receive(0, "q", max_messages=1, visibility_timeout=30, wait_seconds=5,
                                   retention_seconds=RETENTION),
                    return_exceptions=True,
                )
            finally:
                os.kill(worker.proc.pid, signal.SIGCONT)
            # then the call fails at its deadline as a 503 naming the worker and the deadline
            assert isinstance(ping, WorkerTimeout) and isinstance(ping, ServiceUnavailable)
            assert ping.status == 503
            assert where in ping.message and "0.5 s" in ping.message
            # and the long poll, stuck behind the same silent worker, fails with it instead of waiting on
            assert isinstance(poll, ServiceUnavailable) and not isinstance(poll, WorkerTimeout)
            # and once the worker runs again, the next call reconnects and is answered
            assert (await client.ping())["worker_id"] == "w-hung"
        finally:
            await client.close()

    try:
        asyncio.run(scenario())
    finally:
        os.kill(worker.proc.pid, signal.SIGCONT)
    assert worker.terminate() == 0


@pytest.mark.timeout(120)
def test_a_long_poll_gets_its_wait_on_top_of_the_deadline(
    start_worker: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    # given a worker and a client whose deadline is shorter than the long poll it makes
    worker = start_worker(tmp_path / "w", worker_id="w-poll", extra_args=["--no-register"])

    async def scenario() -> list[dict]:
        client = WorkerClient(worker.host, worker.port, request_timeout=2)
        try:
            # when it long-polls an empty queue for 3 s
            return await client.receive(0, "empty", max_messages=1, visibility_timeout=30, wait_seconds=3,
                                        retention_seconds=RETENTION)
        finally:
            await client.close()

    # then the poll runs its course and answers: nothing
    assert asyncio.run(scenario()) == []
    assert worker.terminate() == 0


@pytest.mark.timeout(180)
def test_a_worker_restarted_on_a_new_port_leaves_one_client_for_its_partition(
    start_worker: Callable[..., WorkerProcess], aws_settings: Settings, tmp_path: Path
) -> None:
    # given a worker leading partition 51, found through the partition map by the front end's dispatcher
    worker = start_worker(tmp_path / "w", worker_id="w-51", partition=51)
    queue = QueueRecord(account="000000000000", name="restarts", queue_id=f"restarts/{uuid.uuid4().hex[:8]}",
                        partition=51)
    leaders = LeaderClients(PartitionMap.from_settings(aws_settings).lookup, clock=SystemClock(), ttl=60,
                            connect_timeout=2, request_timeout=10)
    dispatcher = Dispatcher(leaders)

    async def stats(client: WorkerClient) -> dict:
        return await client.stats(queue.partition, queue.queue_id, retention_seconds=RETENTION)

    async def scenario() -> WorkerProcess:
        try:
            assert await dispatcher.call(queue, stats, idempotent=True) == NOTHING
            old = leaders.clients()[51]
            # when the worker is killed and comes back on another port
            worker.kill9()
            restarted = await asyncio.to_thread(start_worker, tmp_path / "w", worker_id="w-51", partition=51)
            assert restarted.port != worker.port
            # then the next idempotent call finds it and is answered
            assert await dispatcher.call(queue, stats, idempotent=True) == NOTHING
            # and the dispatcher holds exactly one client for the partition, the new one, the old one closed
            held = leaders.clients()
            assert list(held) == [51]
            assert (held[51].host, held[51].port) == (restarted.host, restarted.port)
            assert old.closed
            return restarted
        finally:
            await dispatcher.close()

    restarted = asyncio.run(scenario())
    assert restarted.terminate() == 0
