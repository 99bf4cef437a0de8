"""Offsets and epochs of the log on real files: what replication builds on (dense offsets, the epoch history,
reading from an offset, a follower's appends, truncation)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from ferrymq.replication_rules import EpochEnd
from ferrymq.storage.engine.records import SENT
from ferrymq.storage.log import records as codec
from ferrymq.storage.log.compaction import Compactor, compact_segments
from ferrymq.storage.log.epochs import EpochRegressed
from ferrymq.storage.log.format import RECORD, decode_header
from ferrymq.storage.log.reading import OffsetCompacted
from ferrymq.storage.log.recovery import RecoveredLog, recover
from ferrymq.storage.log.segments import list_segments, segment_path
from ferrymq.storage.log.writer import LogFailed, LogWriter, OffsetMismatch
from ferrymq.storage.server import fold
from tests.support.log_engine import replayed
from tests.support.log_files import frames_of, write_batches


def sent(seq: int, body: str = "b" * 150) -> tuple:
    return (SENT, "q", 1_700_000_000_000, seq, [[str(uuid.UUID(int=seq)), body, {}, "md5", None, 0, {}]])


def recovered(directory: Path) -> tuple[list[tuple], RecoveredLog]:
    got: list[tuple] = []
    log = recover(directory, got.append)
    return got, log


def record_frames(directory: Path) -> list[tuple[int, int, int]]:
    """``(epoch, offset, seq)`` of every record frame on disk, segment by segment."""
    return [
        (f.epoch, f.offset, codec.decode(f.payload)[3])
        for index in list_segments(directory)
        for f in frames_of(segment_path(directory, index))
        if f.flags == RECORD
    ]


EPOCHS = [0, 0, 0, 0, 2, 2, 2, 5, 5, 5]
"""The epoch of each record of :func:`epochs_log`, by offset from 1."""


def epochs_log(directory: Path, **writer_args: object) -> None:
    """Records 1-4 under epoch 0, 5-7 under epoch 2, 8-10 under epoch 5, in batches of two."""

    async def run() -> None:
        writer = LogWriter(directory, **writer_args)  # type: ignore[arg-type]
        for seq, epoch in enumerate(EPOCHS, start=1):
            assert writer.append(sent(seq), epoch) == seq
            if seq % 2 == 0:
                await writer.flush()
        await writer.close()

    asyncio.run(run())


def test_records_take_dense_offsets_from_1_and_their_frames_carry_offset_and_epoch(tmp_path: Path) -> None:
    # given records appended under three epochs, over several segments
    epochs_log(tmp_path, segment_bytes=600)
    # then each frame on disk carries its offset (1, 2, ... in order) and the epoch it was appended under
    assert record_frames(tmp_path) == [(e, s, s) for s, e in enumerate(EPOCHS, start=1)]
    # and each segment's header names the offset it starts at, where the one before it ended
    indexes = list_segments(tmp_path)
    assert len(indexes) > 2
    _, log = recovered(tmp_path)
    firsts = [decode_header(segment_path(tmp_path, i).read_bytes()).first_offset for i in indexes]
    assert firsts == [s.first_offset for s in log.segments]
    assert firsts[0] == 1
    assert [s.first_offset for s in log.segments[1:]] == [s.end_offset for s in log.segments[:-1]]
    assert log.end_offset == 11


def test_recovery_gives_the_epoch_history_and_where_each_epoch_ends(tmp_path: Path) -> None:
    # given records under epochs 0 (1-4), 2 (5-7) and 5 (8-10)
    epochs_log(tmp_path, segment_bytes=600)
    # when recovered
    _, log = recovered(tmp_path)
    # then the history names each epoch's first offset, and an epoch ends where the next higher one starts
    assert log.epochs.entries == [(0, 1), (2, 5), (5, 8)]
    assert log.last_epoch == 5
    assert [log.end_offset_for_epoch(e).end_offset for e in range(7)] == [5, 5, 8, 8, 8, 11, 11]  # type: ignore[union-attr]
    # and a writer going on from there knows the same
    writer = LogWriter(tmp_path, log)
    assert (writer.end_offset, writer.durable_offset, writer.epoch) == (11, 11, 5)
    assert writer.end_offset_for_epoch(2) == EpochEnd(2, 8)
    asyncio.run(writer.close())


def test_an_append_under_an_older_epoch_is_refused_and_appends_nothing(tmp_path: Path) -> None:
    async def run() -> LogWriter:
        writer = LogWriter(tmp_path)
        writer.append(sent(1), 3)
        with pytest.raises(EpochRegressed):
            writer.append(sent(2), 2)
        assert writer.append(sent(2), 3) == 2
        await writer.close()
        return writer

    writer = asyncio.run(run())
    assert writer.epochs.entries == [(3, 1)]
    assert record_frames(tmp_path) == [(3, 1, 1), (3, 2, 2)]


def test_read_from_streams_the_durable_records_from_an_offset_across_segments(tmp_path: Path) -> None:
    # given a log of 10 records over several segments, and one more appended but not yet durable
    epochs_log(tmp_path, segment_bytes=600)

    async def run() -> None:
        writer = LogWriter(tmp_path, recover(tmp_path, lambda _: None))
        assert len(writer.segments) > 2
        writer.append(sent(11), 6)
        # when read from offset 4
        got = list(writer.read_from(4))
        # then every durable record from there comes, with its epoch and offset, as the bytes appended
        assert [(e, o) for e, o, _ in got] == [(0, 4), (2, 5), (2, 6), (2, 7), (5, 8), (5, 9), (5, 10)]
        assert [codec.decode(p) for _, _, p in got] == [codec.decode(codec.encode(sent(s))) for s in range(4, 11)]
        # and once the last record is durable, it comes too
        await writer.flush()
        assert [o for _, o, _ in writer.read_from(10)] == [10, 11]
        assert list(writer.read_from(12)) == []
        with pytest.raises(ValueError, match="past the end"):
            writer.read_from(13)
        await writer.close()

    asyncio.run(run())


def test_reading_from_a_compacted_offset_asks_for_a_snapshot_and_compaction_keeps_the_epochs(tmp_path: Path) -> None:
    # given records under three epochs, the sealed segments compacted
    epochs_log(tmp_path, segment_bytes=600)
    got_before, before = recovered(tmp_path)
    sealed = [s.index for s in before.segments[:-1]]
    base = compact_segments(tmp_path, sealed, fold)
    # then the base says which offset and epoch its snapshot is of, and the log now starts after it
    covered = before.segments[-2].end_offset - 1
    header = decode_header(segment_path(tmp_path, base.index).read_bytes())
    assert (header.snapshot_offset, header.first_offset, base.first_offset) == (covered, covered + 1, covered + 1)
    assert header.snapshot_epoch == EPOCHS[covered - 1]
    got, after = recovered(tmp_path)
    assert replayed(got).state() == replayed(got_before).state()
    # and the epoch history (epochs whose records are gone included) and the log's end are the same
    assert after.epochs == before.epochs
    assert after.end_offset == before.end_offset == 11
    writer = LogWriter(tmp_path, after)
    # and reading from before the start raises, from the start streams what follows the snapshot
    with pytest.raises(OffsetCompacted, match=f"starts at offset {covered + 1}"):
        writer.read_from(covered)
    assert [o for _, o, _ in writer.read_from(covered + 1)] == list(range(covered + 1, 11))
    asyncio.run(writer.close())


def test_a_reader_reads_the_segments_it_listed_while_compaction_replaces_them(tmp_path: Path) -> None:
    # given a reader made from offset 1 on a log of several segments
    epochs_log(tmp_path, segment_bytes=600)
    writer = LogWriter(tmp_path, recover(tmp_path, lambda _: None))
    reader = writer.read_from(1)
    # when compaction replaces the sealed segments before the reader is read
    compact_segments(tmp_path, [s.index for s in writer.sealed_segments()], fold)
    # then it still reads every record, from the files as they were when it was made
    assert [o for _, o, _ in reader] == list(range(1, 11))
    # while a reader made afterwards from the same list of segments (the writer's, not yet told) finds the
    # records compacted away: deleted segments, and the last one, now the base, alike
    with pytest.raises(OffsetCompacted):
        list(writer.read_from(1))
    last_sealed = writer.sealed_segments()[-1]
    with pytest.raises(OffsetCompacted):
        list(writer.read_from(last_sealed.first_offset))
    asyncio.run(writer.close())


def test_a_follower_appends_the_leaders_records_at_their_offsets(tmp_path: Path) -> None:
    # given a leader's log under two epochs
    leader, follower = tmp_path / "leader", tmp_path / "follower"
    epochs_log(leader, segment_bytes=600)

    async def run() -> LogWriter:
        source = LogWriter(leader, recover(leader, lambda _: None))
        writer = LogWriter(follower)
        # when a follower appends what the leader's log streams from offset 1
        for epoch, offset, payload in source.read_from(1):
            assert writer.append_replicated(epoch, offset, payload) == offset
        await writer.flush()
        # then an offset that does not follow, an older epoch, or bytes that are not a record are refused
        with pytest.raises(OffsetMismatch):
            writer.append_replicated(5, 12, codec.encode(sent(12)))
        with pytest.raises(EpochRegressed):
            writer.append_replicated(4, 11, codec.encode(sent(11)))
        with pytest.raises(ValueError, match="not a record"):
            writer.append_replicated(5, 11, b"\xc1")
        assert writer.end_offset == 11
        await source.close()
        await writer.close()
        return writer

    writer = asyncio.run(run())
    # and the follower's log holds the same records at the same offsets and epochs, with the same history
    assert record_frames(follower) == record_frames(leader)
    assert writer.epochs.entries == [(0, 1), (2, 5), (5, 8)]
    assert recovered(follower)[1].epochs == recovered(leader)[1].epochs


async def _truncate(directory: Path, offset: int) -> LogWriter:
    writer = LogWriter(directory, recover(directory, lambda _: None))
    await writer.truncate_after(offset)
    return writer


def test_truncating_at_a_batch_boundary_cuts_across_segments_and_the_log_goes_on(tmp_path: Path) -> None:
    # given records 1-10 in batches of two over several segments
    epochs_log(tmp_path, segment_bytes=600)
    before = recovered(tmp_path)[1].segments
    holding = next(s for s in before if s.first_offset <= 6 < s.end_offset)
    inode = segment_path(tmp_path, holding.index).stat().st_ino

    async def run() -> LogWriter:
        # when the log is cut after offset 6 (the end of a batch), then appended to
        writer = await _truncate(tmp_path, 6)
        assert (writer.end_offset, writer.durable_offset, writer.epoch) == (7, 7, 2)
        assert writer.append(sent(70), 3) == 7
        await writer.close()
        return writer

    writer = asyncio.run(run())
    # then the segments after the one holding offset 6 are gone, that one was cut in place, and recovery
    # gives records 1-6 and the one appended after them
    assert list_segments(tmp_path) == [s.index for s in before if s.index <= holding.index]
    assert segment_path(tmp_path, holding.index).stat().st_ino == inode
    got, log = recovered(tmp_path)
    assert [r[3] for r in got] == [1, 2, 3, 4, 5, 6, 70]
    assert log.epochs.entries == writer.epochs.entries == [(0, 1), (2, 5), (3, 7)]


def test_truncating_inside_a_batch_keeps_the_batchs_first_records_committed(tmp_path: Path) -> None:
    # given a last batch of records 4-8
    write_batches(tmp_path, [[sent(1), sent(2), sent(3)], [sent(s) for s in range(4, 9)]])
    inode = segment_path(tmp_path, 1).stat().st_ino

    async def run() -> None:
        # when the log is cut after offset 6, inside that batch, and appended to
        writer = await _truncate(tmp_path, 6)
        writer.append(sent(70), 0)
        await writer.close()

    asyncio.run(run())
    # then records 4-6 got a commit of their own: recovery keeps them rather than cutting a torn tail
    got, log = recovered(tmp_path)
    assert [r[3] for r in got] == [1, 2, 3, 4, 5, 6, 70]
    assert log.end_offset == 8
    # and the segment was written anew (atomically), not cut in place
    assert segment_path(tmp_path, 1).stat().st_ino != inode


def test_truncation_forgets_the_epochs_after_the_cut(tmp_path: Path) -> None:
    # given epochs 0 (1-4), 2 (5-7) and 5 (8-10)
    epochs_log(tmp_path)

    async def run() -> LogWriter:
        # when cut after offset 4: the follower's epoch-2 and epoch-5 records diverged from the leader's
        writer = await _truncate(tmp_path, 4)
        assert writer.epochs.entries == [(0, 1)]
        assert writer.end_offset_for_epoch(0) == EpochEnd(0, 5)
        # then the leader's next epoch may follow, as low as it is
        writer.append(sent(50), 1)
        await writer.close()
        return writer

    asyncio.run(run())
    assert recovered(tmp_path)[1].epochs.entries == [(0, 1), (1, 5)]


def test_truncating_into_the_snapshot_is_refused_and_right_after_it_cuts_every_record(tmp_path: Path) -> None:
    # given a log whose sealed segments were compacted into a snapshot of offset n
    epochs_log(tmp_path, segment_bytes=600)
    log = recover(tmp_path, lambda _: None)
    base = compact_segments(tmp_path, [s.index for s in log.segments[:-1]], fold)
    n = base.first_offset - 1

    async def run() -> None:
        writer = LogWriter(tmp_path, recover(tmp_path, lambda _: None))
        # when cut into the snapshot, then that is refused (the follower needs a snapshot instead)
        with pytest.raises(OffsetCompacted):
            await writer.truncate_after(n - 1)
        # and cut right after it, every record after the snapshot goes
        await writer.truncate_after(n)
        assert writer.end_offset == n + 1
        await writer.close()

    asyncio.run(run())
    _, after = recovered(tmp_path)
    assert after.end_offset == n + 1
    assert after.epochs == log.epochs.upto(n)


def test_truncation_waits_for_what_was_appended_and_appending_meanwhile_fails(tmp_path: Path) -> None:
    async def run() -> None:
        writer = LogWriter(tmp_path)
        for seq in range(1, 6):
            writer.append(sent(seq), 0)
        # when a truncation starts while the appends are still pending
        truncation = asyncio.get_running_loop().create_task(writer.truncate_after(3))
        await asyncio.sleep(0)
        # then appending fails until it is done
        with pytest.raises(LogFailed, match="being truncated"):
            writer.append(sent(6), 0)
        await truncation
        assert writer.append(sent(4), 0) == 4
        await writer.close()

    asyncio.run(run())
    assert [r[3] for r in recovered(tmp_path)[0]] == [1, 2, 3, 4]


def test_a_compaction_chosen_before_a_truncation_stands_down(tmp_path: Path) -> None:
    async def run() -> Compactor:
        # given a log of several sealed segments, and a compaction chosen for them
        writer = LogWriter(tmp_path, segment_bytes=400)
        for seq in range(1, 12):
            writer.append(sent(seq), 0)
            await writer.flush()
        compactor = Compactor(writer, fold, lambda: 0, min_bytes=1, ratio=1)
        compactor.check()
        assert compactor.running
        # when the log is cut into those segments before the compaction gets to run, and it then runs
        await writer.truncate_after(2)
        while compactor.running:
            await asyncio.sleep(0.001)
        # then the compaction did not run over the segments the truncation changed, nor failed on them
        await compactor.close()
        await writer.close()
        return compactor

    compactor = asyncio.run(run())
    assert (compactor.runs, compactor.failures) == (0, 0)
    assert [r[3] for r in recovered(tmp_path)[0]] == [1, 2]


def test_a_truncation_waiting_for_a_compaction_is_refused_when_the_compaction_took_its_offset(
    tmp_path: Path,
) -> None:
    async def run() -> tuple[Compactor, LogWriter]:
        # given a compaction under way over several sealed segments
        writer = LogWriter(tmp_path, segment_bytes=400)
        for seq in range(1, 12):
            writer.append(sent(seq), 0)
            await writer.flush()
        compactor = Compactor(writer, fold, lambda: 0, min_bytes=1, ratio=1)
        compactor.check()
        await asyncio.sleep(0)
        assert writer.segment_lock.locked()
        # when a truncation into those segments waits for it, then it is refused once the records are compacted
        with pytest.raises(OffsetCompacted, match="while the truncation waited"):
            await writer.truncate_after(1)
        await compactor.close()
        await writer.close()
        return compactor, writer

    compactor, writer = asyncio.run(run())
    # and the log is the compacted one, whole
    assert compactor.runs == 1 and writer.start_offset > 2
    assert [row[0] for row in replayed(recovered(tmp_path)[0]).state()["q"]] == list(range(1, 12))


def test_a_fold_that_yields_before_reading_every_record_is_refused(tmp_path: Path) -> None:
    # given sealed segments, and a fold that passes records on as it reads them
    epochs_log(tmp_path, segment_bytes=600)
    sealed = list_segments(tmp_path)[:-1]
    before = [segment_path(tmp_path, i).read_bytes() for i in sealed]
    # when compaction runs with it, then it is refused before anything is written: the snapshot would be
    # written under the offset of the last record while holding the state of the first
    with pytest.raises(RuntimeError, match="before it read every record"):
        compact_segments(tmp_path, sealed, lambda records, _: (r for r in records))
    assert [segment_path(tmp_path, i).read_bytes() for i in sealed] == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
