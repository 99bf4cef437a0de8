"""The leader's side of copying its first segment to followers too far behind for its log (COPY_BASE).

One copy per follower at a time, each the file as it was when that copy began (:class:`~ferrymq.storage.log.
base_copy.BaseSource`).  While any copy is held the leader does not compact: a new base would make the copy
stale before the follower could fetch the records after it.  A copy is let go when its follower fetches from
the log (it has installed the copy), starts another, goes ``idle_seconds`` without reading, or when the term
ends.
"""

from __future__ import annotations

import secrets
import time

from ferrymq.errors import SnapshotNeeded
from ferrymq.storage.log.base_copy import BaseSource
from ferrymq.storage.log.writer import LogWriter

COPY_IDLE_SECONDS = 30.0
"""A copy not read for this long is let go (its follower went away or started over)."""


class BaseCopies:
    def __init__(self, partition: int, wal: LogWriter, idle_seconds: float = COPY_IDLE_SECONDS) -> None:
        self.partition = partition
        self.wal = wal
        self.idle_seconds = idle_seconds
        self._copies: dict[str, BaseSource] = {}
        self.started = 0
        """Copies begun in this term."""
        self.bytes_read = 0

    @property
    def active(self) -> bool:
        """Whether any copy is held (compaction waits meanwhile)."""
        if self._copies:
            stale = time.monotonic() - self.idle_seconds
            for replica in [r for r, source in self._copies.items() if source.read_at < stale]:
                self._copies.pop(replica).close()
        return bool(self._copies)

    async def read(self, replica: str, copy: int, position: int, max_bytes: int) -> tuple[int, int, int, bytes]:
        """``(copy, offset, size, data)`` for follower ``replica``'s COPY_BASE: ``copy`` 0 begins a new copy."""
        if position < 0 or max_bytes < 1 or copy < 0:
            raise ValueError("a base copy is read from a position >= 0, at least one byte at a time")
        if copy == 0:
            self.let_go(replica)
            # Not while a compaction or truncation rewrites segments: the first one may be the file replaced.
            async with self.wal.segment_lock:
                source = BaseSource(secrets.randbits(62) + 1, self.wal.directory, self.wal.segments[0])
            self._copies[replica] = source
            self.started += 1
        else:
            held = self._copies.get(replica)
            if held is None or held.copy != copy:
                raise SnapshotNeeded(
                    f"Partition {self.partition}'s leader holds no copy {copy} for {replica}; start another."
                )
            source = held
        if position > source.size:
            raise ValueError(f"a base copy of {source.size} bytes read from byte {position}")
        data = await source.read(position, max_bytes)
        self.bytes_read += len(data)
        return source.copy, source.offset, source.size, data

    def fetched(self, replica: str) -> None:
        """``replica`` fetched from the log: any copy it held is installed or abandoned."""
        if replica in self._copies:
            self.let_go(replica)

    def let_go(self, replica: str) -> None:
        source = self._copies.pop(replica, None)
        if source is not None:
            source.close()

    def close(self) -> None:
        for source in self._copies.values():
            source.close()
        self._copies.clear()
