"""The worker RPC's payloads, declared once: what each request and each answer holds, field by field.

Payloads are msgpack arrays, positional to keep them small and quick to build and read.  Each is declared here
as a :class:`Shape`: its fields in order, the trailing ones that may be left out and what their absence means.
The front end, the workers' peers and the workers build and read payloads through this module only, so a
change of the wire is made here and nowhere else; ``python -m ferrymq.rpc.shapes`` prints the table of every
operation.

Every request but PING is ``[partition, *fields]``: the worker routes it by the partition (answering NotLeader,
and changing nothing, when it does not serve it) and reads the fields with the operation's :data:`REQUESTS`
shape.  Reading a malformed payload raises TypeError or ValueError, which the worker answers with
InvalidParameterValue.

Versions.  A field added later is an optional trailing one whose absence means what the request meant before it
existed, so a worker reads what older front ends and peers send.  An answer changes form only when its request
asks for the new one (``answer_version``), so a worker answers an older front end as it expects.  A front end
needs workers at least as new as itself: upgrade workers first.

FIFO rows.  A FIFO queue's received messages have three fields more than a standard queue's.  Version 2 answers
of RECEIVE and PEEK say which shape their rows have (:data:`RECEIVED_ANSWER`); version 1, a bare list of rows,
is what workers of before answer, and only for those does :func:`read_received` tell the shapes by length.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ferrymq.limits import MAX_DELAY_SECONDS
from ferrymq.message_fields import FIFO_RECEIVED_MESSAGE_FIELDS, RECEIVED_MESSAGE_FIELDS
from ferrymq.priorities import MAX_LEVELS, SYSTEM_KEY
from ferrymq.rpc.framing import Op


class Shape:
    """A positional payload: ``fields`` in order, of which the last ``len(absent)`` may be left out, each then
    standing for its value in ``absent``; with ``together``, those are all there or all left out."""

    __slots__ = ("_fills", "absent", "doc", "fields", "name", "required", "size", "together")

    def __init__(
        self, name: str, fields: Sequence[str], *, absent: Sequence[Any] = (), together: bool = False, doc: str = ""
    ) -> None:
        if len(absent) > len(fields):
            raise ValueError(f"{name}: more optional fields than fields")
        self.name = name
        self.fields = tuple(fields)
        self.absent = tuple(absent)
        self.together = together
        self.doc = doc
        self.size = len(self.fields)
        self.required = self.size - len(self.absent)
        lengths = (self.required,) if together else range(self.required, self.size)
        # Per length a payload may have, what its absent fields stand for: one dict lookup on the hot path.
        self._fills: dict[int, list[Any]] = {n: list(self.absent[n - self.required :]) for n in lengths}

    def __repr__(self) -> str:
        return f"Shape({self.name}: {self.layout()})"

    def read(self, payload: Any) -> list[Any]:
        """``payload`` with every field, the optional ones left out filled in with what their absence means.
        TypeError when it is not an array, ValueError when it has a number of fields the shape does not allow."""
        kind = payload.__class__
        if kind is not list:
            if kind is not tuple:
                raise TypeError(f"{self.name} must be an array, not {kind.__name__}")
            payload = list(payload)
        n = len(payload)
        if n == self.size:
            return payload
        fill = self._fills.get(n)
        if fill is None:
            raise ValueError(f"{self.name} has {self.counts()} fields, not {n}")
        return payload + fill

    def request(self, partition: int, *values: Any) -> list[Any]:
        """The request about ``partition`` with these fields (see :meth:`build`)."""
        return [partition, *self.build(*values)]

    def build(self, *values: Any) -> list[Any]:
        """The payload of ``values`` (every field, in order), optional trailing fields that hold what their absence
        means left out, so a peer that predates them reads it."""
        if len(values) != self.size:
            raise TypeError(f"{self.name} takes {self.size} values, not {len(values)}")
        out = list(values)
        absent = self.absent
        keep = self.size
        while keep > self.required:
            value, default = out[keep - 1], absent[keep - 1 - self.required]
            if type(value) is not type(default) or value != default:
                break
            keep -= 1
        if self.together and self.required < keep < self.size:
            keep = self.size
        return out[:keep]

    def counts(self) -> str:
        if self.required == self.size:
            return str(self.size)
        if self.together:
            return f"{self.required} or {self.size}"
        return f"{self.required} to {self.size}"

    def layout(self) -> str:
        """The payload as the table shows it: ``[a, b [, c [, d]]]``."""
        head = ", ".join(self.fields[: self.required])
        tail = self.fields[self.required :]
        if not tail:
            return f"[{head}]"
        if self.together:
            return f"[{head} [, {', '.join(tail)}]]"
        return f"[{head}{''.join(f' [, {f}' for f in tail)}{']' * len(tail)}]"


def _row_reader(fields: Sequence[str]) -> Callable[[Sequence[Any]], dict[str, Any]]:
    """A function turning a row of ``fields`` into a map by name, ValueError for a row of another length;
    generated from the declaration because it runs per message: a dict display costs half of dict(zip())."""
    names = [f"v{i}" for i in range(len(fields))]
    source = (
        f"def read(row):\n    {', '.join(names)}, = row\n"
        f"    return {{{', '.join(f'{field!r}: {name}' for field, name in zip(fields, names, strict=True))}}}\n"
    )
    scope: dict[str, Any] = {}
    # Safe: the source is made of the field names declared in this module, nothing from the wire.
    exec(source, scope)
    reader: Callable[[Sequence[Any]], dict[str, Any]] = scope["read"]
    return reader


# --- requests ------------------------------------------------------------------------------------------
# The fields after the partition.

SEND = Shape(
    "SEND", ("queue_id", "messages", "retention_seconds", "fifo", "resend"), absent=(False, False),
    doc="Store SENT_MESSAGEs.  ``fifo``: a FIFO queue's messages (each needs a group).  ``resend`` (true) marks "
    "a standard send that repeats one whose outcome is unknown, with the same message ids: the worker skips the "
    "ids it stored within the resend horizon.  (Version 1 sent the first attempt's time there, an integer, "
    "which workers still take as true.)  Answer: a SEND_RESULT per message for plain messages of a standard "
    "queue, else (fifo, or any message with HANDOVER fields) a STORED_RESULT per message.",
)
RECEIVE = Shape(
    "RECEIVE",
    ("queue_id", "max_messages", "visibility_timeout", "wait_seconds", "retention_seconds", "options",
     "answer_version"),
    absent=(None, 1),
    doc="``options``: None or RECEIVE_OPTIONS.  Answer: RECEIVED_ANSWER (``answer_version`` 2), or a bare list of "
    "RECEIVED_MESSAGE or FIFO_RECEIVED_MESSAGE rows (version 1).",
)
DELETE = Shape("DELETE", ("queue_id", "receipts"), doc="Answer: an ITEM_RESULT per receipt.")
CHANGE_VISIBILITY = Shape(
    "CHANGE_VISIBILITY", ("queue_id", "entries"),
    doc="``entries``: [[receipt, timeout], ...].  Answer: an ITEM_RESULT per entry.",
)
PURGE = Shape("PURGE", ("queue_id",), doc="Answer: None.")
DROP_QUEUE = Shape("DROP_QUEUE", ("queue_id",), doc="Answer: None.")
STATS = Shape(
    "STATS", ("queue_id", "retention_seconds", "oldest_age"), absent=(False,),
    doc="Answer: STATS_ANSWER, or DEPTH_ANSWER when ``oldest_age`` is true.",
)
START_MOVE_TASK = Shape(
    "START_MOVE_TASK", ("queue_id", "task"),
    doc="``task``: {task_handle, source_arn, destination: None | {DESTINATION_FIELDS}, max_per_second, "
    "started_ts}.  Answer: a MOVE_TASK.",
)
LIST_MOVE_TASKS = Shape("LIST_MOVE_TASKS", ("queue_id",), doc="Answer: [MOVE_TASK, ...], most recent first.")
CANCEL_MOVE_TASK = Shape("CANCEL_MOVE_TASK", ("queue_id", "task_handle"), doc='Answer: {"moved": int}.')
PEEK = Shape(
    "PEEK", ("queue_id", "max_messages", "retention_seconds", "answer_version"), absent=(1,),
    doc="Answer: as RECEIVE's, each receipt None.",
)
FETCH = Shape(
    "FETCH", ("replica", "epoch", "from_offset", "durable_offset", "max_bytes", "wait_ms"),
    doc="A follower's pull of the replication stream.  Answer: [RECORD_FRAME, ...].",
)
OFFSET_FOR_EPOCH = Shape(
    "OFFSET_FOR_EPOCH", ("epoch", "asked_epoch"),
    doc="A rejoining follower's question.  Answer: EPOCH_END, or None when the leader's log starts above it.",
)
SNAPSHOT = Shape(
    "SNAPSHOT", ("replica", "epoch", "chunk"),
    doc="The state encoded as records, for followers of before COPY_BASE.  Answer: SNAPSHOT_ANSWER.",
)
COPY_BASE = Shape(
    "COPY_BASE", ("replica", "epoch", "copy", "position", "max_bytes"),
    doc="A far-behind follower's read of the leader's first segment from byte ``position``; ``copy`` 0 starts a "
    "copy (the leader holds that file until the copy ends), else the id the first answer gave.  Answer: "
    "COPY_BASE_ANSWER.",
)

REQUESTS: Mapping[int, Shape] = {
    Op.SEND: SEND, Op.RECEIVE: RECEIVE, Op.DELETE: DELETE, Op.CHANGE_VISIBILITY: CHANGE_VISIBILITY,
    Op.PURGE: PURGE, Op.DROP_QUEUE: DROP_QUEUE, Op.STATS: STATS, Op.START_MOVE_TASK: START_MOVE_TASK,
    Op.LIST_MOVE_TASKS: LIST_MOVE_TASKS, Op.CANCEL_MOVE_TASK: CANCEL_MOVE_TASK, Op.PEEK: PEEK, Op.FETCH: FETCH,
    Op.OFFSET_FOR_EPOCH: OFFSET_FOR_EPOCH, Op.SNAPSHOT: SNAPSHOT, Op.COPY_BASE: COPY_BASE,
}
"""Every operation's request but PING's, which is ``[]`` (answer: {worker_id, partitions: {...}, ...})."""

ANSWER_VERSION = 2
"""The newest answer form of RECEIVE and PEEK, which front ends ask for."""

# --- rows and answers ----------------------------------------------------------------------------------

SENT_MESSAGE = Shape(
    "SENT_MESSAGE",
    ("id", "body", "attrs", "md5_body", "md5_attrs", "delay", "system", "group", "dedup_id", "origin"),
    absent=(None, None, None), together=True,
    doc="One message of a SEND.  ``body`` is a string, or bytes for an encrypted envelope.  The HANDOVER "
    "fields are a FIFO message's group and deduplication id and, for a message handed over from another queue "
    "(dead-letter redrive, move tasks), its ORIGIN; absent, the message is new to a standard queue.  Messages "
    "sent with fifo or with an origin are stored idempotently by id.",
)
ORIGIN_FIELDS = ("sent_ts", "receive_count", "first_receive_ts")
"""Keys of a handed-over message's ``origin`` map; ``sent_ts`` None means "now, wherever it lands"."""

