"""A replica's state rebuilt by recovery (a follower's cut, a state copy) or opened on a running worker (a
replica set it was added to) is replayed in a thread: the event loop goes on serving meanwhile, and what it
reads (PING's status, ``/metrics``) is the complete old state until the new one is complete."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from ferrymq.storage.engine.records import SENT, Record
from ferrymq.storage.log.recovery import RecoveredLog, recover
from ferrymq.storage.server import StorageWorker, WorkerConfig
from ferrymq.storage.server import replica as replica_module
from ferrymq.storage.server.layout import replica_dir
from ferrymq.storage.server.metrics import worker_registry
from tests.support.engine_requests import RECEIPT_KEY
from tests.support.log_files import write_batches

QUEUES = 200
"""Each its own record: a replay adds the engine's queues one by one."""


def sent(queue: str, seq: int) -> Record:
    return (SENT, queue, 1_700_000_000_000, seq, [[str(uuid.UUID(int=seq)), "x", {}, "md5", None, 0, {}]])


def log_of_many_queues(directory: Path) -> None:
    write_batches(directory, [[sent(f"q{i}", i + 1) for i in range(QUEUES)]])


class PausedRecovery:
    """Recovery that stops halfway through the replay until :meth:`go` (an injected slow step)."""

    def __init__(self) -> None:
        self.halfway = threading.Event()
        self._go = threading.Event()

    def go(self) -> None:
        self._go.set()

    def __call__(self, directory: Path, apply: Callable[[Record], None], **options: Any) -> RecoveredLog:
        applied = 0

        def paced(record: Record) -> None:
            nonlocal applied
            apply(record)
            applied += 1
            if applied == QUEUES // 2:
                self.halfway.set()
                self._go.wait(30)

        return recover(directory, paced, **options)


@pytest.fixture
def paused(monkeypatch: pytest.MonkeyPatch) -> Iterator[PausedRecovery]:
    slow = PausedRecovery()
    monkeypatch.setattr(replica_module, "recover", slow)
    try:
        yield slow
    finally:
        slow.go()


def standing_by(data_dir: Path, partitions: tuple[int, ...]) -> StorageWorker:
    config = WorkerConfig(data_dir=data_dir, partitions=partitions, port=0, register=False)
    return StorageWorker(config, dict.fromkeys(partitions, RECEIPT_KEY))


def metrics_text(worker: StorageWorker) -> str:
    registry = worker_registry(worker)
    return generate_latest(registry).decode()


def partition_status(worker: StorageWorker, partition: int) -> dict[str, Any]:
    return worker.status()["partitions"][str(partition)]


def test_status_and_metrics_read_during_a_rebuild_see_the_complete_old_state_and_never_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a standing-by replica of a log of many queues
    log_of_many_queues(replica_dir(tmp_path, 0))

    async def scenario() -> None:
        worker = standing_by(tmp_path, (0,))
        await worker.start(static_roles=False)
        try:
            replica = worker.replicas[0]
            assert partition_status(worker, 0)["queues"] == QUEUES
            slow = PausedRecovery()
            monkeypatch.setattr(replica_module, "recover", slow)
            # when its state is rebuilt (a follower's cut that keeps the whole log) and the replay is halfway
            assert replica.log is not None
            rebuild = asyncio.create_task(replica.truncate(replica.log.end_offset))
            try:
                assert await asyncio.to_thread(slow.halfway.wait, 30)
                # then status and metrics read on the loop see the whole old state, not half a new one
                assert partition_status(worker, 0)["queues"] == QUEUES
                assert f'ferrymq_worker_queues{{partition="0"}} {float(QUEUES)}' in metrics_text(worker)
            finally:
                slow.go()
            await rebuild
            # and once complete, the new state is the one shown
            assert replica.engine is not None and partition_status(worker, 0)["queues"] == QUEUES
        finally:
            await worker.close()

    asyncio.run(scenario())


