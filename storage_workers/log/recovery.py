"""Recovery: the log in a directory replayed into the engine, after cleaning up what a crash left.

What a crash can leave: group commit writes a batch and its commit frame in one write and acknowledges the
batch only after its ``fdatasync``; the next batch is written only after that sync returned, and a segment
is created (header synced) only after the previous one is entirely durable.  So the only bytes a crash may
leave unfinished are the last batch of the last segment: a torn tail, cut at recovery with a warning.  Its
pages may reach the disk in any order, so it may hold a hole with intact frames after it; what tells it
from damage to acknowledged records is the commit: a batch is a torn tail when its commit frame is missing
or does not match it, and nothing was written after it.  A bad batch followed by a later batch's valid
commit, or by anything intact past its own commit frame, was synced: damage, and recovery raises
:class:`~.segments.DamagedLog` naming it and changes nothing (``ferrymq log salvage`` cuts it explicitly).

Version 1 segments have no commit frames: there, a bad record is a torn tail only when nothing intact
follows it in the last segment.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ferrymq.replication_rules import EpochEnd
from ferrymq.storage.engine.records import Record
from ferrymq.storage.log import records as codec
from ferrymq.storage.log.epochs import EpochHistory
from ferrymq.storage.log.format import (
    COMMIT,
    ENGINE_FLAGS,
    RECORD,
    VERSION_1,
    CorruptSegment,
    SegmentHeader,
    claimed_header_size,
    commit_matches,
    commit_start,
    decode_header,
    spans,
)
from ferrymq.storage.log.reading import WindowedWalk, damage_in, decode, first_offset, read_head
from ferrymq.storage.log.recovery_progress import RecoveryProgress
from ferrymq.storage.log.segments import (
    SEALED,
    TMP_SUFFIX,
    DamagedLog,
    SegmentInfo,
    crc_of,
    fsync_dir,
    list_segments,
    segment_path,
    truncate_file,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Checkpointed:
    """What a checkpoint says of the log it was taken from (see ``recover(known=)``)."""

    segments: dict[int, tuple[SegmentInfo, int]]
    """By index: each segment as the checkpoint saw it, and the CRC-32 of its bytes then."""
    history: list[tuple[int, int]]
    last_epoch: int
    check_sealed: bool = True
    """Whether recovery checks the CRC-32 of the sealed segments it takes on the checkpoint's word; if not, it
    lists them in ``RecoveredLog.unchecked`` for a check after the start.  The last segment, which the writer
    appends to again, is always checked here."""


Vouched = tuple[int, int, int]
"""A sealed segment taken on a checkpoint's word before its bytes were checked: ``(index, size, CRC-32)``."""


@dataclass(slots=True)
class RecoveredLog:
    """What recovery leaves: the segments that remain, and the log's offsets and epochs."""

    segments: list[SegmentInfo]
    epochs: EpochHistory
    last_epoch: int
    """The epoch of the last record (of the base's snapshot when no record follows it; 0 for an empty log)."""
    unchecked: list[Vouched] = field(default_factory=list)
    """Sealed segments whose CRC-32 is still to be checked against the checkpoint's (``Checkpointed.check_sealed``)."""

    @property
    def start_offset(self) -> int:
        """The first offset whose record the log still holds (earlier ones are in the base's snapshot)."""
        return self.segments[0].first_offset if self.segments else 1

    @property
    def end_offset(self) -> int:
        """The offset after the last record: the next record's."""
        return self.segments[-1].end_offset if self.segments else 1

    def end_offset_for_epoch(self, epoch: int) -> EpochEnd | None:
        return self.epochs.end_offset_for(epoch, self.end_offset)