SEND_RESULT = Shape("SEND_RESULT", ("id", "sent_ts"), doc="A plain message of a standard queue, stored.")
STORED_RESULT = Shape(
    "STORED_RESULT", ("id", "sent_ts", "seq", "duplicate"),
    doc="A FIFO or handed-over message: ``seq`` the partition's counter zero-padded to 20 digits (a FIFO "
    "queue's SequenceNumber comes of it), ``duplicate`` whether the id was stored before (nothing was stored).",
)
RECEIVED_MESSAGE = Shape("RECEIVED_MESSAGE", RECEIVED_MESSAGE_FIELDS, doc="A standard queue's received message.")
FIFO_RECEIVED_MESSAGE = Shape(
    "FIFO_RECEIVED_MESSAGE", FIFO_RECEIVED_MESSAGE_FIELDS, doc="A FIFO queue's received message."
)
RECEIVED_ANSWER = Shape(
    "RECEIVED_ANSWER", ("fifo", "rows"),
    doc="RECEIVE's and PEEK's answer, version 2: ``rows`` are FIFO_RECEIVED_MESSAGEs when ``fifo`` is true, "
    "else RECEIVED_MESSAGEs.",
)
RECEIVE_OPTION_KEYS = ("fifo", "attempt_id", "redrive", "max_in_flight", "priority_levels")
"""Keys of RECEIVE's ``options`` map, each optional: ``redrive`` a map with REDRIVE_FIELDS, ``attempt_id`` the
ReceiveRequestAttemptId (FIFO only), ``priority_levels`` the queue's FerryMQPriorityLevels."""
REDRIVE_FIELDS = (
    "max_receive_count", "dlq_queue_id", "dlq_partition", "dlq_fifo", "source_arn", "dlq_retention_seconds"
)
"""Keys of the ``redrive`` receive option."""
ITEM_RESULT = Shape("ITEM_RESULT", ("code", "message"), doc="A DELETE or CHANGE_VISIBILITY entry's error; None: done.")
STATS_ANSWER = Shape("STATS_ANSWER", ("visible", "in_flight", "delayed"))
DEPTH_ANSWER = Shape(
    "DEPTH_ANSWER", (*STATS_ANSWER.fields, "oldest_age_ms"),
    doc="``oldest_age_ms``: how long ago the oldest message held was sent (0: none).",
)
MOVE_TASK_FIELDS = (
    "task_handle", "status", "source_arn", "destination_arn", "max_per_second", "moved", "to_move", "failure_reason",
    "started_ts",
)
"""Keys of a MOVE_TASK map."""
RECORD_FRAME = Shape("RECORD_FRAME", ("epoch", "offset", "payload"), doc="A log record as the leader stores it.")
EPOCH_END = Shape("EPOCH_END", ("epoch", "end_offset"))
EPOCH_START = Shape("EPOCH_START", ("epoch", "first_offset"))
SNAPSHOT_ANSWER = Shape(
    "SNAPSHOT_ANSWER", ("offset", "epoch", "history", "chunks", "payloads"),
    doc="The leader's state as of ``offset`` (appended in ``epoch``; ``history`` its EPOCH_STARTs up to it), in "
    "``chunks`` chunks of encoded records; ``payloads`` this chunk's.",
)

