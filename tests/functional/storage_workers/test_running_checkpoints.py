"""Checkpoints taken while a partition serves (``ferrymq.storage.server.running_checkpoint``): a forked child
writes the state as of an instant, the worker puts it in place, and a start after a crash loads it and replays
only the log after it.  Records not yet durable at that instant are listed in it and placed as recovery walks
past them; a log that lost them in the crash, a log compacted while the child wrote, or a child that failed,
leave no checkpoint that could give a state the log does not."""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from ferrymq.rpc.client import WorkerClient
from ferrymq.storage.log import checkpoint_chain
from ferrymq.storage.log.checkpoint import read_checkpoint
from ferrymq.storage.server import StorageWorker, WorkerConfig, huge_pages, running_checkpoint
from ferrymq.storage.server import replica as replica_module
from ferrymq.storage.server.metrics import worker_registry
from ferrymq.storage.server.replica import PartitionReplica
from tests.functional.storage_workers.test_checkpoints import (
    _no_checkpoint,
    counting_recover,
    everything,
    full_replay_of,
    workload,
)
from tests.functional.storage_workers.test_replication import P, node
from tests.functional.storage_workers.test_server_fifo import message, receive
from tests.functional.storage_workers.worker_calls import RETENTION, eventually
from tests.support.engine_requests import RECEIPT_KEY

EVERY_16_KIB = {"checkpoint_bytes": 16 * 1024}


@pytest.mark.parametrize("chained", [False, True], ids=["bases", "base and deltas"])
def test_a_start_after_a_crash_loads_the_checkpoint_taken_while_serving_and_replays_only_what_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chained: bool
) -> None:
    applied: list[Any] = []
    if chained:
        # chunks of 256 bytes, arrays of 64 or more apart from the pickle, and deltas whatever their size: the
        # checkpoints of this small workload are a base and deltas, as a large partition's are
        monkeypatch.setattr(checkpoint_chain, "CHUNK", 256)
        monkeypatch.setattr(checkpoint_chain, "OUT_OF_BAND_MIN", 64)
        monkeypatch.setattr(checkpoint_chain, "DELTAS_UP_TO", 10**9)

    async def scenario() -> None:
        # given a worker that never stops cleanly, taking checkpoints every 16 KiB of log
        monkeypatch.setattr(PartitionReplica, "_write_checkpoint", _no_checkpoint)
        async with node(tmp_path, "w", **EVERY_16_KIB) as (replica, client, _):
            for round_ in range(30):
                await workload(client, round_)

            async def taken() -> bool:
                return replica.checkpoints.taken >= 2

            await eventually(taken)
            assert replica.log is not None
            end = replica.log.end_offset - 1
        found = read_checkpoint(tmp_path / "p0")
        assert found is not None and 1 < found.offset <= end
        assert (found.deltas > 0) == chained
        # when it starts again: the checkpoint, then only the records after it
        monkeypatch.setattr(replica_module, "recover", counting_recover(applied))
        async with node(tmp_path, "w", **EVERY_16_KIB) as (replica, client, _):
            restored = everything(replica)
            assert len(applied) == end - found.offset
            assert not list((tmp_path / "p0").glob(f"{running_checkpoint.RUNNING_TMP}*"))
        # then it holds what a replay of the whole log gives
        assert restored == await full_replay_of(tmp_path)

    asyncio.run(scenario())


def test_a_drain_s_small_records_are_checkpointed_by_their_count_and_a_crash_replays_only_those_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    applied: list[Any] = []
    deleted: set[str] = set()
    # a byte interval no drain reaches here, and a checkpoint every 40 records (not stretched by what the last
    # cost: that is the unit tests')
    every_40_records = {"checkpoint_bytes": 1 << 30, "checkpoint_records": 40}
    monkeypatch.setattr(running_checkpoint, "REPLAY_SECONDS_PER_RECORD", 1.0)

    async def scenario() -> None:
        # given a worker that never stops cleanly, holding a backlog drained a message at a time: records of
        # some tens of bytes each
        monkeypatch.setattr(PartitionReplica, "_write_checkpoint", _no_checkpoint)
        async with node(tmp_path, "w", **every_40_records) as (replica, client, _):
            await client.send(P, "q", [message(f"m{i}") for i in range(300)], retention_seconds=RETENTION)
            assert replica.log is not None
            drained_from = replica.log.end

            async def taken() -> bool:
                # A checkpoint is looked for after each record, one at a time: the drain goes on meanwhile.
                if replica.checkpoints.taken < 2:
                    got = await receive(client, "q", max_messages=1)
                    await client.delete(P, "q", [got[0]["receipt"]])
                    deleted.add(got[0]["body"])
                return replica.checkpoints.taken >= 2

            await eventually(taken)
            assert replica.log.end - drained_from < 16 * 1024  # no byte interval was reached
            end = replica.log.end_offset - 1
        found = read_checkpoint(tmp_path / "p0")
        assert found is not None and 40 < found.offset <= end
        # when it starts again: the checkpoint, then only the records after it
        monkeypatch.setattr(replica_module, "recover", counting_recover(applied))
        async with node(tmp_path, "w", **every_40_records) as (replica, client, _):
            restored = everything(replica)
            assert len(applied) == end - found.offset
        # then it holds what a replay of the whole log gives: the messages not deleted
        assert restored == await full_replay_of(tmp_path)
        async with node(tmp_path, "w") as (replica, client, _):
            left: list[str] = []
            while got := await receive(client, "q", max_messages=10):
                left += [m["body"] for m in got]
        assert sorted(left) == sorted({f"m{i}" for i in range(300)} - deleted)

    asyncio.run(scenario())


