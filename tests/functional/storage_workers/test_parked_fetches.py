"""Fetches parked at a leader until its log grows or their time is up: answered by plain records and one timer,
not a task each; woken once per event-loop turn of appends; dropped with their connection; failed with the
term."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ferrymq.errors import NotLeader
from ferrymq.replication_rules import Acks
from ferrymq.rpc.client import WorkerClient
from ferrymq.rpc.codec import unpack
from ferrymq.rpc.framing import FrameDecoder
from ferrymq.storage.engine.records import SENT
from ferrymq.storage.log.sync_place import SyncPlace
from ferrymq.storage.log.writer import LogWriter
from ferrymq.storage.replication import LeaderStream
from ferrymq.storage.replication.roles import LeaderRole
from tests.functional.storage_workers.test_replication import P, node
from tests.functional.storage_workers.test_server_fifo import message
from tests.functional.storage_workers.worker_calls import RETENTION, eventually

ROLE = LeaderRole(replicas=("a", "b", "c"), acks=Acks.LEADER, epoch=1)
LONG_WAIT_MS = 60_000


class Conn:
    """A connection that keeps what is written to it and what it holds, as the server's does."""

    def __init__(self, events: list[str] | None = None) -> None:
        self.written: list[bytes] = []
        self.tasks: set[Any] = set()
        self.failed: list[tuple[int, BaseException]] = []
        self.events = events if events is not None else []
        """``flush`` noted each time what was written so far is sent."""

    def write(self, frame: bytes) -> None:
        self.written.append(frame)

    def flush(self) -> None:
        self.events.append("flush")

    def hold(self, waiter: Any) -> None:
        self.tasks.add(waiter)

    def release(self, waiter: Any) -> None:
        self.tasks.discard(waiter)

    def start(self, task: Any) -> None:
        self.tasks.add(task)

    def answers(self) -> dict[int, list[Any]]:
        """Each answer by request id: the frames, as ``[epoch, offset, payload]``."""
        decoder = FrameDecoder()
        return {rid: unpack(payload) for rid, _, payload in decoder.feed(b"".join(self.written))}


def fail(conn: Conn, request_id: int, exc: BaseException) -> None:
    conn.failed.append((request_id, exc))


def sent(seq: int) -> tuple[Any, ...]:
    return (SENT, "q", 1_000 + seq, seq, [(f"m{seq}", "b", {}, "md5", None, 0, {})])


def fetch_args(replica: str, from_offset: int, wait_ms: int) -> list[Any]:
    return [replica, 1, from_offset, from_offset, 1 << 20, wait_ms]


def stream_tasks() -> list[asyncio.Task[Any]]:
    """Running tasks of the leader's replication stream."""
    return [t for t in asyncio.all_tasks() if "LeaderStream" in t.get_coro().__qualname__]  # type: ignore[union-attr]


def test_a_fetch_from_the_log_end_without_a_wait_is_answered_empty_at_once(tmp_path: Path) -> None:
    async def scenario() -> None:
        # given a leader stream
        writer = LogWriter(tmp_path)
        stream = LeaderStream(P, "a", ROLE, writer)
        conn = Conn()
        # when a follower fetches from its log end, waiting for nothing
        task = stream.fetch(conn, 7, fetch_args("b", writer.end_offset, 0), fail)  # type: ignore[arg-type]
        # then it is answered empty there and then, with no task and nothing parked
        assert task is None
        assert conn.answers() == {7: []}
        assert stream.waiting_fetches == 0 and not conn.tasks
        await writer.close()

    asyncio.run(scenario())


def test_appends_of_one_turn_wake_a_parked_fetch_once_with_all_of_them(tmp_path: Path) -> None:
    async def scenario() -> None:
        # given a fetch parked at the log end, held by its connection, with no task of its own
        writer = LogWriter(tmp_path)
        stream = LeaderStream(P, "a", ROLE, writer)
        conn = Conn()
        start = writer.end_offset
        assert stream.fetch(conn, 1, fetch_args("b", start, LONG_WAIT_MS), fail) is None  # type: ignore[arg-type]
        assert stream.waiting_fetches == 1 and len(conn.tasks) == 1
        assert stream_tasks() == []
        # when three records are appended in one turn of the event loop
        for seq in range(3):
            stream.append(sent(seq))
        assert conn.written == []
        await asyncio.sleep(0)
        # then after that turn the fetch is answered once, with the three, and nothing stays parked or held
        answered = [(epoch, offset) for epoch, offset, _ in conn.answers()[1]]
        assert answered == [(1, start), (1, start + 1), (1, start + 2)]
        assert len(conn.written) == 1
        assert stream.waiting_fetches == 0 and not conn.tasks
        stream.close(RuntimeError("done"))
        await writer.close()

    asyncio.run(scenario())


