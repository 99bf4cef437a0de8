"""A leader's first segment copied, as bytes, to a follower too far behind to catch up from the leader's log.

When a follower lacks records the leader compacted away, the leader's first segment is what it needs: a base
holding the state as of an offset, and whatever records were appended after it in the same file.  That file
is immutable up to its durable size (compaction replaces it with a rename, appends only add to it), so it is
streamed as it lies on disk, by byte ranges: nothing is encoded, and neither side holds more than a chunk.

- :class:`BaseSource`, the leader's side, holds the segment open from the copy's start, so a compaction that
  replaces it meanwhile leaves the copy readable (the leader also holds off compacting while copies run).
- :class:`BaseReceiver`, the follower's side, writes the bytes to a staging file as they arrive and checks
  every committed batch on the way with the reader recovery uses (CRCs, commits, offsets, the header).  The
  follower's log is replaced only by a copy that checked out whole (:func:`~.base.adopt_base`); a staging file
  left by a crash ends in ``.seg.tmp``, which recovery deletes.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from ferrymq.storage.log.epochs import EpochHistory
from ferrymq.storage.log.format import CorruptSegment, claimed_header_size, decode_header
from ferrymq.storage.log.reading import ChunkedWalk, first_offset, open_segment
from ferrymq.storage.log.segments import TMP_SUFFIX, SegmentInfo, segment_path, write_all

COPY_CHUNK_BYTES = 1024 * 1024
"""What a follower asks for per read of a copy."""
MAX_COPY_READ = 4 * 1024 * 1024
"""The most a leader answers per read, whatever was asked."""
STAGED_COPY = f"copy{TMP_SUFFIX}"
"""The staging file's name in the follower's partition directory."""


class BaseSource:
    """The leader's first segment, open for reading its first ``size`` bytes (durable when the copy began)."""

    def __init__(self, copy: int, directory: Path, segment: SegmentInfo) -> None:
        self.copy = copy
        self.size = segment.size
        self._fd, header = open_segment(segment_path(directory, segment.index))
        if not header.is_base or header.first_offset != segment.first_offset:
            os.close(self._fd)
            raise CorruptSegment(f"segment {segment.index} is not the base the log starts with")
        self.offset = header.snapshot_offset
        """The offset the base's state is as of."""
        self.read_at = time.monotonic()
        """When the follower last read from it (a copy nobody reads is let go)."""
        self._reading = 0
        self._closing = False

    async def read(self, position: int, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` from ``position`` (none at or past the end), read in a thread."""
        self.read_at = time.monotonic()
        count = max(0, min(max_bytes, MAX_COPY_READ, self.size - position))
        if count == 0:
            return b""
        self._reading += 1
        try:
            data = await asyncio.to_thread(os.pread, self._fd, count, position)
        finally:
            self._reading -= 1
            if self._closing:
                self.close()
        if len(data) != count:
            raise OSError(f"segment copy: {len(data)} bytes read at {position} where {count} were durable")
        return data

    def close(self) -> None:
        """Let the file go, once no read is in flight (its descriptor must not be reused under one)."""
        self._closing = True
        if self._reading == 0 and self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class BaseReceiver:
    """A copy of a leader's first segment being received into ``directory``'s staging file.

    :meth:`add` (blocking: call it in a thread) writes each chunk and checks the committed batches it
    completes; the bytes of a batch not yet complete are all it keeps in memory.  :meth:`finish` says whether
    the copy is whole and intact, and makes it durable.
    """

    def __init__(self, directory: Path, offset: int, size: int) -> None:
        self.path = directory / STAGED_COPY
        self.offset = offset
        self.size = size
        self.received = 0
        self.held_most = 0
        """The most bytes kept in memory at once (of batches not yet complete)."""
        self._head = b""
        """The bytes received before the header was whole."""
        self._walk: ChunkedWalk | None = None
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)

    @property
    def end_offset(self) -> int:
        """The offset after the last record the copy holds (once finished)."""
        return self._walk.next_offset if self._walk is not None else self.offset + 1

    def add(self, data: bytes) -> None:
        if self.received + len(data) > self.size:
            raise CorruptSegment(f"{self.path}: more bytes than the {self.size} the copy was said to hold")
        write_all(self._fd, data)
        self.received += len(data)
        walk = self._walk
        if walk is None:
            head = self._head + data
            if len(head) < claimed_header_size(head):
                self._head = head
                return
            header = decode_header(head)
            if not header.is_base or header.snapshot_offset != self.offset:
                raise CorruptSegment(f"{self.path}: not a base of the state as of offset {self.offset}")
            self._head = b""
            walk = self._walk = ChunkedWalk(
                self.path, header, first_offset(self.path, header, None), EpochHistory(), header.size
            )
            data = head[header.size :]
        self.held_most = max(self.held_most, len(walk.pending) + len(data))
        for _ in walk.feed(data):
            pass

    def finish(self) -> None:
        """Check that every byte arrived and belongs to a committed batch, and sync the file."""
        walk = self._walk
        if walk is None or self.received != self.size or walk.pending:
            left = len(walk.pending) if walk is not None else self.received
            raise CorruptSegment(
                f"{self.path}: {self.received} of {self.size} bytes received, the last {left} not a committed batch"
            )
        os.fsync(self._fd)
        self._close()

    def discard(self) -> None:
        self._close()
        self.path.unlink(missing_ok=True)

    def _close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
