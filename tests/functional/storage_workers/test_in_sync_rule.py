"""The in-sync rule of a leader's replication stream (``LeaderStream.lagging``) with a real log: a follower
that pipelines its fetches while the leader keeps appending never fetches from the log end of the moment,
yet it is caught up (Kafka's rule: it reaches the end the leader had at its previous fetch)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ferrymq.replication_rules import Acks
from ferrymq.storage.engine.records import SENT
from ferrymq.storage.log.writer import LogWriter
from ferrymq.storage.replication import LeaderStream
from ferrymq.storage.replication.roles import LeaderRole

MAX_LAG_MS = 1_000


class Conn:
    """Where FETCH answers go: kept, for the test to read."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def write(self, frame: bytes) -> None:
        self.frames.append(frame)


def sent(seq: int) -> tuple[Any, ...]:
    return (SENT, "q", 1_000 + seq, seq, [(f"m{seq}", "b", {}, "md5", None, 0, {})])


def fail(conn: Any, request_id: int, exc: BaseException) -> None:
    raise AssertionError(f"fetch failed: {exc}")


def test_a_pipelined_follower_under_steady_load_stays_in_sync(tmp_path: Path) -> None:
    async def scenario() -> tuple[frozenset[str], frozenset[str]]:
        # given a leader with two in-sync followers, on a clock the test moves
        now = [0]
        writer = LogWriter(tmp_path)
        # (acks=leader: any follower may be dropped, so the rule alone decides which are)
        role = LeaderRole(replicas=("a", "b", "c"), acks=Acks.LEADER, epoch=1)
        stream = LeaderStream(1, "a", role, writer, now_ms=lambda: now[0])
        conn = Conn()
        seq = 0
        # when the leader appends a batch between every two fetches for ten lag periods, follower b
        # fetching what it got last time (one batch behind the end of the moment) and c stopped
        from_offset = stream.log.end_offset
        for _ in range(50):
            for _ in range(3):
                seq += 1
                stream.append(sent(seq))
            task = stream.fetch(conn, seq, ["b", 1, from_offset, from_offset, 1 << 20, 0], fail)  # type: ignore[arg-type]
            if task is not None:
                await task
            assert from_offset < stream.log.end_offset
            # b appends what it was sent, the leader's log up to its end as of this fetch, and asks for more
            from_offset = stream.log.end_offset
            await writer.flush()
            now[0] += MAX_LAG_MS // 5
        lagging = stream.lagging(MAX_LAG_MS)
        # and c then catches up in one fetch from the leader's end
        stream.fetch(conn, 0, ["c", 1, stream.log.end_offset, stream.log.end_offset, 1 << 20, 0], fail)  # type: ignore[arg-type]
        after = stream.lagging(MAX_LAG_MS)
        stream.close(RuntimeError("done"))
        await writer.close()
        return lagging, after

    lagging, after = asyncio.run(scenario())
    # then only the stopped follower is lagging; the pipelined one, never at the end of the moment, is not
    assert lagging == frozenset({"c"})
    assert after == frozenset()
