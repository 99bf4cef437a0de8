"""The follower side of one partition's replication stream: a loop that pulls the leader's records, appends
them to this replica's log and applies them to its state.

Each FETCH asks from this log's end and carries how far its fsync has come, which the leader counts as the
acknowledgement.  Fetches are pipelined: the next one goes as soon as a batch is appended, without waiting
for that batch's fsync; if the leader has nothing new meanwhile, the loop waits for its own fsync and then
reports it with a fetch that waits at the leader for new records.  A restarted follower simply fetches from
its recovered log's end.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ferrymq.errors import ServiceUnavailable
from ferrymq.rpc.client import WorkerClient
from storage_workers.engine.records import Record
from storage_workers.log import records as codec
from storage_workers.log.writer import LogWriter
from storage_workers.replication.roles import FollowerRole

log = logging.getLogger(__name__)


class Follower:
    def __init__(
        self, partition: int, me: str, role: FollowerRole, wal: LogWriter, apply: Callable[[Record], None]
    ) -> None:
        self.partition = partition
        self.me = me
        self.role = role
        self.log = wal
        self._apply = apply
        self.client = WorkerClient(*role.leader, connect_timeout=max(role.retry_seconds, 1.0))
        self.fetches = 0
        """FETCH requests answered so far."""
        self.failure: BaseException | None = None
        """What stopped the loop for good (a frame this log cannot take), if anything."""
        self._running = asyncio.Event()
        self._running.set()

    def pause(self) -> None:
        """Send no further FETCH until :meth:`resume` (one already sent is still appended when answered)."""
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    async def run(self) -> None:
        """Fetch, append and apply until cancelled, or until a frame cannot be appended."""
        wal = self.log
        while True:
            await self._running.wait()
            end = wal.end_offset
            syncing = wal.durable_offset < end
            try:
                frames = await self.client.fetch(
                    self.partition,
                    self.me,
                    self.role.epoch,
                    end,
                    wal.durable_offset,
                    max_bytes=self.role.max_bytes,
                    wait_ms=0 if syncing else self.role.wait_ms,
                )
            except ServiceUnavailable as exc:
                log.warning("partition %d: fetch from %s:%d failed: %s", self.partition, *self.role.leader, exc)
                await asyncio.sleep(self.role.retry_seconds)
                continue
            self.fetches += 1
            if not frames and syncing:
                # Nothing new while this log syncs: report the sync once it is done.
                await wal.wait_offset_durable(end - 1)
                continue
            try:
                for epoch, offset, payload in frames:
                    wal.append_replicated(epoch, offset, payload)
                    self._apply(codec.decode(payload))
            except Exception as exc:
                log.critical("partition %d: replication stopped: %s", self.partition, exc)
                self.failure = exc
                return

    async def close(self) -> None:
        await self.client.close()
