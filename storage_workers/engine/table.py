"""The messages of one partition as columns: no Python object per stored message.

One table per partition, not per queue: sequence numbers are dense per partition (``PartitionState.next_seq``)
while one queue's are interleaved with its partition's other queues', so only a partition-wide window maps a
sequence number to its row by arithmetic.

    seq ──► window: array('i') of slots, one entry per sequence number in [base, base + len)
        └─► overflow: dict seq -> slot, for the few live rows left far behind the window's front

    slot ─► ids 16 B │ md5 16 B │ sent q │ visible q │ first_receive q │ receives I │ token I │ size I │
            owner I (the queue's number) │ system I │ group I │ state B │ level B │ flags B │ extra (list)

Each column is a typed ``memoryview`` over address space reserved for far more rows than it holds
(:mod:`.columns`): rows are written by index, and a column's pages are the kernel's to give as rows are first
written, so it grows without moving, and a checkpoint's chunks can lie in it as they were read or mapped.  Rows
are reused through a free list, so the columns fill only as far as the most messages held at once, and the
window costs 4 bytes per sequence number between the oldest live message and the newest.  When the window's
front is all dead it is cut off; when it holds more than eight times as many numbers as live rows, the live
rows of its older half move to the overflow (stragglers: a message held for days among millions sent since),
so neither grows with what was sent, only with what is held.  A table holding nothing starts over, empty.

Fields of no fixed width stay out of the columns where they can:

- a message id that is a UUID in its canonical form (the front end makes them) is its 16 bytes, a body MD5
  that is 32 lower-case hex digits its 16 bytes; anything else (older logs, tests) is kept as it came;
- system attributes (``SenderId``, a priority level, a dead-letter source) repeat across messages, so each
  distinct set is kept once (:class:`Interner`), as is each FIFO group name, and freed with its last message;
- ``extra`` holds the body alone; or, for a FIFO message with nothing else to keep, the body and its
  deduplication id (a content-based one, 64 hex digits, as its 32 bytes); or, when the message has anything
  more (attributes, an attributes MD5, an id or MD5 kept as it came), a tuple of the body and all of those.
  The body is reached through :meth:`MessageTable.body` only: with a :class:`BodyKeeper` (a partition's log,
  ``ferrymq.storage.log.bodies``) it is not kept here at all, nor is its MD5, and ``loc``, ``span`` and ``item``
  say where it lies on disk (16 bytes a row, in place of the body and the 16 of the ``md5`` column).
"""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Iterator
from itertools import compress, repeat
from operator import ge
from typing import Any, Protocol

from ferrymq.storage.engine import columns

F_UUID = 1
"""The id is in ``ids`` (else in the extra tuple)."""
F_MD5 = 2
"""The body MD5 is in ``md5`` (else in the extra tuple)."""
F_EXTRA = 4
"""``extra`` is a tuple (:data:`_E_BODY` ...), not the body alone."""
F_ATTRS = 8
"""Message attributes other than ``{}``, in the extra tuple."""
F_SYSTEM = 16
"""System attributes that could not be shared (not hashable, or not a dict), in the extra tuple."""
F_NO_MD5 = 32
"""The body MD5 is ``""`` (an encrypted message's: its MD5s are inside the envelope)."""
F_PAIR = 64
"""With F_EXTRA: ``extra`` is ``(body, deduplication id)``, a FIFO message with nothing else to keep."""
F_DEDUP_HEX = 128
"""The deduplication id is 64 lower-case hex digits (a content-based one, SHA-256), kept as its 32 bytes."""

_BODY_ALONE = frozenset({F_UUID | F_MD5, F_UUID | F_NO_MD5})
"""Flags of a message whose ``extra`` is its body alone."""

_E_BODY, _E_ID, _E_MD5, _E_MD5_ATTRS, _E_ATTRS, _E_SYSTEM, _E_DEDUP = range(7)
_ZERO16 = bytes(16)
_ID_TEXTS = 4096
"""At most this many ids kept as text (``MessageTable.id_texts``); then it starts over."""
_WINDOW_SLACK = 65536
MOVE_SPAN = 32768
"""Window entries looked at per step of a move of stragglers to the overflow (at most this many rows moved)."""
_CUT_SLACK = 4096
COLUMNS = (
    ("sent", "q"), ("visible", "q"), ("first_receive", "q"), ("receives", "I"), ("token", "I"), ("size", "I"),
    ("owner", "I"), ("system", "I"), ("group", "I"), ("state", "B"), ("level", "B"), ("flags", "B"), ("loc", "Q"),
    ("span", "I"), ("item", "I"), ("ids", "B"), ("md5", "B"),
)
"""The table's fixed-width columns (:mod:`.columns`) and their kinds; ``ids`` and ``md5`` take 16 bytes a row."""
WIDE = {"ids": 16, "md5": 16}
"""Columns of more than one item a row, and their items a row."""
_DERIVED = frozenset({"__weakref__", "_room"})
"""Attributes a table's state leaves out: made again when it is loaded."""


