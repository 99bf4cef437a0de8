"""Message bodies kept in the log, not in memory: where each one lies, and reading it back.

The log holds every body already (the SENT, STORED or RESTORED record that added the message), so a partition's
message table (:class:`~ferrymq.storage.engine.table.MessageTable`) keeps, per message, only where that record's
payload lies and which of its items is the message:

    loc   q  file number << 40 | byte position of the record's payload in that file
    span  I  the payload's length
    item  I  the message's place among the items the record adds (:func:`.body_refs.body_items`)

A message gets its place in three ways:

- **recovery** reads each frame where it lies (``recover(..., located=store.located)``);
- **appends** (a leader's records, a follower's replicated ones): applying the record adds the messages, the
  append gives its offset (:meth:`BodyStore.keyed`), and once the batch holding it is durable the writer says
  where it lies (``LogWriter(on_placed=store.placed)``).  Until then the body is kept in memory (``_pending``): a
  body is never read back from bytes not yet written;
- **compaction** writes the live messages into a new base segment and says where each went
  (``Compactor(relocate=store.relocate)``); the rows move there before the folded files are let go.

Files are numbered by the store, not by segment index: a compaction writes its base under the index of the last
segment it folds, so for a while one index names two files, the old one (still open, unlinked) that rows not yet
moved point into and the new one.  A file stays open from the first message placed in it until a compaction
moved every message out of it (or the store closes), so a segment deleted meanwhile is still read.

A read checks the frame's checksum, as recovery does, and that the item it finds names the row's message id: a
body is never answered for the wrong message, nor damaged.  One that cannot be read fails its request
(:class:`BodyUnreadable`); the message stays where it is.
Recent bodies stay in the worker's :class:`~.body_cache.BodyCache`.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ferrymq.storage.engine.table import F_MD5
from ferrymq.storage.log import records as codec
from ferrymq.storage.log.body_cache import BodyCache
from ferrymq.storage.log.body_refs import body_items
from ferrymq.storage.log.format import (
    FRAME_OVERHEAD,
    FRAME_OVERHEAD_V1,
    VERSION_1,
    frame_at,
)
from ferrymq.storage.log.reading import open_segment
from ferrymq.storage.log.segments import segment_path

if TYPE_CHECKING:
    from ferrymq.storage.engine.table import MessageTable
    from ferrymq.storage.log.compaction import Placement

log = logging.getLogger(__name__)

POSITION_BITS = 40
_POSITION_MASK = (1 << POSITION_BITS) - 1
_OWNER_SHIFT = 32
"""A row's cache key is its store's owner number above its slot (slots stay below 2**32)."""
RELOCATE_CHUNK = 20000
"""Messages moved to a new base per event-loop turn (about 10 ms)."""
_MISSING = object()


UNPLACED = frozenset({0})
"""The file numbers of rows not placed yet (``loc`` 0: stored files are numbered from 1)."""


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)


def place(
    table: MessageTable,
    number: int,
    position: int,
    length: int,
    seqs: Sequence[int],
    *,
    only_from: Collection[int] | None = None,
) -> list[int]:
    """Point the rows of messages ``seqs`` (item by item) to the record at ``position`` in file ``number``:
    those in a file of ``only_from`` only, when given; returns the rows it pointed."""
    slot_of, locs, spans, items = table.slot, table.loc, table.span, table.item
    loc = number << POSITION_BITS | position
    pointed = []
    for n, seq in enumerate(seqs):
        slot = slot_of(seq)
        if slot >= 0 and (only_from is None or locs[slot] >> POSITION_BITS in only_from):
            locs[slot] = loc
            spans[slot] = length
            items[slot] = n
            pointed.append(slot)
    return pointed


class BodyUnreadable(Exception):
    """A message's body could not be read back from the log (a bug or damage: never answered as a wrong body)."""


