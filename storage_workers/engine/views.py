"""Views of a queue's rows in its partition's :class:`~.table.MessageTable`, made on demand.

A :class:`Row` is what a message object used to be, for the few messages a request touches (a receive takes at
most ten): the decide-and-emit code reads ``m.seq``, ``m.receive_count``, ``m.body`` ... and the record
handlers set ``m.state`` or ``m.attempt`` as before, while the fields live in the table's columns.  A view costs
what it is used for, never a byte per stored message.  :class:`Messages` is ``QueueState.msgs``: the queue's
live messages as a read-only mapping from sequence number to :class:`Row`, in send order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ferrymq.storage.engine.messages import QueueState


class Row:
    __slots__ = ("q", "seq", "slot", "t")

    def __init__(self, q: QueueState, seq: int, slot: int) -> None:
        self.q = q
        self.t = q.table
        self.seq = seq
        self.slot = slot

    @property
    def id(self) -> Any:
        return self.t.message_id(self.slot)

    @property
    def body(self) -> Any:
        return self.t.body(self.slot)

    @property
    def attrs(self) -> Any:
        return self.t.attrs(self.slot)

    @property
    def md5_body(self) -> Any:
        return self.t.md5_body(self.slot)

    @property
    def md5_attrs(self) -> Any:
        return self.t.md5_attrs(self.slot)

    @property
    def system(self) -> Any:
        return self.t.system_of(self.slot)

    @property
    def group(self) -> str | None:
        return self.t.group_of(self.slot)

    @property
    def dedup_id(self) -> Any:
        return self.t.dedup_id(self.slot)

    @property
    def sent_ts(self) -> int:
        return self.t.sent[self.slot]

    @property
    def size(self) -> int:
        return self.t.size[self.slot]

    @property
    def level(self) -> int:
        return self.t.level[self.slot]

    @property
    def visible_at(self) -> int:
        return self.t.visible[self.slot]

    @visible_at.setter
    def visible_at(self, value: int) -> None:
        self.t.visible[self.slot] = value

    @property
    def state(self) -> int:
        return self.t.state[self.slot]

    @state.setter
    def state(self, value: int) -> None:
        self.t.state[self.slot] = value

    @property
    def token(self) -> int:
        return self.t.token[self.slot]

    @property
    def receive_count(self) -> int:
        return self.t.receives[self.slot]

    @receive_count.setter
    def receive_count(self, value: int) -> None:
        self.t.receives[self.slot] = value

    @property
    def first_receive_ts(self) -> int:
        return self.t.first_receive[self.slot]

    @first_receive_ts.setter
    def first_receive_ts(self, value: int) -> None:
        self.t.first_receive[self.slot] = value

    @property
    def attempt(self) -> str | None:
        """The ReceiveRequestAttemptId of the receive that holds this message, while that receive may be
        replayed (FIFO queues)."""
        attempts = self.q.attempt_of
        return attempts.get(self.seq) if attempts else None

    @attempt.setter
    def attempt(self, value: str | None) -> None:
        attempts = self.q.attempt_of
        assert attempts is not None, "only FIFO messages belong to receive attempts"
        if value is None:
            attempts.pop(self.seq, None)
        else:
            attempts[self.seq] = value

    def as_restored(self) -> tuple:
        """The fields a RESTORED record carries (FIFO messages add group, dedup id and attempt)."""
        t, slot = self.t, self.slot
        message_id, body, attrs, md5_body, md5_attrs, system, dedup_id = t.fields(slot)
        fields = (
            self.seq, message_id, body, attrs, md5_body, md5_attrs, system, t.sent[slot], t.visible[slot],
            t.receives[slot], t.first_receive[slot],
        )
        group = t.group_of(slot)
        if group is None:
            return fields
        return (*fields, group, dedup_id, self.attempt)

    def __repr__(self) -> str:
        return f"Row(seq={self.seq}, state={self.state}, visible_at={self.visible_at})"


class Messages:
    """A queue's live messages by sequence number, in send order (a read-only view)."""

    __slots__ = ("number", "q", "table")

    def __init__(self, q: QueueState) -> None:
        self.q = q
        self.table = q.table
        self.number = q.number

    def slot(self, seq: int) -> int:
        """The row of ``seq`` if it is a live message of this queue, else -1 (MessageTable.slot, inlined: this
        is the engine's most frequent lookup)."""
        t = self.table
        i = seq - t.base
        if i >= 0:
            window = t.window
            if i >= len(window):
                return -1
            slot = window[i]
        else:
            slot = t.overflow.get(seq, -1)
        if slot >= 0 and t.owner[slot] == self.number:
            return slot
        return -1

    def get(self, seq: int, default: Row | None = None) -> Row | None:
        slot = self.slot(seq)
        return Row(self.q, seq, slot) if slot >= 0 else default

    def __getitem__(self, seq: int) -> Row:
        slot = self.slot(seq)
        if slot < 0:
            raise KeyError(seq)
        return Row(self.q, seq, slot)

    def __contains__(self, seq: object) -> bool:
        return isinstance(seq, int) and self.slot(seq) >= 0

    def __len__(self) -> int:
        return sum(self.q.counts)

    def __bool__(self) -> bool:
        counts = self.q.counts
        return bool(counts[0] or counts[1] or counts[2])

    def __iter__(self) -> Iterator[int]:
        # ``order`` holds every live message once, in the order they were added, beside dead entries.
        slot = self.slot
        for seq in self.q.order:
            if slot(seq) >= 0:
                yield seq

    def keys(self) -> Iterator[int]:
        return iter(self)

    def values(self) -> Iterator[Row]:
        q, slot = self.q, self.slot
        for seq in q.order:
            s = slot(seq)
            if s >= 0:
                yield Row(q, seq, s)

    def items(self) -> Iterator[tuple[int, Row]]:
        for m in self.values():
            yield m.seq, m