COPY_BASE_ANSWER = Shape(
    "COPY_BASE_ANSWER", ("copy", "offset", "size", "data"),
    doc="Bytes of copy ``copy`` of the leader's first segment, a base holding the state as of ``offset`` (records "
    "may follow it in the file), ``size`` bytes long in all; ``data`` the bytes from the position asked for.",
)

ANSWERS = (
    SENT_MESSAGE, SEND_RESULT, STORED_RESULT, RECEIVED_MESSAGE, FIFO_RECEIVED_MESSAGE, RECEIVED_ANSWER, ITEM_RESULT,
    STATS_ANSWER, DEPTH_ANSWER, RECORD_FRAME, EPOCH_END, EPOCH_START, SNAPSHOT_ANSWER, COPY_BASE_ANSWER,
)
"""The shapes inside payloads, in the order the table shows them."""


def table() -> str:
    """Every payload as a table, from the declarations above (the codec points here)."""
    lines = ["Requests: [partition, *fields] (PING: [])", ""]
    for op, shape in REQUESTS.items():
        lines += [f"{Op(op).name:18} {shape.layout()}", *(f"{'':18} {line}" for line in _wrap(shape.doc))]
    lines += ["", "Rows and answers", ""]
    for shape in ANSWERS:
        lines += [f"{shape.name:22} {shape.layout()}", *(f"{'':22} {line}" for line in _wrap(shape.doc))]
    lines += ["", f"ORIGIN: {{{', '.join(ORIGIN_FIELDS)}}}", f"RECEIVE_OPTIONS: {{{', '.join(RECEIVE_OPTION_KEYS)}}}",
              f"REDRIVE: {{{', '.join(REDRIVE_FIELDS)}}}", f"MOVE_TASK: {{{', '.join(MOVE_TASK_FIELDS)}}}"]
    return "\n".join(lines)