SYNCS_IN_THREAD = {"sync_on_loop_ms": 0}
"""For a node whose syncs are held back: held on the event loop, they would hold the test too."""


async def _checkpoint_with_records_in_flight(
    replica: PartitionReplica, client: Any, tag: str, monkeypatch: pytest.MonkeyPatch
) -> list[int]:
    """Send while the log's syncs are held back, take a checkpoint while those records are appended but not yet
    durable, let the syncs go and wait until the checkpoint is in place; returns the offsets it lists as not
    yet durable."""
    assert replica.log is not None
    wal = replica.log
    gate = threading.Event()
    real = os.fdatasync

    def held(fd: int) -> None:
        gate.wait(10)
        real(fd)

    monkeypatch.setattr(os, "fdatasync", held)
    sends = [
        asyncio.create_task(client.send(P, "q", [message(f"{tag}-{i}-" + "y" * 300)], retention_seconds=RETENTION))
        for i in range(5)
    ]

    async def in_flight() -> bool:
        return wal.end_offset > wal.durable_offset

    try:
        await eventually(in_flight)
        checkpoint = replica._state_as_logged(serving=True)
        assert checkpoint is not None and checkpoint.unplaced
        taken = replica.checkpoints.taken
        replica.checkpoints.take(wal, checkpoint)
    finally:
        gate.set()
    await asyncio.gather(*sends)
    monkeypatch.setattr(os, "fdatasync", real)

    async def put_in_place() -> bool:
        return replica.checkpoints.taken > taken

    await eventually(put_in_place)
    return [offset for offset, _ in checkpoint.unplaced]


def test_messages_of_records_not_yet_durable_at_the_checkpoint_are_placed_when_recovery_walks_past_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        monkeypatch.setattr(PartitionReplica, "_write_checkpoint", _no_checkpoint)
        async with node(tmp_path, "w", **SYNCS_IN_THREAD) as (replica, client, _):
            await workload(client, 0)
            unplaced = await _checkpoint_with_records_in_flight(replica, client, "in-flight", monkeypatch)
        monkeypatch.undo()
        monkeypatch.setattr(PartitionReplica, "_write_checkpoint", _no_checkpoint)
        found = read_checkpoint(tmp_path / "p0")
        assert found is not None and [offset for offset, _ in found.unplaced] == unplaced
        # when it starts from that checkpoint with no body cache: every body is read back from the log
        applied: list[Any] = []
        monkeypatch.setattr(replica_module, "recover", counting_recover(applied))
        async with node(tmp_path, "w", body_cache_bytes=0) as (replica, client, _):
            assert replica.log is not None
            assert len(applied) == replica.log.end_offset - 1 - found.offset
            bodies: list[str] = []
            for _ in range(50):
                got = await receive(client, "q", max_messages=10, visibility_timeout=300)
                if not got:
                    break
                bodies += [row["body"] for row in got]
            assert sorted(b[: len("in-flight-0")] for b in bodies if b.startswith("in-flight-")) == [
                f"in-flight-{i}" for i in range(5)
            ]
            restored = everything(replica)
        assert restored == await full_replay_of(tmp_path)

    asyncio.run(scenario())