def test_status_and_metrics_polled_throughout_slow_rebuilds_never_raise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a standing-by replica of a log of many queues, whose replay is slowed down
    log_of_many_queues(replica_dir(tmp_path, 0))

    def slow_recover(directory: Path, apply: Callable[[Record], None], **options: Any) -> RecoveredLog:
        def paced(record: Record) -> None:
            apply(record)
            threading.Event().wait(0.0005)

        return recover(directory, paced, **options)

    async def scenario() -> None:
        worker = standing_by(tmp_path, (0,))
        await worker.start(static_roles=False)
        monkeypatch.setattr(replica_module, "recover", slow_recover)
        failures: list[BaseException] = []
        reads = 0
        try:
            replica = worker.replicas[0]
            # when it is rebuilt three times while status and metrics are read as fast as the loop allows
            for _ in range(3):
                assert replica.log is not None
                rebuild = asyncio.create_task(replica.truncate(replica.log.end_offset))
                while not rebuild.done():
                    try:
                        worker.status()
                        metrics_text(worker)
                    except Exception as exc:  # any failure is the finding
                        failures.append(exc)
                    reads += 1
                    await asyncio.sleep(0)
                await rebuild
        finally:
            await worker.close()
        # then none of the reads failed
        assert reads > 10
        assert failures == []

    asyncio.run(scenario())


def test_host_replays_an_existing_log_off_the_event_loop_and_publishes_the_replica_once_open(
    tmp_path: Path, paused: PausedRecovery
) -> None:
    # given a running worker, and a log already in the directory of a partition it does not hold yet
    log_of_many_queues(replica_dir(tmp_path, 5))

    async def scenario() -> None:
        worker = standing_by(tmp_path, (0,))
        await worker.start(static_roles=False)
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.005)

        ticking = asyncio.create_task(ticker())
        try:
            # when it is added to the partition's replica set and hosts it
            hosting = asyncio.create_task(worker.host(5, RECEIPT_KEY))
            assert await asyncio.to_thread(paused.halfway.wait, 30)
            # then, while the replay is halfway, the loop goes on (another task keeps ticking, PING answers)
            # and the half-open replica is not served yet
            before = ticks
            while ticks < before + 3:
                await asyncio.sleep(0.005)
            assert "5" not in worker.status()["partitions"]
            assert 5 not in worker.replicas
            # and a second host() of the same partition waits for the same replica
            again = asyncio.create_task(worker.host(5, RECEIPT_KEY))
            paused.go()
            replica = await hosting
            assert await again is replica
            assert worker.replicas[5] is replica
            assert partition_status(worker, 5)["queues"] == QUEUES
        finally:
            ticking.cancel()
            await worker.close()

    asyncio.run(scenario())


def test_a_host_whose_replay_fails_leaves_the_directory_unlocked_for_the_next_try(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a running worker and a log in the directory of a partition it is to host
    log_of_many_queues(replica_dir(tmp_path, 5))
    calls = 0

    def failing_once(directory: Path, apply: Callable[[Record], None], **options: Any) -> RecoveredLog:
        nonlocal calls
        if directory.name == "p5":
            calls += 1
            if calls == 1:
                raise OSError("disk read failed")
        return recover(directory, apply, **options)

    monkeypatch.setattr(replica_module, "recover", failing_once)

    async def scenario() -> None:
        worker = standing_by(tmp_path, (0,))
        await worker.start(static_roles=False)
        try:
            # when the first replay fails, then host() fails and serves nothing
            with pytest.raises(OSError, match="disk read failed"):
                await worker.host(5, RECEIPT_KEY)
            assert 5 not in worker.replicas
            # and the next try opens it (the failed one did not keep the directory locked)
            replica = await worker.host(5, RECEIPT_KEY)
            assert partition_status(worker, 5)["queues"] == QUEUES and worker.replicas[5] is replica
        finally:
            await worker.close()

    asyncio.run(scenario())
