"""The leader side of one partition's replication stream: appending, the tail buffer, FETCH and the commit
tracker that gates replies.

FETCH (``Op.FETCH``) request: ``[partition, replica, epoch, from_offset, durable_offset, max_bytes,
wait_ms]``, the follower's worker id, the epoch it follows, the offset after the last record it appended and
the one after the last it made durable; response: ``[[epoch, offset, payload], ...]``, consecutive records
from ``from_offset`` on, the payload being the record's bytes exactly as the leader's log stores them.  A
fetch older than the leader's epoch is refused with StaleEpoch, a newer one with NotLeader (this leader is
stale), both before anything is recorded.  An empty answer means nothing came within ``wait_ms``.

Records in the tail buffer are answered at once, durable on the leader or not; older ones come from the log
(``LogWriter.read_from``, in a thread) once durable.  A FETCH that finds nothing waits, woken by the next
append or answered empty when its time is up.  The FETCH reply itself never waits for the high watermark.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ferrymq.errors import NotLeader, StaleEpoch
from ferrymq.rpc.codec import pack
from ferrymq.rpc.framing import STATUS_OK, encode_frame
from storage_workers.engine.records import Record
from storage_workers.log import records as codec
from storage_workers.log.writer import LogWriter
from storage_workers.replication.commit import CommitTracker
from storage_workers.replication.roles import LeaderRole
from storage_workers.replication.tail import Frame, TailBuffer

if TYPE_CHECKING:
    from storage_workers.server.connection import Connection


class LeaderStream:
    def __init__(self, partition: int, me: str, role: LeaderRole, log: LogWriter) -> None:
        if log.epoch > role.epoch:
            raise ValueError(
                f"partition {partition}: the log holds records of epoch {log.epoch}, above the configured {role.epoch}"
            )
        self.partition = partition
        self.me = me
        self.epoch = role.epoch
        self.log = log
        self.tracker = CommitTracker(me, log, acks=role.acks, replicas=role.replicas, isr=role.isr)
        self.tail: TailBuffer | None = TailBuffer(role.tail_bytes) if len(self.tracker.replicas) > 1 else None
        """None without followers: appends then go to the log exactly as in the single-copy mode."""
        self._fetches: set[asyncio.Future[None]] = set()

    # --- appending ------------------------------------------------------------------------------------

    def append(self, record: Record) -> int:
        """Append an engine record under the leader's epoch (the engine's ``on_record``); returns its offset."""
        tail = self.tail
        if tail is None:
            return self.log.append(record, self.epoch)
        payload = codec.encode(record)
        offset = self.log.append_replicated(self.epoch, self.log.end_offset, payload)
        tail.add(self.epoch, offset, payload)
        if self._fetches:
            fetches, self._fetches = self._fetches, set()
            for fut in fetches:
                if not fut.done():
                    fut.set_result(None)
        return offset

    def committed(self) -> None:
        """The leader's log became durable further (its writer's ``on_commit``)."""
        self.tracker.advance()

    def when_committed(self, offset: int, callback: Callable[[Any], None], arg: Any) -> None:
        self.tracker.when_committed(offset, callback, arg)

    # --- FETCH ----------------------------------------------------------------------------------------

    def fetch(
        self, conn: Connection, request_id: int, args: Any, fail: Callable[[Connection, int, BaseException], None]
    ) -> asyncio.Task[None] | None:
        """Handle a FETCH: record the acknowledgement and answer, now or from a task (returned, for the
        connection to own)."""
        replica, epoch, from_offset, durable_offset, max_bytes, wait_ms = args
        if not isinstance(replica, str) or not all(
            type(n) is int for n in (epoch, from_offset, durable_offset, max_bytes, wait_ms)
        ):
            raise TypeError("a fetch is a replica id and five integers")
        if epoch < self.epoch:
            raise StaleEpoch(f"Partition {self.partition} is in epoch {self.epoch}, not {epoch}.")
        if epoch > self.epoch:
            raise NotLeader(f"Storage worker {self.me} leads partition {self.partition} in epoch {self.epoch} only.")
        if not 1 <= from_offset <= self.log.end_offset or durable_offset > from_offset:
            raise ValueError(
                f"fetch from offset {from_offset} (durable {durable_offset}); the leader's log ends at "
                f"{self.log.end_offset}"
            )
        self.tracker.ack(replica, durable_offset)
        tail = self.tail
        if tail is not None and from_offset < self.log.end_offset and tail.covers(from_offset):
            _answer(conn, request_id, tail.read(from_offset, max(max_bytes, 1)))
            return None
        return asyncio.get_running_loop().create_task(
            self._answer_later(conn, request_id, from_offset, max(max_bytes, 1), wait_ms, fail)
        )

    async def _answer_later(
        self,
        conn: Connection,
        request_id: int,
        from_offset: int,
        max_bytes: int,
        wait_ms: int,
        fail: Callable[[Connection, int, BaseException], None],
    ) -> None:
        try:
            frames = await self._frames(from_offset, max_bytes, wait_ms / 1000)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            fail(conn, request_id, exc)
            return
        _answer(conn, request_id, frames)

    async def _frames(self, from_offset: int, max_bytes: int, wait: float) -> list[Frame]:
        loop = asyncio.get_running_loop()
        if from_offset == self.log.end_offset and wait > 0:
            fut: asyncio.Future[None] = loop.create_future()
            self._fetches.add(fut)
            timer = loop.call_later(wait, _resolve, fut)
            try:
                await fut
            finally:
                timer.cancel()
                self._fetches.discard(fut)
        if from_offset == self.log.end_offset:
            return []
        tail = self.tail
        if tail is not None and tail.covers(from_offset):
            return tail.read(from_offset, max_bytes)
        # Older than the tail: from the log, once it is durable up to where the tail takes over.
        upto = tail.first_offset if tail is not None and tail.first_offset is not None else self.log.end_offset
        await self.log.wait_offset_durable(upto - 1)
        return await asyncio.to_thread(self._read_log, from_offset, upto, max_bytes)

    def _read_log(self, from_offset: int, upto: int, max_bytes: int) -> list[Frame]:
        out: list[Frame] = []
        size = 0
        with self.log.read_from(from_offset) as reader:
            for epoch, offset, payload in itertools.takewhile(lambda frame: frame[1] < upto, reader):
                if out and size + len(payload) > max_bytes:
                    break
                out.append((epoch, offset, bytes(payload)))
                size += len(payload)
        return out

    @property
    def waiting_fetches(self) -> int:
        return len(self._fetches)


def _answer(conn: Connection, request_id: int, frames: list[Frame]) -> None:
    conn.write(encode_frame(request_id, STATUS_OK, pack(frames)))


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
