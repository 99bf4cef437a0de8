"""The leader side of one partition's replication stream: appending, the tail buffer, FETCH and the commit
tracker that gates replies.

FETCH (``Op.FETCH``, shaped in :mod:`ferrymq.rpc.shapes`) request: ``[partition, replica, epoch, from_offset,
durable_offset, max_bytes, wait_ms]``, the follower's worker id, the epoch it follows, the offset after the
last record it appended and the one after the last it made durable; response: ``[[epoch, offset, payload],
...]`` (RECORD_FRAMEs), consecutive records from ``from_offset`` on, the payload being the record's bytes
exactly as the leader's log stores them.  A fetch older than the leader's epoch is refused with StaleEpoch, a
newer one with NotLeader (this leader is stale), both before anything is recorded.  An empty answer means
nothing came within ``wait_ms``.

Records in the tail buffer are answered at once, durable on the leader or not; older ones come from the log
(``LogWriter.read_from``, in a thread) once durable.  A FETCH that finds nothing waits, woken by the next
append or answered empty when its time is up.  The FETCH reply itself never waits for the high watermark.

A waiting FETCH is parked as a plain record (:class:`_Parked`), not a task: at low load every message parks
one fetch per follower, and a task, a future and a timer for each cost more than the message itself.  The
appends of one event-loop turn wake the parked fetches once, after the turn, so that one answer carries them
all; one timer, armed for the earliest deadline, answers the expired ones empty.  A parked fetch is held by
its connection, which cancels it (drops it from here) when it closes.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ferrymq.errors import NotLeader, SnapshotNeeded, StaleEpoch
from ferrymq.replication_rules import acks_satisfied, must_shrink
from ferrymq.rpc import shapes
from ferrymq.rpc.codec import pack
from ferrymq.rpc.framing import STATUS_OK, encode_frame
from ferrymq.storage.engine.records import Record
from ferrymq.storage.log import records as codec
from ferrymq.storage.log.reading import OffsetCompacted
from ferrymq.storage.log.writer import LogWriter
from ferrymq.storage.replication.commit import CommitTracker
from ferrymq.storage.replication.roles import LeaderRole
from ferrymq.storage.replication.tail import Frame, TailBuffer

if TYPE_CHECKING:
    from ferrymq.storage.server.connection import Connection

log = logging.getLogger(__name__)

_DEADLINE_SLACK = 0.001


def _wall_ms() -> int:
    return int(time.time() * 1000)


class LeaderStream:
    def __init__(
        self, partition: int, me: str, role: LeaderRole, log: LogWriter, *, now_ms: Callable[[], int] = _wall_ms
    ) -> None:
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
        self._parked: dict[_Parked, None] = {}
        """Fetches waiting for the next append, in arrival order."""
        self._waking = False
        self._sweep: asyncio.TimerHandle | None = None
        self._sweep_at = 0.0
        """When the timer answering expired parked fetches fires (loop time), while it is armed."""
        self._now_ms = now_ms
        self.term_start = log.end_offset
        """The offset of this term's first record: a follower joins the in-sync set only once it has it."""
        started = now_ms()
        self.caught_up_at: dict[str, int] = {r: started for r in self.tracker.isr if r != me}
        """When each follower was last caught up (ms, see ``_note_fetch``); the in-sync ones count as caught up
        at the start of the term, so none is dropped before it had a chance to fetch."""
        self._last_fetch: dict[str, tuple[int, int]] = {}
        self.lost: set[str] = set()
        """In-sync followers that lost their copy (see ``_lost_copy``), until the set they leave is taken."""
        """Per follower, the leader's log end and the time (ms) at its previous fetch."""
        self.closed: BaseException | None = None

    # --- appending ------------------------------------------------------------------------------------

    def append(self, record: Record) -> int:
        """Append an engine record under the leader's epoch (the engine's ``on_record``); returns its offset."""
        self._check_open()
        tail = self.tail
        if tail is None:
            offset = self.log.append(record, self.epoch)
        else:
            payload = codec.encode(record)
            offset = self.log.append_encoded(self.epoch, self.log.end_offset, payload)
            tail.add(self.epoch, offset, payload)
        if self._parked and not self._waking:
            self._waking = True
            asyncio.get_running_loop().call_soon(self._wake)
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
        replica, epoch, from_offset, durable_offset, max_bytes, wait_ms = shapes.FETCH.read(args)
        if not isinstance(replica, str) or not all(
            type(n) is int for n in (epoch, from_offset, durable_offset, max_bytes, wait_ms)
        ):
            raise TypeError("a fetch is a replica id and five integers")
        self.check_follower(replica, epoch)
        if durable_offset < self.tracker.acked.get(replica, 0) or (durable_offset == 0 and replica in self.tracker.isr):
            self._lost_copy(replica, durable_offset)
        if 1 <= from_offset < self.log.start_offset:
            raise SnapshotNeeded(
                f"Partition {self.partition}'s log starts at offset {self.log.start_offset}, after {from_offset}."
            )
        if not 1 <= from_offset <= self.log.end_offset or durable_offset > from_offset:
            raise ValueError(
                f"fetch from offset {from_offset} (durable {durable_offset}); the leader's log ends at "
                f"{self.log.end_offset}"
            )
        self.tracker.ack(replica, durable_offset)
        self._note_fetch(replica, from_offset)
        max_bytes = max(max_bytes, 1)
        if from_offset == self.log.end_offset:
            if wait_ms <= 0:
                _answer(conn, request_id, [])
            else:
                self._park(_Parked(self, conn, request_id, from_offset, max_bytes, fail), wait_ms / 1000)
            return None
        return self._answer_from(conn, request_id, from_offset, max_bytes, fail)

    def _answer_from(
        self,
        conn: Connection,
        request_id: int,
        from_offset: int,
        max_bytes: int,
        fail: Callable[[Connection, int, BaseException], None],
    ) -> asyncio.Task[None] | None:
        """Answer a fetch from before the log's end: from the tail at once, or, older than the tail, from the log
        in a task (returned, for the connection to own)."""
        tail = self.tail
        if tail is not None and tail.covers(from_offset):
            _answer(conn, request_id, tail.read(from_offset, max_bytes))
            return None
        return asyncio.get_running_loop().create_task(
            self._answer_later(conn, request_id, from_offset, max_bytes, fail)
        )

    def _lost_copy(self, replica: str, durable_offset: int) -> None:
        """The follower has less than it acknowledged, or says it lost its copy (durable offset 0, which no
        log has otherwise: its first fetch after its worker set a damaged copy aside, for a term that began
        before it left the item's in-sync set).  What it acknowledged no longer counts, and it leaves this set
        at the next check, whatever the acks mode, so that it joins again once caught up."""
        log.warning(
            "partition %d: %s reports offset %d durable after acknowledging %d: it lost its copy and catches up",
            self.partition, replica, durable_offset, self.tracker.acked.get(replica, 0),
        )
        self.tracker.acked[replica] = durable_offset
        self.caught_up_at.pop(replica, None)
        self._last_fetch.pop(replica, None)
        self.lost.add(replica)

    def _note_fetch(self, replica: str, from_offset: int) -> None:
        """Kafka's rule: a follower is caught up when it fetches from the leader's log end, or from at least
        where that end was at its previous fetch.  A pipelined follower under steady load is always one
        batch behind the end of the moment, but never behind the end its previous fetch saw."""
        now, end = self._now_ms(), self.log.end_offset
        previous = self._last_fetch.get(replica)
        if from_offset >= end:
            self.caught_up_at[replica] = now
        elif previous is not None and from_offset >= previous[0]:
            self.caught_up_at[replica] = max(self.caught_up_at.get(replica, previous[1]), previous[1])
        self._last_fetch[replica] = (end, now)

    # --- parked fetches ---------------------------------------------------------------------------------

    def _park(self, parked: _Parked, wait: float) -> None:
        loop = asyncio.get_running_loop()
        parked.deadline = deadline = loop.time() + wait
        self._parked[parked] = None
        parked.conn.hold(parked)
        if self._sweep is None or deadline < self._sweep_at:
            if self._sweep is not None:
                self._sweep.cancel()
            self._sweep_at = deadline
            self._sweep = loop.call_at(deadline, self._expire)

    def _unpark(self, parked: _Parked) -> None:
        """Forget ``parked`` (its connection closed): nothing of it is left behind."""
        self._parked.pop(parked, None)
        parked.conn.release(parked)
        if not self._parked and self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None

    def _wake(self) -> None:
        """After the turn that appended: answer every parked fetch with what it asked for."""
        self._waking = False
        if not self._parked:
            return
        parked, self._parked = self._parked, {}
        for fetch in parked:
            fetch.conn.release(fetch)
            self._answer_parked(fetch)
            # Written now, not at the turn's end: the log may sync this turn's records on the loop in the next
            # callback (its sync place), and the followers' syncs should run alongside it, not after.
            fetch.conn.flush()

    def _answer_parked(self, fetch: _Parked) -> None:
        from_offset = fetch.from_offset
        if from_offset >= self.log.end_offset:
            _answer(fetch.conn, fetch.request_id, [])
            return
        # Past the tail already when more was appended in one turn than it holds: from the log, as a fetch from
        # behind.
        task = self._answer_from(fetch.conn, fetch.request_id, from_offset, fetch.max_bytes, fetch.fail)
        if task is not None:
            fetch.conn.start(task)

    def _expire(self) -> None:
        """The earliest deadline came: answer the fetches whose time is up, and wait for the next deadline."""
        self._sweep = None
        if not self._parked:
            return
        loop = asyncio.get_running_loop()
        # A timer may fire a little before its deadline (the loop's clock counts milliseconds): counted as due.
        now = loop.time() + _DEADLINE_SLACK
        due = [fetch for fetch in self._parked if fetch.deadline <= now]
        for fetch in due:
            del self._parked[fetch]
            fetch.conn.release(fetch)
            self._answer_parked(fetch)
        if self._parked:
            self._sweep_at = min(fetch.deadline for fetch in self._parked)
            self._sweep = loop.call_at(self._sweep_at, self._expire)

    async def _answer_later(
        self,
        conn: Connection,
        request_id: int,
        from_offset: int,
        max_bytes: int,
        fail: Callable[[Connection, int, BaseException], None],
    ) -> None:
        try:
            frames = await self._frames(from_offset, max_bytes)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            fail(conn, request_id, exc)
            return
        _answer(conn, request_id, frames)

    async def _frames(self, from_offset: int, max_bytes: int) -> list[Frame]:
        """The records from ``from_offset`` on, older than the tail buffer: from the log, once it is durable up
        to where the tail takes over."""
        tail = self.tail
        if tail is not None and tail.covers(from_offset):
            return tail.read(from_offset, max_bytes)
        upto = tail.first_offset if tail is not None and tail.first_offset is not None else self.log.end_offset
        await self.log.wait_offset_durable(upto - 1)
        return await asyncio.to_thread(self._read_log, from_offset, upto, max_bytes)

    def _read_log(self, from_offset: int, upto: int, max_bytes: int) -> list[Frame]:
        out: list[Frame] = []
        size = 0
        try:
            with self.log.read_from(from_offset) as reader:
                for epoch, offset, payload in itertools.takewhile(lambda frame: frame[1] < upto, reader):
                    if out and size + len(payload) > max_bytes:
                        break
                    out.append((epoch, offset, bytes(payload)))
                    size += len(payload)
        except OffsetCompacted:
            raise SnapshotNeeded(f"Partition {self.partition}'s log was compacted past offset {from_offset}.") from None
        return out

    @property
    def waiting_fetches(self) -> int:
        """Fetches parked until the next append or their deadline."""
        return len(self._parked)

    def _check_epoch(self, epoch: int) -> None:
        if epoch < self.epoch:
            raise StaleEpoch(f"Partition {self.partition} is in epoch {self.epoch}, not {epoch}.")
        if epoch > self.epoch:
            raise NotLeader(f"Storage worker {self.me} leads partition {self.partition} in epoch {self.epoch} only.")

    def check_follower(self, replica: str, epoch: int) -> None:
        """Refuse a follower's request under another epoch, or from a worker outside the replica set (maybe
        added a moment ago: the follower asks again once this leader knows)."""
        self._check_epoch(epoch)
        self._check_open()
        if replica not in self.tracker.replicas:
            raise StaleEpoch(f"{replica} is not in partition {self.partition}'s replica set as {self.me} knows it.")

    def _check_open(self) -> None:
        if self.closed is not None:
            raise NotLeader(f"Storage worker {self.me} no longer leads partition {self.partition}.")

    # --- OFFSET_FOR_EPOCH -----------------------------------------------------------------------------

    def offset_for_epoch(self, args: Any) -> list[int] | None:
        """A rejoining follower's question ``[its epoch, asked epoch]``: ``[epoch, end offset]`` of the
        latest epoch of this log not above the one asked about, None when this log starts above it."""
        epoch, asked = shapes.OFFSET_FOR_EPOCH.read(args)
        if type(epoch) is not int or type(asked) is not int:
            raise TypeError("an epoch question is two integers")
        self._check_epoch(epoch)
        self._check_open()
        answer = self.log.end_offset_for_epoch(asked)
        return None if answer is None else shapes.EPOCH_END.build(answer.epoch, answer.end_offset)

    # --- the in-sync set ----------------------------------------------------------------------------------

    def lagging(self, max_lag_ms: int) -> frozenset[str]:
        """The in-sync followers to drop, as long as the rest still satisfy the acknowledgement mode; when
        they would not, none is dropped: nothing could be acknowledged either way, and a follower kept in
        the set can still be elected."""
        tracker = self.tracker
        behind = must_shrink(
            self.me, tracker.isr, tracker.acked, self.log.end_offset, max_lag_ms, self._now_ms(), self.caught_up_at
        )
        lost = self.lost & tracker.isr
        if not behind or not acks_satisfied(tracker.acks, tracker.replicas, tracker.isr - behind):
            return lost
        return behind | lost

    def caught_up(self) -> frozenset[str]:
        """Followers outside the in-sync set that hold every committed record and this term's start."""
        tracker = self.tracker
        needed = max(tracker.high_watermark, self.term_start)
        return frozenset(
            replica
            for replica, acked in tracker.acked.items()
            if replica not in tracker.isr and acked >= needed
        )

    def set_isr(self, isr: frozenset[str]) -> None:
        """The coordination item took a new in-sync set; a follower (re)joining counts as caught up now."""
        for replica in isr - self.tracker.isr:
            self.caught_up_at[replica] = self._now_ms()
        self.lost &= isr
        self.tracker.set_isr(isr)

    def set_replicas(self, replicas: tuple[str, ...]) -> None:
        self.tracker.set_replicas(replicas)
        self.caught_up_at = {r: t for r, t in self.caught_up_at.items() if r in replicas}
        self._last_fetch = {r: f for r, f in self._last_fetch.items() if r in replicas}

    # --- the end of the term ----------------------------------------------------------------------------

    def close(self, error: BaseException) -> list[Any]:
        """End the term: parked fetches are answered with ``error``, nothing more is appended, and the
        replies still waiting for the high watermark are returned (their outcome is the next leader's)."""
        self.closed = error
        parked, self._parked = self._parked, {}
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for fetch in parked:
            fetch.conn.release(fetch)
            fetch.fail(fetch.conn, fetch.request_id, error)
        return self.tracker.abandon()


class _Parked:
    """A FETCH from the leader's log end, waiting for the next append or its deadline (loop time)."""

    __slots__ = ("conn", "deadline", "fail", "from_offset", "max_bytes", "request_id", "stream")

    def __init__(
        self,
        stream: LeaderStream,
        conn: Connection,
        request_id: int,
        from_offset: int,
        max_bytes: int,
        fail: Callable[[Connection, int, BaseException], None],
    ) -> None:
        self.stream = stream
        self.conn = conn
        self.request_id = request_id
        self.from_offset = from_offset
        self.max_bytes = max_bytes
        self.fail = fail
        self.deadline = 0.0

    def cancel(self) -> None:
        """The connection closed: no answer is due."""
        self.stream._unpark(self)


def _answer(conn: Connection, request_id: int, frames: list[Frame]) -> None:
    conn.write(encode_frame(request_id, STATUS_OK, pack(frames)))
