"""Group commit: many appends, one write and one ``fdatasync`` in an I/O thread, then all of them acknowledged.

``append`` is synchronous and cheap: it encodes the record into the pending batch and returns the log
position just past it.  While one batch is being written and synced in the I/O thread, the event loop keeps
accepting requests and appending; when the sync returns, the next batch (everything appended meanwhile) goes
at once, and the callbacks of every position now durable run in order.  Positions count bytes appended since
the writer was opened; they only order events and never leave the process.

Segments roll when the active one passes ``segment_bytes`` (or when compaction asks), always at a batch
boundary, so a record never spans two files and a sealed segment is entirely durable before the next one exists.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from storage_workers.engine.records import Record
from storage_workers.log import records as codec
from storage_workers.log.format import BASE, encode_record
from storage_workers.log.segments import SegmentInfo, create_segment, open_for_append, write_all

log = logging.getLogger(__name__)

DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024


class LogFailed(Exception):
    """A write or sync failed: what the log holds on disk is no longer known, so nothing more is acknowledged."""


class LogWriter:
    def __init__(
        self,
        directory: Path,
        segments: list[SegmentInfo],
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        max_batch: int = 1024,
        on_fatal: Callable[[BaseException], None] | None = None,
    ) -> None:
        """Continue the log in ``directory`` whose remaining segments :func:`recover` returned."""
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.max_batch = max(1, max_batch)
        self.on_fatal = on_fatal
        self.on_commit: Callable[[], None] | None = None
        """Called in the event loop after each batch is durable (compaction checks hang here)."""
        self.segments: list[SegmentInfo] = list(segments)
        if not self.segments:
            self._fd = create_segment(directory, 1, BASE)
            self.segments.append(SegmentInfo(1, os.fstat(self._fd).st_size, BASE))
        else:
            self._fd = open_for_append(directory, self.segments[-1].index)
        # Touched only by the I/O thread once running:
        self._io_index = self.segments[-1].index
        self._io_size = self.segments[-1].size
        self._roll_requested = False

        self._loop: asyncio.AbstractEventLoop | None = None
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ferrymq-log")
        self._pending: list[bytes] = []
        self._end = 0
        self._handed = 0
        self._durable = 0
        self._committing = False
        self._scheduled = False
        self._waiters: deque[tuple[int, Callable[[Any], None], Any]] = deque()
        self.failed: BaseException | None = None
        self.closed = False
        self.batches = 0
        """Batches written and synced so far (each one fdatasync)."""

    # --- positions ---------------------------------------------------------------------------------

    @property
    def end(self) -> int:
        """Position just past the last record appended."""
        return self._end

    @property
    def durable(self) -> int:
        """Position up to which everything is on disk."""
        return self._durable

    @property
    def total_bytes(self) -> int:
        """Size of the log on disk once the pending records are written."""
        return sum(s.size for s in self.segments) + (self._end - self._handed)

    def sealed_segments(self) -> list[SegmentInfo]:
        return self.segments[:-1]

    # --- appending ---------------------------------------------------------------------------------

    def append(self, record: Record) -> int:
        if self.failed is not None or self.closed:
            raise LogFailed("the log is closed" if self.failed is None else f"the log failed: {self.failed}")
        frame = encode_record(codec.encode(record))
        self._pending.append(frame)
        self._end += len(frame)
        if not self._scheduled and not self._committing:
            self._scheduled = True
            if self._loop is None:
                self._loop = asyncio.get_running_loop()
            self._loop.call_soon(self._start_commit)
        return self._end

    def when_durable(self, position: int, callback: Callable[[Any], None], arg: Any) -> None:
        """Call ``callback(arg)`` once everything up to ``position`` is on disk (now, if it already is)."""
        if position <= self._durable:
            callback(arg)
        else:
            self._waiters.append((position, callback, arg))

    async def wait_durable(self, position: int | None = None) -> None:
        position = self._end if position is None else position
        if position <= self._durable:
            return
        if self.failed is not None:
            raise LogFailed(str(self.failed))
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((position, _resolve, fut))
        await fut

    async def flush(self) -> None:
        """Wait until everything appended so far is durable."""
        await self.wait_durable(self._end)

    def request_roll(self) -> None:
        """Start a new segment after the next batch, so that everything before it can be compacted."""
        self._roll_requested = True

    # --- the commit cycle ------------------------------------------------------------------------------

    def _start_commit(self) -> None:
        self._scheduled = False
        if self._committing or not self._pending or self.failed is not None:
            return
        pending = self._pending
        if len(pending) > self.max_batch:
            batch, self._pending = pending[: self.max_batch], pending[self.max_batch :]
        else:
            batch, self._pending = pending, []
        data = batch[0] if len(batch) == 1 else b"".join(batch)
        self._handed += len(data)
        self._committing = True
        assert self._loop is not None
        fut = self._loop.run_in_executor(self._io, self._write_and_sync, data)
        fut.add_done_callback(functools.partial(self._committed, target=self._handed, size=len(data)))

    def _write_and_sync(self, data: bytes) -> SegmentInfo | None:
        """In the I/O thread: append, sync, and roll to a new segment when due; returns the new segment."""
        write_all(self._fd, data)
        os.fdatasync(self._fd)
        self._io_size += len(data)
        if self._io_size < self.segment_bytes and not self._roll_requested:
            return None
        self._roll_requested = False
        index = self._io_index + 1
        fd = create_segment(self.directory, index)
        os.close(self._fd)
        self._fd, self._io_index = fd, index
        self._io_size = os.fstat(fd).st_size
        return SegmentInfo(index, self._io_size, 0)

    def _committed(self, fut: asyncio.Future, *, target: int, size: int) -> None:
        self._committing = False
        exc = fut.exception()
        if exc is not None:
            self._fail(exc)
            return
        self.batches += 1
        self.segments[-1].size += size
        rolled = fut.result()
        if rolled is not None:
            self.segments.append(rolled)
        self._durable = target
        if self._pending:
            self._start_commit()
        waiters = self._waiters
        while waiters and waiters[0][0] <= target:
            _, callback, arg = waiters.popleft()
            try:
                callback(arg)
            except Exception:
                log.exception("durability callback failed")
        if self.on_commit is not None:
            self.on_commit()

    def _fail(self, exc: BaseException) -> None:
        log.critical("log write failed; no further request can be acknowledged: %s", exc)
        self.failed = exc
        waiters, self._waiters = self._waiters, deque()
        for _, callback, arg in waiters:
            if callback is _resolve and not arg.done():
                arg.set_exception(LogFailed(str(exc)))
        if self.on_fatal is not None:
            self.on_fatal(exc)

    # --- after compaction and at the end ----------------------------------------------------------------

    def replace_sealed(self, indexes: list[int], base: SegmentInfo) -> None:
        """Record that sealed segments ``indexes`` were compacted into ``base`` (the last of them)."""
        gone = set(indexes)
        kept = [s for s in self.segments if s.index not in gone]
        self.segments = sorted([*kept, base], key=lambda s: s.index)

    async def close(self) -> None:
        """Make everything appended durable, then close the file."""
        if self.closed:
            return
        if self.failed is None:
            with contextlib.suppress(LogFailed):
                await self.flush()
        self.closed = True
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._io, os.close, self._fd)
        self._io.shutdown(wait=True)


def _resolve(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)