def _wrap(text: str, width: int = 90) -> list[str]:
    return textwrap.wrap(text, width) if text else []


# --- SEND --------------------------------------------------------------------------------------------------


def send_request(
    partition: int, queue_id: str, messages: Sequence[Mapping[str, Any]], retention_seconds: int, fifo: bool,
    resend: bool,
) -> tuple[list[Any], bool]:
    """A SEND of ``messages`` (maps with SENT_MESSAGE's field names; attrs, md5_attrs, delay, system and the
    HANDOVER ones may be missing) and whether its answer holds STORED_RESULTs."""
    rows = []
    stored = fifo
    for m in messages:
        row = [m["id"], m["body"], m.get("attrs") or {}, m["md5_body"], m.get("md5_attrs"), m.get("delay", 0),
               m.get("system") or {}]
        if fifo or m.get("origin") is not None:
            row += [m.get("group"), m.get("dedup_id"), m.get("origin")]
            stored = True
        rows.append(row)
    args: list[Any] = [partition, queue_id, rows, retention_seconds]
    # The fields' absence means False: left out when they are, so the request is as short as version 1's.
    if stored or resend:
        args.append(fifo)
    if resend and not stored:
        args.append(True)
    return args, stored


def read_send_answer(rows: Sequence[Sequence[Any]], stored: bool, fifo: bool) -> list[dict[str, Any]]:
    """SEND's answer as ``{"id", "sent_ts"}`` per message, plus ``"duplicate"`` when ``stored`` and ``"seq"``
    when ``fifo`` too."""
    # Loops, not comprehensions: a comprehension's own frame costs more than the loop for the usual one row.
    out = []
    if not stored:
        for message_id, sent_ts in rows:
            out.append({"id": message_id, "sent_ts": sent_ts})
    elif fifo:
        for message_id, sent_ts, seq, duplicate in rows:
            out.append({"id": message_id, "sent_ts": sent_ts, "seq": seq, "duplicate": duplicate})
    else:
        for message_id, sent_ts, _, duplicate in rows:
            out.append({"id": message_id, "sent_ts": sent_ts, "duplicate": duplicate})
    return out


