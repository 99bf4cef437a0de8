"""Sealed segments a checkpoint vouched for, checked against its CRC-32s after the start instead of before.

A start from a checkpoint reads the checkpoint and the log after it; the sealed segments before that are taken
on the checkpoint's word (``recover`` with ``Checkpointed.check_sealed`` off), so a start no longer reads the
whole log, which at ten million messages is 6.7 GB per replica.  Their bytes are checked here from
:data:`START_DELAY_SECONDS` after the replica serves, on the worker's background thread, at a quarter of a core at
most (:mod:`.background`).  Meanwhile nothing damaged is ever answered: every body read and every frame a follower
fetches is checked by its own frame CRC (``log.bodies``, ``replication.follower``).  What the check adds is
finding damage that no read touched yet, as the start used to.

Until a segment is checked, the CRC-32 the checkpoint recorded for it is what a later checkpoint records too
(``claims``): a checkpoint never vouches for bytes with a CRC-32 computed from bytes nobody checked, so a stop
before the check ends leaves the next start to check the same claim.

Damage found this way is handled as damage found at a start: the replica stops vouching (no checkpoint is
taken or written any more), the checkpoint is deleted, and the worker stops as after a log failure.  Its next
start walks the whole log, finds the damage with its range named, and the copy is repaired from the other
replicas or refused (:mod:`.damage`).  A segment compacted away meanwhile was walked, frame by frame, by the
compaction; one cut or replaced in place since the start is no longer what the checkpoint described, and a
difference there proves nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from ferrymq.storage.log.checkpoint import segment_files
from ferrymq.storage.log.format import CorruptSegment
from ferrymq.storage.log.recovery import Vouched
from ferrymq.storage.log.segments import crc_of, segment_path
from ferrymq.storage.log.writer import LogWriter
from ferrymq.storage.server.background import CPU_SHARE, in_background

log = logging.getLogger(__name__)

START_DELAY_SECONDS = 5.0
"""How long after the start the check waits: a start's first seconds have every worker load, replay and elect on
the same cores (at ten million messages, three workers' checks begun at once, a quarter of a core each, left a
loop waiting 111 ms for a CPU), and every read meanwhile is checked by its frame's CRC."""


class VouchedSegments:
    """One replica's segments still to be checked against its checkpoint (module docstring)."""

    def __init__(self, partition: int, directory: Path) -> None:
        self.partition = partition
        self.directory = directory
        self.doubted = False
        """A segment's bytes no longer had the CRC-32 its checkpoint recorded: nothing vouches for this log now."""
        self.checked_bytes = 0
        self._task: asyncio.Task[None] | None = None
        self._pending: tuple[LogWriter, list[Vouched], Callable[[CorruptSegment], Awaitable[None]]] | None = None

    @property
    def checking(self) -> bool:
        return self._task is not None and not self._task.done()

    def claims(self, unchecked: list[Vouched]) -> dict[tuple[int, int, int], int]:
        """The CRC-32 the checkpoint recorded for each of ``unchecked``, by ``(index, inode, size)`` as the
        replica keeps the CRC-32s of sealed segments for its checkpoints."""
        crcs = {index: crc for index, _, crc in unchecked}
        found = segment_files(self.directory, list(crcs))
        sizes = {index: size for index, size, _ in unchecked}
        return {key: crcs[key[0]] for key in found if key[2] == sizes[key[0]]}

    def check(
        self, wal: LogWriter, unchecked: list[Vouched], on_damage: Callable[[CorruptSegment], Awaitable[None]]
    ) -> None:
        """Check ``unchecked`` (segments of ``wal``'s log) in the background; ``on_damage`` is awaited with the
        first whose bytes differ from what the checkpoint recorded."""
        self.cancel()
        self._pending = (wal, unchecked, on_damage) if unchecked else None
        with contextlib.suppress(RuntimeError):  # opened before any loop runs: ``resume`` starts it
            asyncio.get_running_loop()
            self.resume()

    def resume(self) -> None:
        """Start the check ``check`` was given, if it waits for a running loop."""
        if self._pending is not None:
            wal, unchecked, on_damage = self._pending
            self._pending = None
            self._task = asyncio.get_running_loop().create_task(self._check(wal, unchecked, on_damage))
            self._task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        # A task nobody awaits would take its error with it: the segments it had not reached stay unchecked.
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("partition %d: the check of the sealed segments against the checkpoint stopped (%r); what it "
                      "had not reached is checked at the next start", self.partition, exc, exc_info=exc)

    async def _check(
        self, wal: LogWriter, unchecked: list[Vouched], on_damage: Callable[[CorruptSegment], Awaitable[None]]
    ) -> None:
        rewrites = wal.rewrites
        await asyncio.sleep(START_DELAY_SECONDS)
        started = time.monotonic()
        unreadable = 0
        for index, size, crc in unchecked:
            path = segment_path(self.directory, index)
            try:
                found = await in_background(crc_of, path, size, cpu_share=CPU_SHARE)
            except FileNotFoundError:
                continue
            except OSError as exc:
                # A read error is the disk's to report, not a difference in bytes: the frames a read touches are
                # still checked by their own CRCs, and the next start checks this segment again.
                unreadable += 1
                log.warning("partition %d: %s could not be read to check it against the checkpoint (%s); it is "
                            "checked again at the next start", self.partition, path.name, exc)
                continue
            if found == crc:
                self.checked_bytes += size
                continue
            if wal.closed or wal.rewrites != rewrites:
                log.info("partition %d: %s was rewritten since the start; its bytes were not checked against the "
                         "checkpoint", self.partition, path.name)
                continue
            self.doubted = True
            await on_damage(CorruptSegment(
                f"{path}: its first {size} bytes no longer have the CRC-32 the checkpoint recorded for them "
                f"({crc:#010x}, found {'a shorter file' if found is None else f'{found:#010x}'}); the checkpoint "
                "is deleted so that the next start walks every segment and finds the damaged range"
            ))
            return
        log.info("partition %d: %d sealed segments (%d bytes) checked against the checkpoint's CRC-32s after the "
                 "start, in %.1f s%s", self.partition, len(unchecked) - unreadable, self.checked_bytes,
                 time.monotonic() - started, f"; {unreadable} could not be read" if unreadable else "")

    def cancel(self) -> None:
        self._pending = None
        if self._task is not None:
            self._task.cancel()

    async def close(self) -> None:
        self._pending = None
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
