"""The worker log on real files: group commit, recovery, torn tails, rolling and compaction."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest

from ferrymq.clock import ManualClock
from ferrymq.limits import RESEND_HORIZON_MS
from ferrymq.storage.engine import Engine
from ferrymq.storage.engine.records import SENT
from ferrymq.storage.log.compaction import Compactor, compact_segments
from ferrymq.storage.log.format import BASE, HEADER_SIZE, CorruptSegment, encode_frame
from ferrymq.storage.log.recovery import recover
from ferrymq.storage.log.segments import TMP_SUFFIX, SegmentInfo, list_segments, segment_path
from ferrymq.storage.log.writer import LogWriter
from ferrymq.storage.server import fold
from tests.support.log_engine import appending, new_engine, replayed

RETENTION = 3600


def sent(queue: str, seq: int, body: str = "x") -> tuple:
    return (SENT, queue, 1_700_000_000_000, seq, [[str(uuid.uuid4()), body, {}, "md5", None, 0, {}]])


def read_all(directory: Path) -> tuple[list[tuple], list[SegmentInfo]]:
    got: list[tuple] = []
    segments = recover(directory, got.append).segments
    return got, segments


async def write(directory: Path, records: list[tuple], **kwargs: object) -> LogWriter:
    writer = LogWriter(directory, recover(directory, lambda _: None), **kwargs)  # type: ignore[arg-type]
    offsets = [writer.append(r, 0) for r in records]
    await writer.wait_offset_durable(offsets[-1] if offsets else 0)
    await writer.close()
    return writer


def test_appended_records_come_back_in_order(tmp_path: Path) -> None:
    records = [sent("q", i, f"body {i}") for i in range(1, 501)]
    writer = asyncio.run(write(tmp_path, records))
    # many appends made in one event-loop turn share few syncs
    assert writer.batches < 10
    got, segments = read_all(tmp_path)
    assert [r[3] for r in got] == list(range(1, 501))
    assert got[7][4][0][1] == "body 8"
    assert [s.index for s in segments] == [1]
    assert segments[0].is_base


def test_durability_callbacks_fire_in_order_after_the_sync(tmp_path: Path) -> None:
    async def scenario() -> list[int]:
        writer = LogWriter(tmp_path)
        fired: list[object] = []
        for i in range(1, 6):
            offset = writer.append(sent("q", i), 0)
            position = writer.end
            assert writer.durable < position and writer.durable_offset <= offset
            writer.when_durable(position, fired.append, i)
            writer.when_offset_durable(offset, fired.append, f"offset {offset}")
        assert fired == []
        await writer.flush()
        await writer.close()
        return fired

    # by position and by offset, each in the order they were asked for
    fired = asyncio.run(scenario())
    assert [f for f in fired if isinstance(f, int)] == [1, 2, 3, 4, 5]
    assert [f for f in fired if isinstance(f, str)] == [f"offset {i}" for i in range(1, 6)]


def test_a_torn_tail_is_cut_at_recovery_and_the_log_goes_on(tmp_path: Path) -> None:
    # given a log whose last record was only half written when the machine died
    asyncio.run(write(tmp_path, [sent("q", 1), sent("q", 2)]))
    path = segment_path(tmp_path, 1)
    intact = path.stat().st_size
    with open(path, "ab") as f:
        f.write(encode_frame(0, 0, 3, b"\x93\x01\xa1q" + b"\0" * 100)[:50])
    # when it is recovered
    got, segments = read_all(tmp_path)
    # then the intact records come back and the file is cut where they end
    assert [r[3] for r in got] == [1, 2]
    assert path.stat().st_size == intact == segments[-1].size
    # and appending continues after them
    asyncio.run(write(tmp_path, [sent("q", 3)]))
    assert [r[3] for r in read_all(tmp_path)[0]] == [1, 2, 3]


def test_damage_inside_a_sealed_segment_is_an_error(tmp_path: Path) -> None:
    asyncio.run(write(tmp_path, [sent("q", i, "y" * 200) for i in range(1, 30)], segment_bytes=1024))
    first = segment_path(tmp_path, list_segments(tmp_path)[0])
    data = bytearray(first.read_bytes())
    data[HEADER_SIZE + 20] ^= 0xFF
    first.write_bytes(bytes(data))
    with pytest.raises(CorruptSegment):
        read_all(tmp_path)


def test_a_segment_whose_header_never_reached_disk_is_dropped(tmp_path: Path) -> None:
    asyncio.run(write(tmp_path, [sent("q", 1)]))
    segment_path(tmp_path, 2).write_bytes(b"FERRY")
    got, segments = read_all(tmp_path)
    assert [r[3] for r in got] == [1]
    assert [s.index for s in segments] == [1]
    assert list_segments(tmp_path) == [1]


def test_segments_roll_at_the_size_limit_and_replay_across_them(tmp_path: Path) -> None:
    records = [sent("q", i, "z" * 300) for i in range(1, 101)]

    async def scenario() -> None:
        writer = LogWriter(tmp_path, recover(tmp_path, lambda _: None), segment_bytes=4096, max_batch=4)
        for r in records:
            writer.append(r, 0)
            await asyncio.sleep(0)
        await writer.close()

    asyncio.run(scenario())
    indexes = list_segments(tmp_path)
    assert len(indexes) > 5
    assert all(segment_path(tmp_path, i).stat().st_size < 4096 + 4 * 400 for i in indexes)
    assert [r[3] for r in read_all(tmp_path)[0]] == list(range(1, 101))


def _busy_records(n: int) -> tuple[list[tuple], Engine]:
    """Records of a queue where most messages were sent and deleted, and the engine they leave; the sends span
    twice the resend horizon, so the ids of most deleted messages are no longer kept either."""
    records: list[tuple] = []
    clock = ManualClock()
    engine = new_engine(clock, on_record=records.append)
    for i in range(n):
        engine.send("busy", [[str(uuid.uuid4()), f"m{i}" * 20, {}, "md5", None, 0, {}]], RETENTION)
        got = engine.poll("busy", 1, 30, RETENTION).rows
        if i % 10:
            engine.delete("busy", [got[0][1]])
        clock.advance(2 * RESEND_HORIZON_MS / 1000 / n)
    return records, engine


def test_compaction_keeps_the_state_and_drops_the_history(tmp_path: Path) -> None:
    # given a log of a busy queue spread over several segments
    records, engine = _busy_records(600)
    asyncio.run(write(tmp_path, records, segment_bytes=8192, max_batch=16))
    before = sum(segment_path(tmp_path, i).stat().st_size for i in list_segments(tmp_path))
    sealed = list_segments(tmp_path)[:-1]
    # when the sealed segments are compacted
    base = compact_segments(tmp_path, sealed, fold)
    # then one base segment replaces them, the log is much smaller, and it replays to the same state
    assert list_segments(tmp_path) == [sealed[-1], sealed[-1] + 1]
    assert base.flags == BASE and base.size == segment_path(tmp_path, base.index).stat().st_size
    after = sum(segment_path(tmp_path, i).stat().st_size for i in list_segments(tmp_path))
    assert after < before / 4
    got, _ = read_all(tmp_path)
    assert replayed(got).state() == engine.state()


def test_leftovers_of_an_interrupted_compaction_are_cleaned_up(tmp_path: Path) -> None:
    # given a compaction that died before its switch (a .tmp file) ...
    records, engine = _busy_records(300)
    asyncio.run(write(tmp_path, records, segment_bytes=4096, max_batch=16))
    sealed = list_segments(tmp_path)[:-1]
    (tmp_path / f"{sealed[-1]:020d}{TMP_SUFFIX}").write_bytes(b"half a snapshot")
    got, _ = read_all(tmp_path)
    assert not any(p.name.endswith(TMP_SUFFIX) for p in tmp_path.iterdir())
    assert replayed(got).state() == engine.state()
    # ... and one that died after its switch but before deleting the old segments
    compact_segments(tmp_path, sealed, fold)
    for index in sealed[:-1]:
        segment_path(tmp_path, index).write_bytes(segment_path(tmp_path, sealed[-1]).read_bytes())
    got, segments = read_all(tmp_path)
    assert segments[0].index == sealed[-1]
    assert list_segments(tmp_path) == [s.index for s in segments]
    assert replayed(got).state() == engine.state()


def test_a_log_without_its_beginning_is_refused(tmp_path: Path) -> None:
    asyncio.run(write(tmp_path, [sent("q", i, "y" * 500) for i in range(1, 30)], segment_bytes=2048))
    os.unlink(segment_path(tmp_path, 1))
    with pytest.raises(CorruptSegment):
        read_all(tmp_path)


def test_an_always_busy_queue_does_not_grow_the_disk_forever(tmp_path: Path) -> None:
    # given a worker log with small segments and compaction policy, behind a live engine
    async def scenario() -> tuple[int, int, Engine]:
        writer = LogWriter(tmp_path, segment_bytes=16 * 1024, max_batch=64)
        clock = ManualClock()
        engine = new_engine(clock, on_record=appending(writer))
        compactor = Compactor(writer, fold, lambda: engine.live_bytes, min_bytes=64 * 1024, ratio=4)
        writer.on_commit = compactor.check
        peak = 0
        # when many messages pass through it, a few staying behind
        for i in range(4000):
            engine.send("busy", [[str(uuid.uuid4()), "p" * 200, {}, "md5", None, 0, {}]], RETENTION)
            got = engine.poll("busy", 1, 30, RETENTION).rows
            if i % 100:
                engine.delete("busy", [got[0][1]])
            clock.advance(0.001)
            if i % 50 == 0:
                await writer.flush()
                peak = max(peak, sum(s.size for s in writer.segments))
        await writer.flush()
        await asyncio.sleep(0.2)
        await compactor.close()
        await writer.close()
        return peak, compactor.runs, engine

    peak, runs, engine = asyncio.run(scenario())
    # then compaction ran and the log stayed a small multiple of the threshold, far below the traffic (~2 MB)
    assert runs >= 2
    assert peak < 400 * 1024
    got, _ = read_all(tmp_path)
    assert replayed(got).state() == engine.state()
    assert len(engine.state()["busy"]) == 40


def test_a_writer_for_a_new_log_refuses_a_directory_that_holds_one(tmp_path: Path) -> None:
    # given a directory with a log in it
    asyncio.run(write(tmp_path, [sent("q", 1)]))
    # when a writer is opened on it as if it were empty, then it refuses rather than write over segment 1
    with pytest.raises(ValueError, match="holds a log"):
        LogWriter(tmp_path)
    assert [r[3] for r in read_all(tmp_path)[0]] == [1]