def check_send(queue_id: Any, messages: Any, retention: Any, fifo: bool) -> bool:
    """Whether SEND's ``messages`` (SENT_MESSAGE rows) are plain messages of a standard queue, else FIFO or
    handed-over ones; ValueError or TypeError when a field is not of its kind or a row not a SENT_MESSAGE."""
    if not isinstance(queue_id, str):
        raise TypeError("queue id must be a string")
    if not isinstance(messages, list) or not isinstance(retention, int):
        raise TypeError("messages must be a list and retention an integer")
    plain = not fifo
    short, full = SENT_MESSAGE.required, SENT_MESSAGE.size
    for m in messages:
        n = len(m) if isinstance(m, list) else -1
        if n == short:
            message_id, body, attrs, md5_body, md5_attrs, delay, system = m
        elif n == full:
            message_id, body, attrs, md5_body, md5_attrs, delay, system, group, dedup_id, origin = m
        else:
            raise ValueError("malformed message")
        if not (
            isinstance(message_id, str)
            # bytes: an encrypted message's envelope (ferrymq.sse), kept as it is.
            and isinstance(body, _TEXT)
            and isinstance(attrs, dict)
            and isinstance(md5_body, str)
            and (md5_attrs is None or isinstance(md5_attrs, str))
            and isinstance(delay, int)
            and 0 <= delay <= MAX_DELAY_SECONDS
            and isinstance(system, dict)
        ):
            raise ValueError("malformed message")
        for value in attrs.values():
            if not isinstance(value, dict):
                raise ValueError("malformed message attribute")
        level = system.get(SYSTEM_KEY)
        # The engine indexes by it: anything but a level would break every replay of the log.
        if level is not None and not (type(level) is int and 0 <= level < MAX_LEVELS):
            raise ValueError("malformed message priority")
        if n == full:
            plain = False
            if not (group is None or isinstance(group, str)) or not (dedup_id is None or isinstance(dedup_id, str)):
                raise ValueError("malformed message group or deduplication id")
            if origin is not None and not isinstance(origin, dict):
                raise ValueError("malformed message origin")
            if fifo and not isinstance(group, str):
                raise ValueError("a FIFO message needs a group")
        elif fifo:
            raise ValueError("a FIFO message needs a group")
    return plain


_TEXT = (str, bytes)


def stored_messages(messages: list[list[Any]]) -> list[tuple[Any, ...]]:
    """Checked SENT_MESSAGE rows with every field, each origin read into ``(sent_ts | None, receive_count,
    first_receive_ts)`` (what ``Engine.store`` takes)."""
    full = SENT_MESSAGE.size
    out = []
    for m in messages:
        out.append((*m[: full - 1], _origin(m[full - 1])) if len(m) == full else (*m, None, None, None))
    return out


def _origin(origin: dict[str, Any] | None) -> tuple[int | None, int, int] | None:
    if origin is None:
        return None
    sent_ts = origin.get("sent_ts")
    return (
        int(sent_ts) if sent_ts is not None else None,
        int(origin.get("receive_count") or 0),
        int(origin.get("first_receive_ts") or 0),
    )


def send_answer(messages: list[list[Any]], sent_ts: int) -> list[list[Any]]:
    """A SEND_RESULT for each of the plain ``messages``, all stored at ``sent_ts``."""
    out = []
    for m in messages:
        out.append([m[0], sent_ts])
    return out


def stored_answer(results: Sequence[tuple[str, int, int, bool]]) -> list[list[Any]]:
    """A STORED_RESULT for each of ``Engine.store``'s ``(id, sent_ts, seq, duplicate)``."""
    out = []
    for message_id, sent_ts, seq, duplicate in results:
        out.append([message_id, sent_ts, f"{seq:020d}", duplicate])
    return out


