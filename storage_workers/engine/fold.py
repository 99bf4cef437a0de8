"""Compaction's fold without the messages that came and went within the records it folds.

Compaction replays sealed segments into a fresh state and snapshots it (``ferrymq.storage.log.compaction``).  On a
queue used steadily most messages are sent and deleted within those segments, and inserting each into the message
table only to remove it again was most of what a fold cost (about 9 µs a message, on every replica).  So a first
pass over the segments (``ferrymq.storage.log.removals``) collects what DELETED and EXPIRED records remove, and the
fold applies a SENT item among them as sent and removed: the sequence numbers, the queue's send timeline and, once
its removal comes, the removed id a resend must still find (``QueueState.gone``), never a row.

The snapshot is the one a full replay gives, record for record.  What a removed message could still change while
it was held is why some queues are replayed in full (:attr:`Removals.kept`):

- priority credits are reset when a removal empties the queue, so a queue with credits (from the base, or a
  CREDITS record) must empty when a full replay's would;
- a move task counts the messages it moves (TASK_MOVED), and one its record names must be there to be counted;
- STORED records hand messages over into a queue, and can make a queue that holds nothing a FIFO queue.

A message sent to a queue that is dropped or purged before its removal is left out all the same, as either would
have dropped it with no removed id kept.  RECEIVED and VISIBILITY records that name a message left out find no row,
as they find none once it is removed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ferrymq.storage.engine.messages import QueueState
from ferrymq.storage.engine.records import (
    BATCH,
    CREDITS,
    DELETED,
    DROPPED,
    EXPIRED,
    PURGED,
    SENT,
    STORED,
    TASK_MOVED,
    TASK_STARTED,
    TASK_STATUS,
    Record,
)
from ferrymq.storage.engine.state import PartitionState

NOTED_KINDS = frozenset({DELETED, EXPIRED, BATCH, CREDITS, STORED, TASK_STARTED, TASK_MOVED, TASK_STATUS})
"""The kinds of record :meth:`Removals.note` reads anything from (and the first SENT): a first pass decodes no
other."""
_KEEPING_KINDS = frozenset({CREDITS, STORED, TASK_STARTED, TASK_MOVED, TASK_STATUS})


class SeqBits:
    """Sequence numbers from ``first`` on, one bit each.  A fold's removals name about as many numbers as the
    segments it folds sent, dense per partition: an eighth of a byte each, where a set of ints takes about 60 (a
    few GB of log is millions of them)."""

    __slots__ = ("bits", "first")

    def __init__(self, first: int) -> None:
        self.first = first
        self.bits = bytearray()

    def add(self, seq: int) -> None:
        at = seq - self.first
        if at < 0:
            return
        byte = at >> 3
        if byte >= len(self.bits):
            self.bits.extend(bytes(max(byte + 1 - len(self.bits), len(self.bits))))
        self.bits[byte] |= 1 << (at & 7)

    def __contains__(self, seq: int) -> bool:
        at = seq - self.first
        byte = at >> 3
        return 0 <= byte < len(self.bits) and self.bits[byte] >> (at & 7) & 1 == 1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SeqBits) and self.first == other.first and self.bits.rstrip(b"\0") == \
            other.bits.rstrip(b"\0")

    def count(self) -> int:
        return sum(bin(b).count("1") for b in self.bits)


@dataclass
class Removals:
    """What the records to fold remove, and which queues must be replayed in full (module docstring)."""

    seqs: SeqBits | None = None
    """The sequence numbers DELETED and EXPIRED records name, from the first message the records send on (a
    record cannot remove a message before it is sent, so none named earlier is one the fold could leave out);
    None until a SENT record is seen."""
    kept: set[str] = field(default_factory=set)

    def note(self, record: Record) -> None:
        kind = record[0]
        if kind in (DELETED, EXPIRED):
            if self.seqs is not None:
                add = self.seqs.add
                for seq in record[2]:
                    add(seq)
        elif kind == SENT:
            if self.seqs is None:
                self.seqs = SeqBits(record[3])
        elif kind == BATCH:
            for inner in record[1]:
                self.note(inner)
        elif kind in _KEEPING_KINDS:
            self.kept.add(record[1])


class LeftOutMismatch(Exception):
    """A message the fold left out was never removed in its own queue: the fold is not the full replay's state."""


class Folding:
    """Applies records to a fresh :class:`PartitionState`, leaving out the messages :class:`Removals` says are
    removed later.  The state it makes is a plain one: compaction writes it with its base as a checkpoint, which a
    worker serves from."""

    def __init__(self, removals: Removals) -> None:
        self.state = PartitionState()
        self.removals = removals
        self.unstored: dict[str, dict[int, tuple[Any, int]]] = {}
        """Queue id -> seq -> (message id, sent_ts) of each message left out, until its removal is applied."""

    def apply(self, record: Record) -> None:
        state, kind = self.state, record[0]
        if kind == SENT:
            queue_id = record[1]
            removed = self.removals.seqs
            if removed is not None and queue_id not in self.removals.kept:
                q = state.queue(queue_id)
                if type(q) is QueueState and q.credits is None:
                    state.apply_sent(record, removed, self.unstored.setdefault(queue_id, {}))
                    return
        elif kind in (DELETED, EXPIRED):
            unstored = self.unstored.get(record[1])
            if unstored and type(state.queues.get(record[1])) is QueueState:
                state.apply_removed(record, unstored)
                return
        elif kind == BATCH:
            for inner in record[1]:
                self.apply(inner)
            return
        elif kind in (PURGED, DROPPED):
            self.unstored.pop(record[1], None)
        state.apply(record)


def folded(records: Iterable[Record], removals: Removals) -> PartitionState:
    """The state ``records`` make, the messages ``removals`` names left out (module docstring).  Raises
    :class:`LeftOutMismatch` when a message left out was not removed in its own queue by the end (the removals
    are the partition's, and the engine removes a message only in the queue it was sent to: a log where that does
    not hold is folded again with nothing left out)."""
    folding = Folding(removals)
    apply = folding.apply
    for record in records:
        apply(record)
    left = sum(len(pending) for pending in folding.unstored.values())
    if left:
        raise LeftOutMismatch(f"{left} messages left out of the fold were not removed in their queues")
    return folding.state