def test_a_checkpoint_holding_records_a_crash_lost_is_named_and_the_whole_log_replayed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        monkeypatch.setattr(PartitionReplica, "_write_checkpoint", _no_checkpoint)
        async with node(tmp_path, "w", **SYNCS_IN_THREAD) as (replica, client, _):
            await workload(client, 0)
            await _checkpoint_with_records_in_flight(replica, client, "lost", monkeypatch)
        found = read_checkpoint(tmp_path / "p0")
        assert found is not None and found.unplaced
        # when the crash cut the log back to what was durable when the checkpoint was taken
        index, _, durable_size = found.segments[-1]
        for later in sorted((tmp_path / "p0").glob("*.seg")):
            if int(later.stem) > index:
                later.unlink()
        os.truncate(tmp_path / "p0" / f"{index:020d}.seg", durable_size)
        with caplog.at_level(logging.ERROR):
            async with node(tmp_path, "w") as (replica, _, _):
                restored = everything(replica)
                assert replica.log is not None and replica.log.end_offset - 1 < found.offset
        # then it is named, and the state is the one the log gives
        assert any("does not fit the log" in r.getMessage() for r in caplog.records)
        assert read_checkpoint(tmp_path / "p0") is None
        assert restored == await full_replay_of(tmp_path)

    asyncio.run(scenario())


def test_a_checkpoint_written_while_the_log_was_compacted_or_by_a_child_that_failed_is_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = running_checkpoint.write_checkpoint

    def slow_write(*args: Any, **kwargs: Any) -> int:
        time.sleep(0.3)  # in the child: the parent compacts meanwhile
        return real_write(*args, **kwargs)

    def failing_write(*args: Any, **kwargs: Any) -> int:
        raise OSError("no space left on device")

    async def scenario() -> None:
        monkeypatch.setattr(PartitionReplica, "_write_checkpoint", _no_checkpoint)
        async with node(tmp_path, "w", segment_bytes=4096) as (replica, client, _):
            for round_ in range(3):
                await workload(client, round_)
            assert replica.log is not None and replica.compactor is not None
            # a child that takes its time while the log is compacted
            monkeypatch.setattr(running_checkpoint, "write_checkpoint", slow_write)
            checkpoint = replica._state_as_logged(serving=True)
            assert checkpoint is not None
            replica.checkpoints.take(replica.log, checkpoint)
            replica.compactor.min_bytes, replica.compactor.ratio = 1, 0.5
            await workload(client, 10)

            async def settled() -> bool:
                return replica.checkpoints.dropped + replica.checkpoints.taken >= 1

            await eventually(settled)
            assert replica.compactor.runs >= 1
            assert (replica.checkpoints.dropped, replica.checkpoints.taken) == (1, 0)
            # a child that fails
            monkeypatch.setattr(running_checkpoint, "write_checkpoint", failing_write)
            replica.compactor.min_bytes = 1 << 40
            checkpoint = replica._state_as_logged(serving=True)
            assert checkpoint is not None
            replica.checkpoints.take(replica.log, checkpoint)

            async def failed() -> bool:
                return replica.checkpoints.dropped >= 2

            await eventually(failed)
            assert replica.checkpoints.taken == 0
            assert not list((tmp_path / "p0").glob(f"{running_checkpoint.RUNNING_TMP}*"))
        # whatever checkpoint there is (the compaction's) gives the state a whole replay gives
        async with node(tmp_path, "w") as (replica, _, _):
            restored = everything(replica)
        assert restored == await full_replay_of(tmp_path)

    asyncio.run(scenario())


def test_checkpoints_while_serving_never_write_more_than_the_log_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    takes: list[tuple[int, int]] = []
    real_take = running_checkpoint.CheckpointFork.take

    def noting(self: running_checkpoint.CheckpointFork, wal: Any, checkpoint: Any) -> None:
        takes.append((wal.end, self.last_size))
        real_take(self, wal, checkpoint)

    monkeypatch.setattr(running_checkpoint.CheckpointFork, "take", noting)

    monkeypatch.setattr(running_checkpoint, "CPU_SHARE", 1e9)  # no wait for the last one's CPU: not this test's

    async def scenario() -> None:
        # given a worker asked for a checkpoint after every byte of log
        async with node(tmp_path, "w", checkpoint_bytes=1) as (replica, client, _):
            rounds = itertools.count()

            async def four() -> bool:
                # the workload goes on until four are taken, however slowly this machine writes them
                if replica.checkpoints.taken < 4:
                    await workload(client, next(rounds))
                return replica.checkpoints.taken >= 4

            await eventually(four, timeout=60)
        # then each one waited for at least as much log as the delta before it wrote, or after a base, as much as
        # what every delta repeats of it (here all of it: no array is big enough to be written apart)
        for (end_a, _), (end_b, size_b) in itertools.pairwise(takes):
            assert size_b > 0 and end_b - end_a >= size_b

    asyncio.run(scenario())


