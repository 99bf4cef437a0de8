"""One handler per worker RPC operation on a partition: check the arguments, call the engine, shape the result.

There is one :class:`Handlers` per partition replica; the worker routes each request by the partition it
names and hands the handler the arguments after it.

The front end has validated every request already; these checks only keep a broken or hostile request out
of the engine and the log (a malformed one gets InvalidParameterValue and changes nothing).  Each request is
read with its shape in :mod:`ferrymq.rpc.shapes`, which also builds the answers.  A handler
returns its result, which the worker sends once the log is durable, or :data:`DEFERRED` when a long poll
answers later by itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ferrymq.destinations import DESTINATION_FIELDS, QueueTarget
from ferrymq.limits import (
    MAX_MESSAGES_PER_RECEIVE,
    MAX_PEEK_MESSAGES,
    MAX_VISIBILITY_TIMEOUT_SECONDS,
    MAX_WAIT_TIME_SECONDS,
)
from ferrymq.priorities import MAX_LEVELS
from ferrymq.rpc import shapes
from ferrymq.rpc.framing import Op
from ferrymq.rpc.shapes import REDRIVE_FIELDS
from ferrymq.storage.engine import Engine, Redrive
from ferrymq.storage.handover import DeadLetterForwarder
from ferrymq.storage.move_tasks import MoveTaskRunner
from ferrymq.storage.server.connection import Connection
from ferrymq.storage.server.long_poll import LongPolls

PARTITION_OPS = frozenset(Op) - {Op.PING}
"""The operations that name a partition: every one but PING."""

# Bound once: these run per request.
check_send = shapes.check_send
_read_send = shapes.SEND.read
_read_receive = shapes.read_receive
_send_answer = shapes.send_answer
_received_answer = shapes.received_answer

DEFERRED = object()
"""Returned by a handler whose reply is sent later (a long poll that found nothing yet)."""

Reply = Callable[[Connection, int, Any], None]
Handler = Callable[[Connection, int, Any], Any]


@dataclass(frozen=True, slots=True)
class ReceiveOptions:
    attempt_id: str | None = None
    redrive: Redrive | None = None
    dlq: QueueTarget | None = None
    max_in_flight: int | None = None
    priority_levels: int = 1


class Handlers:
    def __init__(
        self,
        *,
        engine: Engine,
        partition: int,
        long_polls: LongPolls,
        forwarder: DeadLetterForwarder,
        mover: MoveTaskRunner,
        reply: Reply,
        fail: Callable[[Connection, int, BaseException], None],
    ) -> None:
        self.engine = engine
        self.partition = partition
        self.long_polls = long_polls
        self.forwarder = forwarder
        self.mover = mover
        self._reply = reply
        self._fail = fail

    def table(self) -> dict[int, Handler]:
        """The handler of each operation about this partition (PING is the worker's, about all of them)."""
        return {
            Op.SEND: self.send,
            Op.RECEIVE: self.receive,
            Op.DELETE: self.delete,
            Op.CHANGE_VISIBILITY: self.change_visibility,
            Op.PURGE: self.purge,
            Op.DROP_QUEUE: self.drop_queue,
            Op.STATS: self.stats,
            Op.START_MOVE_TASK: self.start_move_task,
            Op.LIST_MOVE_TASKS: self.list_move_tasks,
            Op.CANCEL_MOVE_TASK: self.cancel_move_task,
            Op.PEEK: self.peek,
        }

    def send(self, conn: Connection, request_id: int, args: Any) -> list:
        queue_id, messages, retention, fifo, resend = _read_send(args)
        fifo = bool(fifo)
        # A front end of before sends the time of its first attempt instead of true: a resend as well.
        if type(resend) not in (bool, int):
            raise TypeError("resend is a boolean")
        if check_send(queue_id, messages, retention, fifo):
            sent_ts = self.engine.send(queue_id, messages, retention, resend=resend is not False)
            self.long_polls.wake(queue_id)
            return _send_answer(messages, sent_ts)
        results = self.engine.store(queue_id, shapes.stored_messages(messages), retention, fifo=fifo)
        self.long_polls.wake(queue_id)
        return shapes.stored_answer(results)

    def receive(self, conn: Connection, request_id: int, args: Any) -> Any:
        queue_id, max_messages, visibility, wait, retention, options_map, version = _read_receive(args)
        _check_str(queue_id)
        options = self._receive_options(options_map) if options_map else ReceiveOptions()
        n = min(max(int(max_messages), 1), MAX_MESSAGES_PER_RECEIVE)
        visibility = min(max(int(visibility), 0), MAX_VISIBILITY_TIMEOUT_SECONDS)
        retention = int(retention)
        wait = min(float(wait), float(MAX_WAIT_TIME_SECONDS))
        found = self._poll(queue_id, n, visibility, retention, options, short_poll=not wait > 0)
        if found or not wait > 0:
            return _received_answer(version, self.engine.is_fifo(queue_id), found)
        task = asyncio.get_running_loop().create_task(
            self._long_poll(conn, request_id, queue_id, n, visibility, retention, wait, options, version)
        )
        conn.start(task)
        return DEFERRED

    def _receive_options(self, options: Any) -> ReceiveOptions:
        if not isinstance(options, dict):
            raise TypeError("receive options must be a map")
        attempt_id = options.get("attempt_id")
        if attempt_id is not None and not isinstance(attempt_id, str):
            raise TypeError("attempt_id must be a string")
        if not options.get("fifo"):
            attempt_id = None
        max_in_flight = options.get("max_in_flight")
        if max_in_flight is not None:
            max_in_flight = int(max_in_flight)
        levels = min(max(int(options.get("priority_levels") or 1), 1), MAX_LEVELS)
        redrive = options.get("redrive")
        if redrive is None:
            return ReceiveOptions(attempt_id, None, None, max_in_flight, levels)
        if not isinstance(redrive, dict) or set(REDRIVE_FIELDS) - set(redrive):
            raise ValueError(f"redrive needs {', '.join(REDRIVE_FIELDS)}")
        # The hand-over to a dead-letter queue goes by queue id and partition; the ARN field is the source's,
        # which is what messages moved there name (DeadLetterQueueSourceArn).
        dlq = QueueTarget(
            str(redrive["dlq_queue_id"]),
            int(redrive["dlq_partition"]),
            bool(redrive["dlq_fifo"]),
            int(redrive["dlq_retention_seconds"]),
            str(redrive["source_arn"]),
        )
        policy = Redrive(
            max(int(redrive["max_receive_count"]), 1),
            dlq.queue_id,
            dlq.fifo,
            str(redrive["source_arn"]),
            dlq.partition == self.partition,
        )
        return ReceiveOptions(attempt_id, policy, dlq, max_in_flight, levels)

    def _poll(
        self, queue_id: str, n: int, visibility: int, retention: int, options: ReceiveOptions, *, short_poll: bool
    ) -> list:
        polled = self.engine.poll(
            queue_id,
            n,
            visibility,
            retention,
            attempt_id=options.attempt_id,
            redrive=options.redrive,
            max_in_flight=options.max_in_flight,
            short_poll=short_poll,
            priority_levels=options.priority_levels,
        )
        if options.redrive is not None and options.dlq is not None:
            if polled.dead_letters:
                self.forwarder.submit(queue_id, options.dlq, polled.dead_letters)
            elif options.redrive.local:
                self.long_polls.wake(options.dlq.queue_id)
        return polled.rows

    async def _long_poll(
        self,
        conn: Connection,
        request_id: int,
        queue_id: str,
        n: int,
        visibility: int,
        retention: int,
        wait: float,
        options: ReceiveOptions,
        version: int,
    ) -> None:
        def poll() -> list:
            return self._poll(queue_id, n, visibility, retention, options, short_poll=False)

        try:
            found = await self.long_polls.wait_for(queue_id, wait, poll, options.max_in_flight)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._fail(conn, request_id, exc)
            return
        self._reply(conn, request_id, shapes.received_answer(version, self.engine.is_fifo(queue_id), found))

    def delete(self, conn: Connection, request_id: int, args: Any) -> list:
        queue_id, handles = shapes.DELETE.read(args)
        _check_str(queue_id)
        if not isinstance(handles, list):
            raise TypeError("receipts must be a list")
        results = self.engine.delete(queue_id, handles)
        # A delete may unlock a FIFO group or bring a queue back under its in-flight limit.
        self.long_polls.wake(queue_id)
        return results

    def change_visibility(self, conn: Connection, request_id: int, args: Any) -> list:
        queue_id, entries = shapes.CHANGE_VISIBILITY.read(args)
        _check_str(queue_id)
        if not isinstance(entries, list):
            raise TypeError("entries must be a list")
        checked = [_visibility_entry(entry) for entry in entries]
        results = self.engine.change_visibility(queue_id, checked)
        if any(r is None for r in results):
            self.long_polls.wake(queue_id)
        return results

    def purge(self, conn: Connection, request_id: int, args: Any) -> None:
        (queue_id,) = shapes.PURGE.read(args)
        _check_str(queue_id)
        self.engine.purge(queue_id)

    def drop_queue(self, conn: Connection, request_id: int, args: Any) -> None:
        (queue_id,) = shapes.DROP_QUEUE.read(args)
        _check_str(queue_id)
        self.engine.drop_queue(queue_id)

    def stats(self, conn: Connection, request_id: int, args: Any) -> tuple[int, ...]:
        """``(visible, in_flight, delayed)``, and the oldest message's age in ms after them when asked."""
        queue_id, retention, oldest_age = shapes.STATS.read(args)
        _check_str(queue_id)
        counts = self.engine.stats(queue_id, int(retention))
        if oldest_age:
            return (*counts, self.engine.oldest_age_ms(queue_id, int(retention)))
        return counts

    def peek(self, conn: Connection, request_id: int, args: Any) -> list:
        queue_id, max_messages, retention, version = shapes.read_peek(args)
        _check_str(queue_id)
        rows = self.engine.peek(queue_id, min(max(int(max_messages), 1), MAX_PEEK_MESSAGES), int(retention))
        return shapes.received_answer(version, self.engine.is_fifo(queue_id), rows)

    def start_move_task(self, conn: Connection, request_id: int, args: Any) -> dict:
        queue_id, task = shapes.START_MOVE_TASK.read(args)
        _check_str(queue_id)
        _check_move_task(task)
        started = self.engine.start_move_task(queue_id, task)
        if started["status"] == "RUNNING":
            self.mover.launch(queue_id, started["task_handle"])
        return started

    def list_move_tasks(self, conn: Connection, request_id: int, args: Any) -> list[dict]:
        (queue_id,) = shapes.LIST_MOVE_TASKS.read(args)
        _check_str(queue_id)
        return self.engine.list_move_tasks(queue_id)

    def cancel_move_task(self, conn: Connection, request_id: int, args: Any) -> dict:
        queue_id, handle = shapes.CANCEL_MOVE_TASK.read(args)
        _check_str(queue_id)
        _check_str(handle)
        moved = self.engine.cancel_move_task(queue_id, handle)
        self.mover.poke(queue_id, handle)
        return {"moved": moved}


def _check_str(value: Any) -> None:
    if not isinstance(value, str):
        raise TypeError("queue id must be a string")


def _visibility_entry(entry: Any) -> tuple[str, int]:
    if not isinstance(entry, list) or len(entry) != 2 or not isinstance(entry[0], str):
        raise TypeError("a visibility change is a receipt and a timeout")
    return entry[0], min(max(int(entry[1]), 0), MAX_VISIBILITY_TIMEOUT_SECONDS)


def _check_move_task(task: Any) -> None:
    if not isinstance(task, dict) or not isinstance(task.get("task_handle"), str):
        raise ValueError("a move task needs a task_handle")
    if not isinstance(task.get("source_arn"), str):
        raise ValueError("a move task needs a source_arn")
    destination = task.get("destination")
    if destination is not None:
        if not isinstance(destination, dict):
            raise ValueError("a move task destination must be a map")
        missing = set(DESTINATION_FIELDS) - set(destination)
        if missing:
            raise ValueError(f"a move task destination needs {', '.join(sorted(missing))}")
    rate = task.get("max_per_second")
    if rate is not None and (not isinstance(rate, int) or rate < 1):
        raise ValueError("max_per_second must be a positive integer")