def test_a_parked_fetch_is_sent_its_records_before_the_leader_syncs_them_on_the_loop(tmp_path: Path) -> None:
    events: list[str] = []

    async def scenario() -> None:
        # given a leader whose log syncs on the event loop (a quick disk), and a follower's fetch parked at its end
        place = SyncPlace(1.0, calm_seconds=0)
        writer = LogWriter(tmp_path, sync_place=place, on_sync=lambda _: events.append("sync"))
        stream = LeaderStream(P, "a", ROLE, writer)
        conn = Conn(events)
        assert stream.fetch(conn, 1, fetch_args("b", writer.end_offset, LONG_WAIT_MS), fail) is None  # type: ignore[arg-type]
        # when a record is appended and made durable
        stream.append(sent(1))
        await writer.flush()
        # then the fetch's answer was sent before the leader's sync began (the follower syncs alongside it), and
        # that sync ran on the loop
        assert events == ["flush", "sync"]
        assert place.on_loop_syncs == 1
        assert [offset for _, offset, _ in conn.answers()[1]] == [1]
        stream.close(RuntimeError("done"))
        await writer.close()

    asyncio.run(scenario())


def test_a_parked_fetch_is_answered_empty_at_its_deadline_while_a_longer_one_waits_on(tmp_path: Path) -> None:
    async def scenario() -> None:
        # given a fetch parked for a minute, then one parked for a fifth of a second
        writer = LogWriter(tmp_path)
        stream = LeaderStream(P, "a", ROLE, writer)
        conn = Conn()
        end = writer.end_offset
        stream.fetch(conn, 1, fetch_args("b", end, LONG_WAIT_MS), fail)  # type: ignore[arg-type]
        stream.fetch(conn, 2, fetch_args("c", end, 200), fail)  # type: ignore[arg-type]
        # when the shorter wait is over
        while 2 not in conn.answers():
            await asyncio.sleep(0.05)
        # then it was answered empty, and only it: the longer one is still parked and held
        assert conn.answers() == {2: []}
        assert stream.waiting_fetches == 1 and len(conn.tasks) == 1
        # and the next append answers it
        stream.append(sent(1))
        await asyncio.sleep(0)
        assert [offset for _, offset, _ in conn.answers()[1]] == [end]
        assert stream.waiting_fetches == 0 and not conn.tasks
        stream.close(RuntimeError("done"))
        await writer.close()

    asyncio.run(scenario())


def test_a_parked_fetch_fails_with_the_term_and_is_released(tmp_path: Path) -> None:
    async def scenario() -> None:
        # given a parked fetch
        writer = LogWriter(tmp_path)
        stream = LeaderStream(P, "a", ROLE, writer)
        conn = Conn()
        stream.fetch(conn, 5, fetch_args("b", writer.end_offset, LONG_WAIT_MS), fail)  # type: ignore[arg-type]
        # when the term ends
        error = NotLeader("stepped down")
        stream.close(error)
        # then it is answered with the term's error, and nothing is parked, held or answered later
        assert conn.failed == [(5, error)]
        assert stream.waiting_fetches == 0 and not conn.tasks
        await asyncio.sleep(0.01)
        assert conn.written == []
        await writer.close()

    asyncio.run(scenario())


def test_a_fetch_parked_at_a_worker_leaves_nothing_behind_when_its_connection_drops(tmp_path: Path) -> None:
    async def scenario() -> None:
        # given a leader worker (acks=leader: sends are answered without the follower) and a fetch parked there
        role = LeaderRole(replicas=("leader", "follower"), acks=Acks.LEADER)
        async with node(tmp_path / "l", "leader", leads=role) as (leader, client, address):
            assert leader.term is not None and leader.log is not None
            stream = leader.term.stream
            fetcher = WorkerClient(*address, connect_timeout=1.0)
            fetching = asyncio.create_task(
                fetcher.fetch(P, "follower", 0, leader.log.end_offset, 1, max_bytes=1 << 20, wait_ms=LONG_WAIT_MS)
            )

            async def parked() -> bool:
                return stream.waiting_fetches == 1

            await eventually(parked)
            assert stream_tasks() == []
            # when the follower's connection drops while the fetch is parked
            await fetcher.close()
            fetching.cancel()

            async def gone() -> bool:
                return stream.waiting_fetches == 0

            # then the leader forgets it, timer included
            await eventually(gone)
            assert stream._sweep is None
            # and the next append is stored and answered, with nothing to write to the gone connection
            await client.send(P, "q", [message("after")], retention_seconds=RETENTION)
            assert stream.waiting_fetches == 0

    asyncio.run(scenario())


def test_a_parked_fetch_cancelled_by_its_connection_is_forgotten_and_released(tmp_path: Path) -> None:
    async def scenario() -> None:
        # given a fetch parked and held by its connection
        writer = LogWriter(tmp_path)
        stream = LeaderStream(P, "a", ROLE, writer)
        conn = Conn()
        stream.fetch(conn, 3, fetch_args("b", writer.end_offset, LONG_WAIT_MS), fail)  # type: ignore[arg-type]
        [held] = conn.tasks
        # when the connection closes and cancels what it holds
        held.cancel()
        # then nothing is parked or held, no timer is left, and the next append answers nothing
        assert stream.waiting_fetches == 0 and not conn.tasks
        assert stream._sweep is None
        stream.append(sent(1))
        await asyncio.sleep(0)
        assert conn.written == [] and conn.failed == []
        stream.close(RuntimeError("done"))
        await writer.close()

    asyncio.run(scenario())