def test_the_interval_stretches_with_the_cpu_the_last_checkpoint_took_up_to_its_most(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    most = 48 * 1024
    takes: list[tuple[int, float, int, int]] = []
    real_take = running_checkpoint.CheckpointFork.take

    def noting(self: running_checkpoint.CheckpointFork, wal: Any, checkpoint: Any) -> None:
        takes.append((wal.end, self.last_cpu, self.last_size, self.interval()))
        real_take(self, wal, checkpoint)

    monkeypatch.setattr(running_checkpoint.CheckpointFork, "take", noting)
    # any CPU at all is worth more log than the most the interval may stretch to
    monkeypatch.setattr(running_checkpoint, "LOG_BYTES_PER_CHECKPOINT_CPU_SECOND", 10**15)

    async def scenario() -> None:
        # given a worker asked for a checkpoint after every byte of log, stretched up to 48 KiB by their cost
        async with node(tmp_path, "w", checkpoint_bytes=1, checkpoint_max_bytes=most) as (replica, client, _):
            for round_ in range(200):
                await workload(client, round_)
                if replica.checkpoints.taken >= 3:
                    break
            assert replica.checkpoints.taken >= 3
        # then the first waited for nothing, and once a child's CPU was read from its exit, each waited for 48 KiB
        # (or the last delta's size, should it be larger)
        assert takes[0][1] == 0.0
        measured = [(size, interval) for _, cpu, size, interval in takes if cpu > 0]
        assert len(measured) >= 2, takes
        assert all(interval == max(most, size) for size, interval in measured), takes
        for (end_a, _, _, interval_a), (end_b, _, _, _) in itertools.pairwise(takes):
            assert end_b - end_a >= interval_a

    asyncio.run(scenario())


def test_a_checkpoint_file_left_by_a_worker_killed_while_its_child_wrote_is_deleted_at_the_next_open(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with node(tmp_path, "w") as (_, client, _):
            await workload(client, 0)
        leftover = tmp_path / "p0" / running_checkpoint.running_tmp(424242)
        leftover.write_bytes(b"half a checkpoint")
        async with node(tmp_path, "w") as (replica, _, _):
            assert not leftover.exists()
            assert replica.engine.queues

    asyncio.run(scenario())


def test_the_worker_s_metrics_count_the_checkpoints_it_took_while_serving(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario() -> None:
        config = WorkerConfig(data_dir=tmp_path, worker_id="w", partitions=(P,), register=False, **EVERY_16_KIB)
        server = StorageWorker(config, {P: RECEIPT_KEY})
        address = await server.start()
        client = WorkerClient(*address, connect_timeout=1.0)
        try:
            replica = server.replicas[P]
            for round_ in range(30):
                await workload(client, round_)

            async def taken() -> bool:
                return replica.checkpoints.taken >= 1

            await eventually(taken)
            rendered = generate_latest(worker_registry(server)).decode()
            written = float(replica.checkpoints.taken)
            assert f'ferrymq_worker_checkpoints_total{{result="written"}} {written}' in rendered
            assert 'ferrymq_worker_checkpoints_total{result="dropped"} 0.0' in rendered
            # and each one's log line says how long its fork held the loop, the only wait the loop has for it
            said = [r.getMessage() for r in caplog.records if "written while serving" in r.getMessage()]
            assert len(said) == replica.checkpoints.taken
            assert all(re.search(r"the fork held the loop \d+\.\d ms\)$", line) for line in said), said
        finally:
            await client.close()
            await server.close()

    with caplog.at_level(logging.INFO, logger="ferrymq.storage.server.running_checkpoint"):
        asyncio.run(scenario())


def test_a_slow_fork_has_the_worker_ask_for_huge_pages_once_its_child_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not huge_pages.HugePages.for_this_process().asks:
        pytest.skip("this kernel gives no huge pages, or cannot collapse on request")
    def children() -> set[str]:
        return set(Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split())

    # this process's children from before (a test run's own helpers): the worker's are the ones added to these
    before = children()
    children_then: list[set[str]] = []
    ask = huge_pages.HugePages.after_fork

    def after_fork(pages: huge_pages.HugePages, held_seconds: float) -> None:
        # while a checkpoint's child lives, its pages are shared with the worker: collapsing them would copy them
        children_then.append(children() - before)
        ask(pages, held_seconds)

    monkeypatch.setattr(huge_pages.HugePages, "after_fork", after_fork)

    async def scenario() -> None:
        config = WorkerConfig(data_dir=tmp_path, worker_id="w", partitions=(P,), register=False, **EVERY_16_KIB)
        server = StorageWorker(config, {P: RECEIPT_KEY})
        # every fork counts as slow here (the worker's own threshold is 20 ms, about 1.2 GB of 4 KiB pages)
        server.huge_pages.slow_fork_seconds = 0.0
        address = await server.start()
        client = WorkerClient(*address, connect_timeout=1.0)
        try:
            for round_ in range(30):
                await workload(client, round_)

            async def asked() -> bool:
                return server.huge_pages.passes >= 1

            await eventually(asked)
            assert server.replicas[P].checkpoints.taken >= 1
            assert children_then and all(not pids for pids in children_then), children_then
        finally:
            await client.close()
            await server.close()
            server.huge_pages.join(10)

    asyncio.run(scenario())


EVERY_40_RECORDS = {"checkpoint_bytes": 1 << 30, "checkpoint_records": 40}
"""A byte interval these tests never reach, and a checkpoint every 40 records (``REPLAY_SECONDS_PER_RECORD``
made a second, so that what the last one cost does not stretch it)."""


async def _send_records(client: WorkerClient, tag: str, count: int) -> None:
    """``count`` records, one send of one message each, the next once the last was acknowledged."""
    for i in range(count):
        await client.send(P, "q", [message(f"{tag}-{i}")], retention_seconds=RETENTION)


def test_records_appended_while_a_checkpoint_is_written_get_the_next_once_it_ends_without_another_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(running_checkpoint, "REPLAY_SECONDS_PER_RECORD", 1.0)
    monkeypatch.setattr(running_checkpoint, "CPU_SHARE", 1e9)  # no wait for the last one's CPU: not this test's
    gate = threading.Event()
    real_wait4 = os.wait4

    def held_wait4(pid: int, options: int) -> Any:
        gate.wait(20)
        return real_wait4(pid, options)

    async def scenario() -> None:
        async with node(tmp_path, "w", **EVERY_40_RECORDS) as (replica, client, _):
            assert replica.log is not None
            # given a checkpoint forked after 40 records (the first only notes where the log stands), whose end
            # the worker is kept from seeing
            monkeypatch.setattr(os, "wait4", held_wait4)
            await _send_records(client, "a", 41)

            async def forked() -> bool:
                return replica.checkpoints._task is not None

            await eventually(forked)
            # when 40 more records are appended meanwhile, and then nothing more
            await _send_records(client, "b", 40)
            end = replica.log.end_offset - 1
            assert replica.checkpoints.taken == 0
            gate.set()

            # then once it is in place, the next is taken at once, holding every record
            async def both() -> bool:
                return replica.checkpoints.taken >= 2 and replica.checkpoints._task is None

            await eventually(both)
            assert replica.log.end_offset - 1 == end
        found = read_checkpoint(tmp_path / "p0")
        assert found is not None and found.offset == end

    try:
        asyncio.run(scenario())
    finally:
        gate.set()


def test_a_checkpoint_due_before_the_last_one_s_cpu_is_its_share_of_the_time_waits_then_is_taken_unasked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(running_checkpoint, "REPLAY_SECONDS_PER_RECORD", 1.0)

    async def scenario() -> None:
        async with node(tmp_path, "w", **EVERY_40_RECORDS) as (replica, client, _):
            assert replica.log is not None
            checkpoints = replica.checkpoints
            # given a checkpoint taken after 40 records (the first only notes where the log stands)
            await _send_records(client, "a", 41)

            async def first() -> bool:
                return checkpoints.taken >= 1 and checkpoints._task is None

            await eventually(first)
            # and the checkpoints' clock stopped at the instant it started: its CPU (said to be 50 ms, whatever
            # the kernel counted for so small a child) is never a fifth of the time
            checkpoints.last_cpu = 0.05
            now = [checkpoints._started]
            checkpoints._clock = lambda: now[0]
            # when 40 more records arrive, then nothing more
            await _send_records(client, "b", 40)
            end = replica.log.end_offset - 1
            await asyncio.sleep(0.2)
            # then none is taken while the time since is too short, though the records are enough
            assert checkpoints.taken == 1 and checkpoints._task is None and checkpoints.retry_in() > 0
            # and once the time has passed, the next is taken with no commit to ask for it, holding every record
            now[0] += checkpoints.last_cpu / running_checkpoint.CPU_SHARE

            async def second() -> bool:
                return checkpoints.taken >= 2 and checkpoints._task is None

            await eventually(second)
        found = read_checkpoint(tmp_path / "p0")
        assert found is not None and found.offset == end

    with caplog.at_level(logging.INFO, logger="ferrymq.storage.server.running_checkpoint"):
        asyncio.run(scenario())
    said = [r.getMessage() for r in caplog.records if "written while serving" in r.getMessage()]
    assert len(said) == 2 and all(re.search(r"and \d+\.\d s after this one's start", line) for line in said), said
