"""Compaction driven by the share of dead bytes: deleted and purged bodies leave the disk even when the log is
far below the size threshold, while a log of live messages is left alone."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from ferrymq.clock import ManualClock
from ferrymq.storage.engine import Engine
from ferrymq.storage.log.compaction import Compactor
from ferrymq.storage.log.recovery import recover
from ferrymq.storage.log.segments import list_segments, segment_path
from ferrymq.storage.log.writer import LogWriter
from ferrymq.storage.server import fold
from tests.support.log_engine import appending, new_engine, replayed

RETENTION = 3600
DEAD_FLOOR = 64 * 1024


def _on_disk(directory: Path) -> bytes:
    return b"".join(segment_path(directory, i).read_bytes() for i in list_segments(directory))


def _bodies_on_disk(directory: Path) -> set[int]:
    return {int(n) for n in re.findall(rb"SECRET-BODY-(\d{4})", _on_disk(directory))}


async def _traffic(directory: Path, *, delete: bool, purge: bool) -> tuple[Compactor, Engine]:
    """Marked bodies through a writer whose size threshold (1 GiB) is never reached; delete or purge them."""
    writer = LogWriter(directory, recover(directory, lambda r: None), segment_bytes=32 * 1024, max_batch=64)
    clock = ManualClock(1_700_000_000.0)
    engine = new_engine(clock, on_record=appending(writer))
    compactor = Compactor(writer, fold, lambda: engine.live_bytes, min_bytes=1 << 30, ratio=4,
                          min_dead_bytes=DEAD_FLOOR, dead_share=0.5)
    writer.on_commit = compactor.check
    for i in range(400):
        engine.send("q", [[f"m{i}", f"SECRET-BODY-{i:04d}-" + "x" * 400, {}, "md5", None, 0, {}]], RETENTION)
        if delete:
            rows = engine.poll("q", 1, 30, RETENTION).rows
            engine.delete("q", [rows[0][1]])
        clock.advance(0.001)
        if i % 20 == 0:
            await writer.flush()
    if purge:
        engine.purge("q")
    # Commits after the traffic give the policy its chances to seal, then compact, what is there.
    for i in range(6):
        engine.send("other", [[f"o{i}", "o", {}, "md5", None, 0, {}]], RETENTION)
        await writer.flush()
        await asyncio.sleep(0.1)
    await compactor.close()
    await writer.close()
    return compactor, engine


def test_deleted_bodies_leave_the_disk_though_the_log_is_small(tmp_path: Path) -> None:
    # given a log far below its size threshold in which every message was received and deleted
    compactor, engine = asyncio.run(_traffic(tmp_path, delete=True, purge=False))
    # then the dead bytes alone made it compact: the only deleted bodies left on disk are the newest, written
    # since the last compaction, fewer than the dead-bytes floor holds
    assert compactor.runs >= 1
    left = _bodies_on_disk(tmp_path)
    assert len(left) * 400 < DEAD_FLOOR
    assert all(n >= 400 - DEAD_FLOOR // 400 for n in left)
    got: list = []
    recover(tmp_path, got.append)
    assert replayed(got).state() == engine.state()


def test_purged_bodies_leave_the_disk(tmp_path: Path) -> None:
    # given a log whose queue was purged after its messages were sent
    compactor, engine = asyncio.run(_traffic(tmp_path, delete=False, purge=True))
    # then compaction ran and the purged bodies are gone from disk
    assert compactor.runs >= 1
    assert not _bodies_on_disk(tmp_path)
    got: list = []
    recover(tmp_path, got.append)
    assert replayed(got).state() == engine.state()


def test_a_log_of_live_messages_is_not_compacted(tmp_path: Path) -> None:
    # given the same traffic, with every message still in the queue
    compactor, engine = asyncio.run(_traffic(tmp_path, delete=False, purge=False))
    # then nothing was compacted: the log holds little but live state, and the bodies are all there
    assert compactor.runs == 0 and compactor.attempts == 0
    assert _bodies_on_disk(tmp_path) == set(range(400))
    assert len(engine.state()["q"]) == 400