def recover(
    directory: Path,
    apply: Callable[[Record], None],
    progress: RecoveryProgress | None = None,
    located: Callable[[int, int, int], None] | None = None,
    skip_through: int = 0,
    passed: Callable[[int, int, int, int], None] | None = None,
    passed_from: int = 0,
    known: Checkpointed | None = None,
) -> RecoveredLog:
    """Feed every engine record of the log in ``directory`` to ``apply`` (snapshot records, then records, in
    order; never a log-internal frame); returns the segments that remain with the log's end offset and epoch
    history.  How far it got is logged as it goes (``progress``, by default every 2 s and, for a large log,
    every 10 %).

    Cleans up after a crash: leftovers of an unfinished compaction go, segments made obsolete by a later
    base segment go, a last segment whose header never made it to disk goes, and a torn tail of the last
    segment is truncated.  Damage anywhere else raises :class:`CorruptSegment` (:class:`DamagedLog` for
    damaged frames) and leaves the files as they are; records before the damage may have been fed to
    ``apply`` by then.  ``located``, when given, is told after each record where its payload lies
    (``(segment index, byte position, length)``), for a state that reads message bodies back from the log.
    ``skip_through``: the state already holds every record up to this offset (a checkpoint's): those, and the
    base's snapshot when it is as of an offset no later, are walked and checked but not applied.  ``passed``, when
    given, is told ``(offset, segment index, byte position, length)`` of each record walked past after offset
    ``passed_from`` (those a checkpoint holds but had not yet placed).  ``known``: segments a checkpoint vouches
    for (their durable sizes, offsets and CRC-32s, and the epoch history as of them): a segment whose bytes up to
    that size still have that CRC-32 is not walked frame by frame again (a CRC over the file runs about fifteen
    times faster than the walk), and one that grew since is walked from there; any other is walked whole.  The
    CRC-32 of sealed segments may be left for later (``Checkpointed.check_sealed``): a start then reads only the
    checkpoint and the log after it, whatever the backlog.
    """
    directory.mkdir(parents=True, exist_ok=True)
    for entry in os.scandir(directory):
        if entry.name.endswith(TMP_SUFFIX):
            os.unlink(entry.path)
    indexes = list_segments(directory)
    headers: dict[int, SegmentHeader] = {}
    for pos, index in enumerate(indexes):
        path = segment_path(directory, index)
        head = read_head(path)
        try:
            headers[index] = decode_header(head)
        except CorruptSegment as exc:
            if pos != len(indexes) - 1:
                raise CorruptSegment(f"{path}: {exc}") from None
            size = path.stat().st_size
            if size > claimed_header_size(head):
                # The header is synced before any frame is appended: frames behind a bad one are not a crash's.
                raise CorruptSegment(
                    f"{path}: {exc}, with {size - claimed_header_size(head)} bytes of frames after it; nothing "
                    "was removed"
                ) from None
            log.warning("removing %s: header never completed (%s)", path.name, exc)
            os.unlink(path)
            fsync_dir(directory)
            indexes.pop()
    if not indexes:
        return RecoveredLog([], EpochHistory(), 0)
    bases = [i for i in indexes if headers[i].is_base]
    if not bases:
        raise CorruptSegment(f"no base segment in {directory}: the start of the log is missing")
    first = bases[-1]
    obsolete = [i for i in indexes if i < first]
    for index in obsolete:
        os.unlink(segment_path(directory, index))
    if obsolete:
        fsync_dir(directory)
    live = [i for i in indexes if i >= first]
    sizes = {i: segment_path(directory, i).stat().st_size for i in live}
    progress = progress if progress is not None else RecoveryProgress(str(directory))
    progress.start(len(live), sum(sizes.values()))
    records = 0
    done_before = 0
    history = EpochHistory(known.history) if known is not None else EpochHistory()
    last_epoch = known.last_epoch if known is not None else headers[first].snapshot_epoch
    vouched = known.segments if known is not None else {}
    defer = known is not None and not known.check_sealed
    unchecked: list[Vouched] = []
    out: list[SegmentInfo] = []
    expected: int | None = None
    for pos, index in enumerate(live):
        path = segment_path(directory, index)
        header = headers[index]
        start = first_offset(path, header, expected)
        walk = WindowedWalk(path, header, start, history)
        seen, crc = vouched.get(index, (None, None))
        synced = 0
        if (
            seen is not None
            and crc is not None
            and (seen.flags, seen.version, seen.first_offset) == (header.flags, header.version, start)
            and header.size <= seen.size <= sizes[index]
        ):
            # The checkpoint saw these bytes synced: a bad batch among them is damage, never a torn tail.
            synced = seen.size
        if synced and (
            (later := defer and pos < len(live) - 1 and seen.size == sizes[index]) or crc_of(path, seen.size) == crc
        ):
            assert seen is not None and crc is not None
            if later:
                unchecked.append((index, seen.size, crc))
            if seen.size == sizes[index]:
                out.append(seen)
                expected = seen.end_offset
                done_before += sizes[index]
                progress.segment_done()
                continue
            walk.resume(seen.size, seen.end_offset)
        for base, batch in walk.batches():
            for frame in batch:
                if frame.flags in ENGINE_FLAGS and frame.offset > skip_through:
                    apply(decode(frame, path, base))
                    if located is not None:
                        located(index, base + frame.end - len(frame.payload), len(frame.payload))
                    records += 1
                elif passed is not None and frame.flags == RECORD and frame.offset > passed_from:
                    passed(frame.offset, index, base + frame.end - len(frame.payload), len(frame.payload))
                if frame.flags == RECORD:
                    last_epoch = frame.epoch
            if batch:
                progress.update(records, done_before + base + batch[-1].end)
        if walk.end != walk.size:
            _cut_torn_tail(path, walk.rest(), header, walk.end, last=pos == len(live) - 1, synced=synced)
        out.append(SegmentInfo(index, walk.end, header.flags, header.version, start, walk.next_offset))
        expected = walk.next_offset
        done_before += sizes[index]
        progress.segment_done()
    progress.finish(records)
    return RecoveredLog(out, history, last_epoch, unchecked)