def uuid_bytes(message_id: object) -> bytes | None:
    """The 16 bytes of a canonical (lower-case, hyphenated) UUID string, else None."""
    if type(message_id) is not str or len(message_id) != 36 or message_id[8] != "-" or message_id[13] != "-" \
            or message_id[18] != "-" or message_id[23] != "-":
        return None
    digits = message_id.replace("-", "")
    try:
        raw = bytes.fromhex(digits)
    except ValueError:
        return None
    # fromhex takes upper case and spaces too: only what comes back out exactly is kept as bytes.
    return raw if len(raw) == 16 and raw.hex() == digits else None


def uuid_text(raw: bytes | bytearray) -> str:
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def hex_bytes(text: object, size: int) -> bytes | None:
    """The ``size`` bytes ``2 * size`` lower-case hex digits stand for, else None."""
    if type(text) is not str or len(text) != 2 * size:
        return None
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        return None
    return raw if len(raw) == size and raw.hex() == text else None


def md5_bytes(md5: object) -> bytes | None:
    """The 16 bytes of 32 lower-case hex digits, else None."""
    return hex_bytes(md5, 16)


class BodyKeeper(Protocol):
    """What keeps the bodies of a table's messages out of its memory (``ferrymq.storage.log.bodies``)."""

    def added(self, seq: int, slot: int, body: Any, md5: str | None) -> None:
        """``md5``: the body MD5 when it is to be kept with the body (the table then keeps none)."""

    def body(self, slot: int) -> Any: ...

    def md5(self, slot: int) -> str: ...

    def forget(self, slot: int) -> None: ...


class Interner:
    """Values many rows share, each kept once under a number (0: none), freed when its last row goes."""

    __slots__ = ("_free", "_numbers", "_refs", "_values")

    def __init__(self) -> None:
        self._numbers: dict[Hashable, int] = {}
        self._values: list[tuple[Hashable, Any] | None] = [None]
        self._refs: list[int] = [0]
        self._free: list[int] = []

    def add(self, key: Hashable, value: Any) -> int:
        no = self._numbers.get(key)
        if no is None:
            if self._free:
                no = self._free.pop()
                self._values[no] = (key, value)
            else:
                no = len(self._values)
                self._values.append((key, value))
                self._refs.append(0)
            self._numbers[key] = no
        self._refs[no] += 1
        return no

    def entry(self, no: int) -> object:
        """What identifies value ``no`` as it is now (for :meth:`add_again`)."""
        return self._values[no]

    def add_again(self, no: int, entry: object) -> bool:
        """One more row for value ``no``, if it is still the ``entry`` it was (not freed and reused since)."""
        if self._values[no] is not entry:
            return False
        self._refs[no] += 1
        return True

    def value(self, no: int) -> Any:
        entry = self._values[no]
        return entry[1] if entry is not None else None

    def release(self, no: int) -> None:
        if not no:
            return
        self._refs[no] -= 1
        if self._refs[no] == 0:
            entry = self._values[no]
            assert entry is not None
            del self._numbers[entry[0]]
            self._values[no] = None
            self._free.append(no)

    def __len__(self) -> int:
        return len(self._numbers)