class BodyStore:
    """Where the bodies of one partition's messages lie in its log, and reading them back (module docstring)."""

    def __init__(
        self, table: MessageTable, directory: Path, cache: BodyCache, caching: Callable[[], bool] = lambda: True
    ) -> None:
        self.table = table
        self.directory = directory
        self.cache = cache
        self.caching = caching
        """Whether bodies made durable go into the cache: only where they are read (a leader's).  A follower,
        catching up or keeping up, would only push out the leader's bodies, for about a sixth of its CPU
        while it catches up; after a failover the new leader reads its first bodies from disk."""
        self.reads = 0
        """Payloads read from disk so far."""
        self.closed = False
        self.applied_through = 0
        """The offset of the last record the state applied (what a checkpoint is as of)."""
        self.recovering = False
        """While recovery replays the log: bodies are neither kept in memory nor cached (each is placed right
        after its record is applied, and caching a whole log's bodies would only churn the cache)."""
        self._owner = cache.owner() << _OWNER_SHIFT
        self._pending: dict[int, Any] = {}
        """Slot -> body, for messages not yet placed on disk."""
        self._unkeyed: list[int] = []
        """The messages the record being applied added, in item order."""
        self._unplaced: deque[tuple[int, list[int]]] = deque()
        """``(offset, messages)`` of records appended but not yet durable, in offset order."""
        self._files: dict[int, tuple[int, int]] = {}
        """File number -> its open descriptor and its format version."""
        self._numbers: dict[int, int] = {}
        """Segment index -> the file number of the segment now under that index."""
        self._next_number = 1
        """0 is nowhere: a ``loc`` of 0 means not placed yet."""
        self._last: tuple[int, list[tuple[Any, int]]] | None = None
        """The payload read last and its items: a receive reads a batch's messages one after the other."""
        table.bodies = self

    # --- the table's side -------------------------------------------------------------------------------

    def added(self, seq: int, slot: int, body: Any, md5: str | None) -> None:
        """Message ``seq`` (row ``slot``) was added by the record being applied; ``md5``: its body MD5, when the
        table keeps it with the body (a row flagged F_MD5)."""
        if not self.recovering:
            self._pending[slot] = body if md5 is None else (body, md5)
        self._unkeyed.append(seq)

    def body(self, slot: int) -> Any:
        kept = self._kept(slot)
        return kept[0] if self.table.flags[slot] & F_MD5 else kept

    def md5(self, slot: int) -> str:
        """The body MD5 of a row flagged F_MD5."""
        return self._kept(slot)[1]

    def _kept(self, slot: int) -> Any:
        """The body of row ``slot``, or the pair of its body and MD5 (F_MD5): from memory, else from disk."""
        kept = self._pending.get(slot, _MISSING)
        if kept is not _MISSING:
            return kept
        key = self._owner | slot
        kept = self.cache.get(key)
        if kept is None:
            kept = self._read(slot)
            self.cache.put(key, kept)
        return kept

    def forget(self, slot: int) -> None:
        """The message in row ``slot`` is gone (the row may be reused)."""
        if self._pending:
            self._pending.pop(slot, None)
        self.cache.drop(self._owner | slot)

    # --- the log's side ---------------------------------------------------------------------------------

    def keyed(self, offset: int) -> None:
        """The record just applied was appended at ``offset``."""
        self.applied_through = offset
        if self._unkeyed:
            self._unplaced.append((offset, self._unkeyed))
            self._unkeyed = []

    def located(self, segment: int, position: int, length: int) -> None:
        """The record just applied lies at ``position`` in segment ``segment`` (recovery)."""
        if self._unkeyed:
            self._place(self._unkeyed, self._number(segment), position, length)
            self._unkeyed = []

    def placed(self, segment: int, position: int, batch: list[tuple[bytes, int, int]]) -> None:
        """A batch of frames starting at ``position`` in segment ``segment`` is durable (``LogWriter.on_placed``)."""
        unplaced = self._unplaced
        if not unplaced:
            return
        number = 0
        for frame, _, offset in batch:
            while unplaced and unplaced[0][0] < offset:
                # Appended but never placed: its bodies stay in memory, still answered right.
                stray, _ = unplaced.popleft()
                log.error("%s: the record at offset %d was not placed in the log", self.directory, stray)
            if not unplaced:
                return
            if unplaced[0][0] == offset:
                if not number:
                    number = self._number(segment)
                self._place(unplaced.popleft()[1], number, position + FRAME_OVERHEAD, len(frame) - FRAME_OVERHEAD)
            position += len(frame)

    async def relocate(self, folded: list[int], base: int, placed: list[Placement]) -> None:
        """A compaction folded segments ``folded`` into base segment ``base``: move each message still held
        there to where the base keeps it, a chunk per event-loop turn, then let the folded files go."""
        old = {self._numbers.pop(index) for index in folded if index in self._numbers}
        number = self._number(base)
        moved = 0
        for placement in placed:
            place(self.table, number, *placement, only_from=old)
            moved += len(placement.seqs)
            if moved >= RELOCATE_CHUNK:
                moved = 0
                await asyncio.sleep(0)
        self._last = None
        fds = [self._files.pop(file)[0] for file in old]
        # Off the loop: the folded files are unlinked, so the last close of each has the file system free its
        # blocks (found holding a loop 97 ms asleep for two segments of 64 MiB).
        await asyncio.to_thread(_close_all, fds)

    def files(self, *, unplaced_ok: bool = False) -> dict[int, int] | None:
        """File number -> segment index of every file messages are placed in, for a checkpoint; None while a
        message is not placed yet (unless ``unplaced_ok``: then only while a record being applied has no offset
        yet), or a compaction is moving messages out of files no segment index names."""
        if self._unkeyed or (not unplaced_ok and (self._pending or self._unplaced)):
            return None
        named = {number: segment for segment, number in self._numbers.items()}
        return named if set(self._files) <= set(named) else None

    def unplaced(self) -> list[tuple[int, list[int]]]:
        """``(offset, message seqs)`` of the records appended but not yet durable, for a checkpoint."""
        return [(offset, list(seqs)) for offset, seqs in self._unplaced]

    def adopt(self, files: dict[int, int], unplaced: list[tuple[int, list[int]]] | None = None) -> None:
        """Take the file numbers a checkpoint's rows were placed under (before anything else is placed), and the
        records whose messages it left unplaced (placed by :meth:`passed` as recovery walks past them)."""
        for number, segment in sorted(files.items()):
            self._open(number, segment)
        self._next_number = max(files, default=0) + 1
        self._unplaced.extend(unplaced or ())

    def passed(self, offset: int, segment: int, position: int, length: int) -> None:
        """Recovery walked past the record at ``offset``, which lies at ``position`` in segment ``segment``."""
        unplaced = self._unplaced
        if unplaced and unplaced[0][0] == offset:
            self._place(unplaced.popleft()[1], self._number(segment), position, length)

    @property
    def all_placed(self) -> bool:
        return not self._unplaced

    def close(self) -> None:
        self.closed = True
        self._last = None
        _close_all([fd for fd, _ in self._files.values()])
        self._files.clear()
        self._numbers.clear()

    # --- inside --------------------------------------------------------------------------------------------

    def _number(self, segment: int) -> int:
        number = self._numbers.get(segment)
        if number is None:
            number = self._next_number
            self._open(number, segment)
            self._next_number += 1
        return number

    def _open(self, number: int, segment: int) -> None:
        fd, header = open_segment(segment_path(self.directory, segment))
        self._files[number] = (fd, header.version)
        self._numbers[segment] = number

    def _place(self, seqs: list[int], number: int, position: int, length: int) -> None:
        # Rows removed meanwhile are not found (or hold another message by now, placed or pending on its own).
        pending = self._pending
        pointed = place(self.table, number, position, length, seqs, only_from=UNPLACED)
        if not pending:
            return
        if not self.caching():
            for slot in pointed:
                pending.pop(slot, None)
            return
        cache, owner = self.cache, self._owner
        for slot in pointed:
            kept = pending.pop(slot, None)
            if kept is not None:
                cache.put(owner | slot, kept)

    def _read(self, slot: int) -> Any:
        table = self.table
        loc = table.loc[slot]
        if self.closed:
            raise BodyUnreadable(f"{self.directory}: the partition's log was closed")
        if not loc:
            raise BodyUnreadable(f"{self.directory}: a message (row {slot}) has no body in memory and none on disk")
        last = self._last
        if last is not None and last[0] == loc:
            entries = last[1]
        else:
            file = self._files.get(loc >> POSITION_BITS)
            if file is None:
                raise BodyUnreadable(f"{self.directory}: a message (row {slot}) names a log file no longer kept")
            fd, version = file
            # The frame's head is read with the payload, so that its checksum is checked as recovery checks it.
            head = FRAME_OVERHEAD_V1 if version == VERSION_1 else FRAME_OVERHEAD
            length = table.span[slot]
            position = loc & _POSITION_MASK
            data = os.pread(fd, head + length, position - head)
            self.reads += 1
            frame = frame_at(memoryview(data), 0, version)
            try:
                if frame is None or len(frame.payload) != length:
                    raise ValueError("no intact frame there")
                entries = body_items(codec.decode(frame.payload))
            except Exception as exc:
                raise BodyUnreadable(
                    f"{self.directory}: the record at byte {position} of log file {loc >> POSITION_BITS} cannot be "
                    f"read back: {exc}"
                ) from None
            self._last = (loc, entries)
        n = table.item[slot]
        message_id = table.message_id(slot)
        if n >= len(entries) or entries[n][0][entries[n][1] - 1] != message_id:
            raise BodyUnreadable(f"{self.directory}: the log does not hold message {message_id} where it was placed")
        item, at = entries[n]
        # The MD5 follows the body and its attributes in every item kind (records.py).
        return (item[at], item[at + 2]) if table.flags[slot] & F_MD5 else item[at]