def _cut_torn_tail(path: Path, data: bytes, header: SegmentHeader, end: int, *, last: bool, synced: int = 0) -> None:
    """Cut segment ``path`` at ``end``, where its committed bytes end, if what follows is a torn tail;
    raise DamagedLog if it is not.  ``synced``: a checkpoint recorded the segment's first bytes up to there as
    synced."""
    if not last:
        raise DamagedLog(path, damage_in(path, data, end, header.version), SEALED)
    if end < synced:
        raise DamagedLog(
            path,
            damage_in(path, data, end, header.version),
            f"the checkpoint recorded the segment's first {synced} bytes as synced",
        )
    if header.version == VERSION_1:
        ranges = damage_in(path, data, end, VERSION_1)
        if ranges[0].end != len(data):
            raise DamagedLog(path, ranges, f"intact records follow at byte {ranges[0].end}")
    else:
        later = synced_after(data, end)
        if later is not None:
            raise DamagedLog(
                path,
                damage_in(path, data, end, header.version),
                f"the batch was synced: a later batch was written after it (an intact frame at byte {later})",
            )
    log.warning(
        "%s: cutting a torn tail of %d bytes at byte %d (the last batch, never synced, so never acknowledged)",
        path.name,
        len(data) - end,
        end,
    )
    truncate_file(path, end)


def synced_after(data: bytes | memoryview, start: int) -> int | None:
    """Where the proof lies that the bad batch starting at ``start`` was synced, or None.

    Proof is a later batch's valid commit, or any intact frame after the bad batch's own commit frame (one
    that does not match it): the writer writes a batch only after the previous one's sync returned.
    """
    view = memoryview(data)
    own_end: int | None = None
    for _, _, frame in spans(view, codec.readable, start):
        if frame is None:
            continue
        if frame.flags == COMMIT:
            begins = commit_start(frame)
            if begins > start and commit_matches(view, frame):
                return frame.start
            if begins == start and own_end is None:
                own_end = frame.end
                continue
        if own_end is not None and frame.start >= own_end:
            return frame.start
    return None