# --- RECEIVE and PEEK --------------------------------------------------------------------------------------

_read_standard = _row_reader(RECEIVED_MESSAGE.fields)
_read_fifo = _row_reader(FIFO_RECEIVED_MESSAGE.fields)


def receive_request(
    partition: int, queue_id: str, max_messages: int, visibility_timeout: int, wait_seconds: float,
    retention_seconds: int, options: dict[str, Any] | None,
) -> list[Any]:
    """A RECEIVE asking for a version 2 answer."""
    return [partition, queue_id, max_messages, visibility_timeout, wait_seconds, retention_seconds, options,
            ANSWER_VERSION]


def peek_request(partition: int, queue_id: str, max_messages: int, retention_seconds: int) -> list[Any]:
    """A PEEK asking for a version 2 answer."""
    return [partition, queue_id, max_messages, retention_seconds, ANSWER_VERSION]


def check_answer_version(version: Any) -> None:
    """ValueError unless ``version`` is an answer version this worker can give."""
    if type(version) is not int or not 1 <= version <= ANSWER_VERSION:
        raise ValueError(f"no answer version {version!r}")


def read_receive(args: Any) -> list[Any]:
    """RECEIVE's fields, its ``answer_version`` checked (before anything is received: an answer that cannot be
    given must not leave messages in flight)."""
    fields = args if args.__class__ is list and len(args) == RECEIVE.size else RECEIVE.read(args)
    version = fields[6]
    if version.__class__ is not int or not 1 <= version <= ANSWER_VERSION:
        raise ValueError(f"no answer version {version!r}")
    return fields


def read_peek(args: Any) -> list[Any]:
    """PEEK's fields, its ``answer_version`` checked."""
    fields = PEEK.read(args)
    check_answer_version(fields[3])
    return fields


def received_answer(version: int, fifo: bool, rows: list[Any]) -> list[Any]:
    """RECEIVE's or PEEK's answer in the form the request asked for (a checked ``answer_version``)."""
    return rows if version == 1 else [fifo, rows]


def read_received(answer: Any) -> list[dict[str, Any]]:
    """RECEIVE's or PEEK's answer as a map per message with the row's field names."""
    if answer and type(answer[0]) is bool:
        fifo, rows = RECEIVED_ANSWER.read(answer)
        return list(map(_read_fifo if fifo else _read_standard, rows))
    # Version 1, from a worker of before: only a row's length said it was a FIFO queue's.
    fifo_size = FIFO_RECEIVED_MESSAGE.size
    return [_read_fifo(row) if len(row) == fifo_size else _read_standard(row) for row in answer]


def read_item_result(row: Any) -> tuple[str, str]:
    """A DELETE or CHANGE_VISIBILITY entry's error as ``(code, message)``."""
    code, message = ITEM_RESULT.read(row)
    return code, message


# --- replication ---------------------------------------------------------------------------------------


def read_frames(rows: Sequence[Sequence[Any]]) -> list[tuple[int, int, bytes]]:
    """FETCH's answer as ``(epoch, offset, payload)`` RECORD_FRAMEs."""
    return [(epoch, offset, payload) for epoch, offset, payload in rows]


def read_epoch_end(answer: Any) -> tuple[int, int] | None:
    if answer is None:
        return None
    epoch, end_offset = EPOCH_END.read(answer)
    return epoch, end_offset


def snapshot_answer(
    offset: int, epoch: int, history: Sequence[tuple[int, int] | list[int]], chunks: int, payloads: list[bytes]
) -> list[Any]:
    return [offset, epoch, [[e, first] for e, first in history], chunks, payloads]


def read_snapshot_answer(answer: Any) -> tuple[int, int, list[tuple[int, int]], int, list[bytes]]:
    offset, epoch, history, chunks, payloads = SNAPSHOT_ANSWER.read(answer)
    return offset, epoch, [(e, first) for e, first in history], chunks, list(payloads)


def read_copy_base_answer(answer: Any) -> tuple[int, int, int, bytes]:
    copy, offset, size, data = COPY_BASE_ANSWER.read(answer)
    if not all(type(n) is int for n in (copy, offset, size)) or not isinstance(data, bytes):
        raise ValueError("a base copy's answer is three integers and bytes")
    return copy, offset, size, data


if __name__ == "__main__":
    print(table())