class MessageTable:
    """The rows of every message of one partition (module docstring)."""

    __slots__ = (
        "__weakref__",
        "_free",
        "_front",
        "_last_system",
        "_moving",
        "_room",
        "base",
        "bodies",
        "extra",
        "first_receive",
        "flags",
        "group",
        "groups",
        "id_texts",
        "ids",
        "item",
        "level",
        "live",
        "loc",
        "md5",
        "md5_used",
        "overflow",
        "owner",
        "receives",
        "sent",
        "size",
        "span",
        "state",
        "system",
        "systems",
        "token",
        "visible",
        "window",
    )

    def __init__(self) -> None:
        for name, kind in COLUMNS:
            setattr(self, name, columns.reserve(kind, columns.RESERVED_ROWS * WIDE.get(name, 1)))
        self._room = self._room_of_columns()
        self.extra: list[Any] = []
        self._reset()
        self.systems = Interner()
        self.groups = Interner()
        self._last_system: tuple[tuple, int, object] | None = None
        """``(items, number, entry)`` of the system attribute set shared last, if its values are all text."""
        self.bodies: BodyKeeper | None = None
        """Where bodies are kept when not in ``extra`` (a partition's log: ``ferrymq.storage.log.bodies``)."""
        columns.track(self)

    def _reset(self) -> None:
        """Empty: the columns keep their room (the pages of their rows given back when worth it)."""
        self.base = 0
        """The sequence number of ``window[0]``."""
        self._front = 0
        """Window entries before this one are all dead."""
        self.window = array("i")
        self.overflow: dict[int, int] = {}
        self._moving: tuple[int, int] | None = None
        """``(next, end)``: the window entries before ``end`` are being moved to the overflow, those before
        ``next`` are there already (and still in the window, which answers until the move cuts them off)."""
        self._free = array("i")
        self.live = 0
        rows = len(self.extra)
        if rows:
            for name, _ in COLUMNS:
                columns.release(getattr(self, name), rows * WIDE.get(name, 1))
        self.md5_used = False
        """Whether ``md5`` holds any row's body MD5 (only a table without a :class:`BodyKeeper` keeps them)."""
        self.extra = []
        """One entry a row (its size is the table's rows): what no column holds (module docstring)."""
        self.id_texts: dict[int, str] = {}
        """Slot -> its UUID id as text, for the messages whose id was read lately: a message received is read
        again by its delete (the handle's check, and the removal), so its id is formatted once, not thrice."""

    def _room_of_columns(self) -> int:
        return min(len(getattr(self, name)) // WIDE.get(name, 1) for name, _ in COLUMNS)

    def _grow(self, needed: int) -> None:
        """Move every column to one with room for ``needed`` rows (only where the kernel gave small reservations:
        :mod:`.columns`)."""
        rows = len(self.extra)
        for name, _ in COLUMNS:
            wide = WIDE.get(name, 1)
            setattr(self, name, columns.grown(getattr(self, name), rows * wide, needed * wide))
        self._room = self._room_of_columns()

    def column_views(self) -> list[memoryview]:
        return [getattr(self, name) for name, _ in COLUMNS]

    def column_spans(self) -> Iterator[tuple[int, int]]:
        """``(address, bytes)`` of each column's rows (:func:`.columns.dense_spans`)."""
        rows = len(self.extra)
        for name, _ in COLUMNS:
            column = getattr(self, name)
            yield columns.address(column), rows * WIDE.get(name, 1) * column.itemsize

    def rows_of(self, name: str) -> memoryview:
        """Column ``name``'s rows (``md5``'s only if it holds any)."""
        rows = len(self.extra) if name != "md5" or self.md5_used else 0
        return getattr(self, name)[:rows * WIDE.get(name, 1)]

    def raw_state(self) -> dict[str, Any]:
        """Every attribute as it is, the columns as their reservations (a checkpoint writes only their rows)."""
        return {name: getattr(self, name) for name in self.__slots__ if name not in _DERIVED and hasattr(self, name)}

    def __getstate__(self) -> tuple[None, dict[str, Any]]:
        """The columns as arrays of their rows: a table pickled whole (a checkpoint writes them its own way)."""
        state = self.raw_state()
        for name, kind in COLUMNS:
            state[name] = rows = array(kind)
            rows.frombytes(self.rows_of(name).cast("B"))
        return None, state

    def __setstate__(self, state: tuple[None, dict[str, Any]]) -> None:
        _, slots = state
        for name, value in slots.items():
            setattr(self, name, value)
        rows = len(self.extra)
        if not hasattr(self, "md5_used"):
            self.md5_used = len(self.md5) > 0
        if not hasattr(self, "_moving"):
            self._moving = None  # a table pickled before stragglers were moved in steps
        for name, kind in COLUMNS:
            value = getattr(self, name)
            if type(value) is not memoryview or value.format != kind:
                # A checkpoint written before the columns were reserved (``array`` and ``bytearray``), or a
                # table's ``md5`` left empty: copied into a reservation.
                setattr(self, name, columns.adopted(kind, value, rows * WIDE.get(name, 1)))
        self._room = self._room_of_columns()
        columns.track(self)

    # --- sequence number -> slot ---------------------------------------------------------------------

    def slot(self, seq: int) -> int:
        """The row of ``seq``, or -1."""
        i = seq - self.base
        if i >= 0:
            window = self.window
            return window[i] if i < len(window) else -1
        return self.overflow.get(seq, -1) if self.overflow else -1

    def _place(self, seq: int, slot: int) -> None:
        window = self.window
        if seq - self.base == len(window):
            window.append(slot)
            return
        if not window and not self.overflow and self.live == 0:
            self.base = seq
        i = seq - self.base
        moving = self._moving
        if moving is not None and (i < moving[0] or i - len(window) > 8 * self.live + _WINDOW_SLACK):
            # Placed where a move in steps has been, or moving the window: the move is finished first.
            while self._moving is not None:
                self._move_stragglers()
            window, i = self.window, seq - self.base
        if i < 0:
            if -i <= len(window) + _WINDOW_SLACK:
                # Grown downwards by at least its own length, so that rows restored queue by queue (each
                # queue's from its oldest) cost O(log n) such moves, not one per queue.
                grow = min(max(-i, len(window)), self.base)
                window[0:0] = array("i", [-1]) * grow
                self.base -= grow
                self._front = 0
                i += grow
                # Stragglers the window now covers go back into it: a number is looked up in one place only.
                overflow, base = self.overflow, self.base
                for straggler in [s for s in overflow if s >= base]:
                    window[straggler - base] = overflow.pop(straggler)
            else:
                self.overflow[seq] = slot
                return
        if i >= len(window):
            if i - len(window) > 8 * self.live + _WINDOW_SLACK:
                # Far past the window (numbers used and gone meanwhile, as after a restore): a new window starts
                # here and the old one's rows become stragglers, rather than the window spanning the gap.
                overflow, base = self.overflow, self.base
                for j, kept in enumerate(window):
                    if kept >= 0:
                        overflow[base + j] = kept
                self.window = window = array("i")
                self.base, self._front, i = seq, 0, 0
            window.extend(array("i", [-1]) * (i - len(window) + 1))
        elif i < self._front:
            self._front = i
        window[i] = slot

    def _unplace(self, seq: int) -> None:
        i = seq - self.base
        if 0 <= i < len(self.window):
            self.window[i] = -1
            moving = self._moving
            if moving is not None and i < moving[0]:
                self.overflow.pop(seq, None)
        else:
            self.overflow.pop(seq, None)

    def _trim(self) -> None:
        """Cut the dead front off the window, and move stragglers out of a window mostly dead (a step at a time:
        :meth:`_move_stragglers`)."""
        if self._moving is not None:
            self._move_stragglers()
            return
        window, front = self.window, self._front
        n = len(window)
        while front < n and window[front] < 0:
            front += 1
        if front >= _CUT_SLACK and 2 * front >= n:
            del window[:front]
            self.base += front
            front = 0
            n = len(window)
        self._front = front
        in_window = self.live - len(self.overflow)
        if n - front > 8 * in_window + _WINDOW_SLACK:
            self._moving = (front, front + (n - front) // 2)
            self._move_stragglers()

    def _move_stragglers(self) -> None:
        """Move the live rows among the next :data:`MOVE_SPAN` entries of the window's older half to the overflow;
        once the half is moved, cut it off.  A million stragglers moved at once held a worker's loop 300 ms: their
        entries in the overflow dict, not the walk, which runs in C."""
        assert self._moving is not None
        at, end = self._moving
        stop = min(at + MOVE_SPAN, end)
        window, overflow, base = self.window, self.overflow, self.base
        for i in compress(range(at, stop), map(ge, window[at:stop], repeat(0))):
            overflow[base + i] = window[i]
        if stop < end:
            self._moving = (stop, end)
            return
        self._moving = None
        del window[:end]
        self.base += end
        self._front = 0

    # --- rows -------------------------------------------------------------------------------------------

    def insert(
        self,
        seq: int,
        owner: int,
        message_id: Any,
        body: Any,
        attrs: Any,
        md5_body: Any,
        md5_attrs: Any,
        system: Any,
        sent_ts: int,
        visible_at: int,
        receive_count: int,
        first_receive_ts: int,
        group: str | None,
        dedup_id: Any,
        size: int,
        level: int,
        state: int,
    ) -> int:
        """A new row for message ``seq`` of queue number ``owner`` (token 1); returns its slot."""
        keeper, kept = self.bodies, body
        if keeper is not None:
            body = None  # kept on disk, not in ``extra``
        flags = 0
        raw_id = uuid_bytes(message_id)
        if raw_id is not None:
            flags |= F_UUID
        raw_md5 = md5_bytes(md5_body)
        if raw_md5 is not None:
            flags |= F_MD5
        elif md5_body == "" and type(md5_body) is str:
            flags |= F_NO_MD5
        if not (type(attrs) is dict and not attrs):
            flags |= F_ATTRS
        system_no = 0
        if type(system) is dict:
            if system:
                items = tuple(system.items())
                last = self._last_system
                # The messages of one request, and a sender's next ones, name the same system attributes: the
                # set shared last is checked first, by its items in order, without building its full key.
                if last is not None and items == last[0] and self.systems.add_again(last[1], last[2]):
                    system_no = last[1]
                else:
                    try:
                        # Types are part of the key: {"k": 1} and {"k": True} are equal, yet must come back as
                        # they went in.
                        types = tuple(map(type, system.values()))
                        # A copy is shared: the sender's dict is not the table's to keep.
                        system_no = self.systems.add((items, types), dict(system))
                    except TypeError:
                        flags |= F_SYSTEM
                    else:
                        # Only a set of text values: a text equals nothing but text, so equal items are the same.
                        if all(t is str for t in types):
                            self._last_system = (items, system_no, self.systems.entry(system_no))
        else:
            flags |= F_SYSTEM
        group_no = self.groups.add(group, group) if group is not None else 0
        if dedup_id is not None:
            raw_dedup = hex_bytes(dedup_id, 32)
            if raw_dedup is not None:
                flags |= F_DEDUP_HEX
                dedup_id = raw_dedup
        if flags & ~F_DEDUP_HEX in _BODY_ALONE and md5_attrs is None:
            if dedup_id is None:
                extra: Any = body
            else:
                flags |= F_EXTRA | F_PAIR
                extra = (body, dedup_id)
        else:
            flags |= F_EXTRA
            extra: Any = (
                body,
                None if flags & F_UUID else message_id,
                None if flags & (F_MD5 | F_NO_MD5) else md5_body,
                md5_attrs,
                attrs if flags & F_ATTRS else None,
                system if flags & F_SYSTEM else None,
                dedup_id,
            )
        level = level if 0 <= level < 256 else 255
        size = min(size, 0xFFFFFFFF)
        if self._free:
            slot = self._free.pop()
        else:
            slot = len(self.extra)
            if slot >= self._room:
                self._grow(slot + 1)
            self.extra.append(None)
        self.sent[slot] = sent_ts
        self.visible[slot] = visible_at
        self.first_receive[slot] = first_receive_ts
        self.receives[slot] = receive_count
        self.token[slot] = 1
        self.size[slot] = size
        self.owner[slot] = owner
        self.system[slot] = system_no
        self.group[slot] = group_no
        self.state[slot] = state
        self.level[slot] = level
        self.flags[slot] = flags
        self.loc[slot] = 0
        self.span[slot] = 0
        self.item[slot] = 0
        at = 16 * slot
        self.ids[at:at + 16] = raw_id or _ZERO16
        if keeper is None:
            self.md5[at:at + 16] = raw_md5 or _ZERO16
            self.md5_used = True
        self.extra[slot] = extra
        self._place(seq, slot)
        self.live += 1
        if keeper is not None:
            keeper.added(seq, slot, kept, md5_body if flags & F_MD5 else None)
        return slot

    def free(self, seq: int, slot: int) -> None:
        """Forget message ``seq`` (its row is ``slot``)."""
        self._unplace(seq)
        self.id_texts.pop(slot, None)
        no = self.system[slot]
        if no:
            self.systems.release(no)
        no = self.group[slot]
        if no:
            self.groups.release(no)
        if self.bodies is not None:
            self.bodies.forget(slot)
        self.extra[slot] = None
        self.live -= 1
        if self.live == 0:
            self._reset()
        else:
            self._free.append(slot)

    def tidy(self) -> None:
        """After removing rows: cut the window's dead front, move stragglers (module docstring)."""
        if self.live:
            self._trim()

    def drop_bodies(self) -> None:
        """Forget every body and body MD5 kept in memory: a table about to be kept with a :class:`BodyKeeper`
        that reads them from disk (a compaction's state, written as a checkpoint)."""
        extra, flags = self.extra, self.flags
        for slot, kept in enumerate(extra):
            if kept is None:
                continue
            if not flags[slot] & F_EXTRA:
                extra[slot] = None
            elif flags[slot] & F_PAIR:
                extra[slot] = (None, kept[1])
            else:
                extra[slot] = (None, *kept[1:])
        columns.release(self.md5, 16 * len(extra))
        self.md5_used = False

    # --- fields of no fixed width ------------------------------------------------------------------------

    def fields(self, slot: int) -> tuple[Any, Any, Any, Any, Any, Any, Any]:
        """``(id, body, attrs, md5_body, md5_attrs, system, dedup_id)`` at once, for a received row or a
        RESTORED item: one look at the flags instead of one per field."""
        flags = self.flags[slot]
        no = self.system[slot]
        keeper = self.bodies
        if not flags & F_EXTRA:
            return (
                self._uuid(slot),
                self.extra[slot] if keeper is None else keeper.body(slot),
                {},
                self._md5(slot) if flags & F_MD5 else "",
                None,
                dict(self.systems.value(no)) if no else {},
                None,
            )
        extra = self.extra[slot]
        shared = dict(self.systems.value(no)) if no else {}
        if flags & F_PAIR:
            return (
                self._uuid(slot),
                extra[0] if keeper is None else keeper.body(slot),
                {},
                self._md5(slot) if flags & F_MD5 else "",
                None,
                shared,
                extra[1].hex() if flags & F_DEDUP_HEX else extra[1],
            )
        dedup_id = extra[_E_DEDUP]
        return (
            self._uuid(slot) if flags & F_UUID else extra[_E_ID],
            extra[_E_BODY] if keeper is None else keeper.body(slot),
            extra[_E_ATTRS] if flags & F_ATTRS else {},
            self._md5(slot) if flags & F_MD5 else "" if flags & F_NO_MD5 else extra[_E_MD5],
            extra[_E_MD5_ATTRS],
            extra[_E_SYSTEM] if flags & F_SYSTEM else shared,
            dedup_id.hex() if flags & F_DEDUP_HEX else dedup_id,
        )

    def message_id(self, slot: int) -> Any:
        if self.flags[slot] & F_UUID:
            return self._uuid(slot)
        return self.extra[slot][_E_ID]

    def _uuid(self, slot: int) -> str:
        texts = self.id_texts
        text = texts.get(slot)
        if text is None:
            text = uuid_text(self.ids[16 * slot:16 * slot + 16])
            if len(texts) >= _ID_TEXTS:
                texts.clear()
            texts[slot] = text
        return text

    def body(self, slot: int) -> Any:
        if self.bodies is not None:
            return self.bodies.body(slot)
        extra = self.extra[slot]
        return extra[_E_BODY] if self.flags[slot] & F_EXTRA else extra

    def md5_body(self, slot: int) -> Any:
        flags = self.flags[slot]
        if flags & F_MD5:
            return self._md5(slot)
        return "" if flags & F_NO_MD5 else self.extra[slot][_E_MD5]

    def _md5(self, slot: int) -> str:
        """The body MD5 of a row flagged F_MD5."""
        if self.bodies is not None:
            return self.bodies.md5(slot)
        return self.md5[16 * slot:16 * slot + 16].hex()

    def md5_attrs(self, slot: int) -> Any:
        flags = self.flags[slot]
        return self.extra[slot][_E_MD5_ATTRS] if flags & F_EXTRA and not flags & F_PAIR else None

    def attrs(self, slot: int) -> Any:
        return self.extra[slot][_E_ATTRS] if self.flags[slot] & F_ATTRS else {}

    def system_of(self, slot: int) -> Any:
        if self.flags[slot] & F_SYSTEM:
            return self.extra[slot][_E_SYSTEM]
        no = self.system[slot]
        # A copy: the shared dict must not change under the other messages that hold it.
        return dict(self.systems.value(no)) if no else {}

    def group_of(self, slot: int) -> str | None:
        no = self.group[slot]
        return self.groups.value(no) if no else None

    def dedup_id(self, slot: int) -> Any:
        flags = self.flags[slot]
        if not flags & F_EXTRA:
            return None
        dedup_id = self.extra[slot][1 if flags & F_PAIR else _E_DEDUP]
        return dedup_id.hex() if flags & F_DEDUP_HEX else dedup_id
