"""Compaction: sealed segments replaced by one base segment holding only the live state they add up to.

An always-busy queue writes SENT, RECEIVED and DELETED records forever while its live state stays small, so
the log is compacted when it is much larger than the live state:

1. the sealed segments ``[first .. last]`` (the active segment keeps taking appends) are read and folded into
   the state they describe, by replaying them into a fresh engine, in a thread, off the event loop;
2. that state is written as records (``SEQUENCE``, ``RESTORED``) to ``<last>.seg.tmp`` with the ``BASE``
   flag, and fsynced;
3. the file is renamed over segment ``last`` (atomic) and the directory fsynced: from here on recovery
   starts at ``last`` and ignores everything before it;
4. segments ``first .. last-1`` are deleted.

A crash before 3 leaves a ``.tmp`` that recovery deletes; a crash between 3 and 4 leaves obsolete segments
that recovery deletes.  Either way the log replays to the same state.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from pathlib import Path

from storage_workers.engine.records import Record
from storage_workers.log import records as codec
from storage_workers.log.format import BASE, encode_header, encode_record
from storage_workers.log.segments import (
    TMP_SUFFIX,
    SegmentInfo,
    fsync_dir,
    read_records,
    segment_path,
)
from storage_workers.log.writer import LogWriter

log = logging.getLogger(__name__)

Fold = Callable[[Iterator[Record]], Iterable[Record]]
"""Turns a log's records into records that rebuild the same state from nothing."""


class CompactionCancelled(Exception):
    pass


def compact_segments(
    directory: Path, indexes: list[int], fold: Fold, cancelled: threading.Event | None = None
) -> SegmentInfo:
    """Replace the sealed segments ``indexes`` (consecutive, starting at the base) by one base segment."""
    last = indexes[-1]
    records = _watch(chain.from_iterable(read_records(segment_path(directory, i)) for i in indexes), cancelled)
    tmp = directory / f"{last:020d}{TMP_SUFFIX}"
    size = 0
    try:
        with open(tmp, "wb", buffering=1024 * 1024) as f:
            header = encode_header(BASE)
            f.write(header)
            size = len(header)
            for record in _watch(fold(records), cancelled):
                frame = encode_record(codec.encode(record))
                f.write(frame)
                size += len(frame)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, segment_path(directory, last))
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(directory)
    for index in indexes[:-1]:
        segment_path(directory, index).unlink()
    fsync_dir(directory)
    return SegmentInfo(last, size, BASE)


def _watch(records: Iterable[Record], cancelled: threading.Event | None) -> Iterator[Record]:
    for n, record in enumerate(records):
        if cancelled is not None and n % 1024 == 0 and cancelled.is_set():
            raise CompactionCancelled()
        yield record


class Compactor:
    """Decides when to compact a writer's log and runs compaction in a thread, one at a time.

    The log is compacted once it is at least ``min_bytes`` and more than ``ratio`` times the live state
    (``live_bytes()``).  Call :meth:`check` after each commit (``LogWriter.on_commit``).
    """

    def __init__(
        self,
        writer: LogWriter,
        fold: Fold,
        live_bytes: Callable[[], int],
        *,
        min_bytes: int = 128 * 1024 * 1024,
        ratio: float = 4.0,
    ) -> None:
        self.writer = writer
        self.fold = fold
        self.live_bytes = live_bytes
        self.min_bytes = min_bytes
        self.ratio = ratio
        self.runs = 0
        self._task: asyncio.Task[None] | None = None
        self._cancelled = threading.Event()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def check(self) -> None:
        if self.running or self.writer.closed:
            return
        total = self.writer.total_bytes
        if total < self.min_bytes or total < self.ratio * self.live_bytes():
            return
        sealed = self.writer.sealed_segments()
        if not sealed or (len(sealed) == 1 and sealed[0].is_base):
            # Everything worth dropping is in the active segment: seal it first.
            self.writer.request_roll()
            return
        self._task = asyncio.get_running_loop().create_task(self._run([s.index for s in sealed]))

    async def _run(self, indexes: list[int]) -> None:
        directory = self.writer.directory
        try:
            base = await asyncio.to_thread(compact_segments, directory, indexes, self.fold, self._cancelled)
        except CompactionCancelled:
            return
        except Exception:
            log.exception("compaction of segments %s..%s failed", indexes[0], indexes[-1])
            return
        self.writer.replace_sealed(indexes, base)
        self.runs += 1
        log.info("compacted segments %d..%d into %d bytes", indexes[0], indexes[-1], base.size)

    async def close(self) -> None:
        """Abandon a running compaction (the log stays as it was) and wait for its thread to stop."""
        self._cancelled.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
