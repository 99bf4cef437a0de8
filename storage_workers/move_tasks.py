"""Running message move tasks: one coroutine per RUNNING task, moving batches until none is left.

Each round asks the engine for the task's next visible messages, finds each one's destination (the task's,
or the queue its ``DeadLetterQueueSourceArn`` names, through :class:`~ferrymq.storage.peers.Peers`), and hands
the batch over: to a queue of this worker's partition in one log record, to another worker's queue as
:mod:`ferrymq.storage.handover` describes.  Every step is a log record, so a worker restarted mid-task resumes
it from where the log says it stood, and a batch sent but not recorded as moved is sent again under the same
derived message ids, which the destination recognises as a resend.

A task ends COMPLETED when none of its messages is left, CANCELLED after a cancel, FAILED (leaving the
message where it is) when a message's destination cannot be found or refuses it, and FAILED with
``INTERNAL_FAILURE`` when anything else goes wrong: a task that stopped without ending would stay RUNNING,
refusing every new task on its queue and every cancel, until the worker restarts.  Only while a destination
or the queue catalog is unreachable (ServiceUnavailable) does the task wait and try again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from ferrymq.clock import Clock
from ferrymq.destinations import QueueTarget
from ferrymq.errors import ServiceUnavailable, SqsError
from ferrymq.event_waits import wait_set
from ferrymq.storage.engine import Engine, Outgoing
from ferrymq.storage.engine.tasks import (
    ACTIVE,
    CANCELLED,
    CANCELLING,
    COMPLETED,
    DLQ_SOURCE_ARN,
    FAILED,
    INTERNAL_FAILURE,
    NO_QUEUE,
    NO_SOURCE,
    RUNNING,
    MoveTask,
    moved_copy,
)
from ferrymq.storage.handover import send_to
from ferrymq.storage.log.writer import LogFailed
from ferrymq.storage.peers import Peers

log = logging.getLogger(__name__)

"""The FailureReason of a task that failed for a reason of FerryMQ's own, not its messages' or destination's."""

UNLIMITED_BATCH = 100
"""Messages per round when the task has no rate limit (the loop yields to other requests between rounds)."""
LIMITED_BATCH = 10
RETRY_SECONDS = 1.0
IDLE_SECONDS = 1.0


class Pacer:
    """Spaces rounds so that no more than ``per_second`` messages are moved per second (None: no limit)."""

    def __init__(self, per_second: int | None, clock: Clock) -> None:
        self.per_second = per_second if per_second and per_second > 0 else None
        self._clock = clock
        self._origin: float | None = None
        self._count = 0

    def batch_size(self) -> int:
        if self.per_second is None:
            return UNLIMITED_BATCH
        return max(1, min(LIMITED_BATCH, self.per_second))

    def moved(self, n: int) -> float:
        """Count ``n`` messages just moved; returns the seconds to wait before the next round."""
        now = self._clock.monotonic()
        if self._origin is None:
            self._origin = now
        self._count += n
        if self.per_second is None:
            return 0.0
        return max(0.0, self._origin + self._count / self.per_second - now)

    def idle(self) -> None:
        """Nothing to move for a while: the next round does not make up for the pause."""
        self._origin = None
        self._count = 0


class _TaskFailed(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class MoveTaskRunner:
    def __init__(
        self,
        engine: Engine,
        peers: Peers,
        clock: Clock,
        *,
        hold_seconds: int,
        on_delivered: Callable[[str], None] | None = None,
    ) -> None:
        self._engine = engine
        self._peers = peers
        self._clock = clock
        self._hold_seconds = hold_seconds
        self._on_delivered = on_delivered
        self._tasks: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._wakeups: dict[tuple[str, str], asyncio.Event] = {}

    def launch(self, queue_id: str, handle: str) -> None:
        """Run the task unless it already runs here."""
        key = (queue_id, handle)
        running = self._tasks.get(key)
        if running is not None and not running.done():
            return
        self._wakeups[key] = asyncio.Event()
        task = asyncio.get_running_loop().create_task(self._run(queue_id, handle))
        self._tasks[key] = task
        task.add_done_callback(lambda _: self._forget(key, task))

    def _forget(self, key: tuple[str, str], task: asyncio.Task[None]) -> None:
        if self._tasks.get(key) is task:
            del self._tasks[key]
            self._wakeups.pop(key, None)

    def poke(self, queue_id: str, handle: str) -> None:
        """Make a waiting task look at its state now (after a cancel)."""
        event = self._wakeups.get((queue_id, handle))
        if event is not None:
            event.set()

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _sleep(self, key: tuple[str, str], seconds: float) -> None:
        event = self._wakeups.get(key)
        if event is None:
            await asyncio.sleep(seconds)
            return
        await wait_set(event, seconds)
        event.clear()

    async def _run(self, queue_id: str, handle: str) -> None:
        try:
            await self._move(queue_id, handle)
        except LogFailed:
            # The worker is stopping; the log still says RUNNING, so a restarted worker resumes the task.
            return
        except Exception:
            log.exception("move task %s of %s failed", handle, queue_id)
            self._end_failed(queue_id, handle)

    def _end_failed(self, queue_id: str, handle: str) -> None:
        task = self._engine.move_task(queue_id, handle)
        if task is None or task.status not in ACTIVE:
            return
        # LogFailed: the worker is stopping, and the task resumes from the log when it starts again.
        with contextlib.suppress(LogFailed):
            self._engine.end_move_task(queue_id, handle, FAILED, INTERNAL_FAILURE)

    async def _move(self, queue_id: str, handle: str) -> None:
        engine, key = self._engine, (queue_id, handle)
        task = engine.move_task(queue_id, handle)
        if task is None:
            return
        pacer = Pacer(task.max_per_second, self._clock)
        while True:
            task = engine.move_task(queue_id, handle)
            if task is None or task.status not in (RUNNING, CANCELLING):
                return
            if task.status == CANCELLING:
                engine.end_move_task(queue_id, handle, CANCELLED)
                return
            batch = engine.move_candidates(queue_id, handle, pacer.batch_size())
            if not batch:
                if engine.move_remaining(queue_id, handle) == 0:
                    engine.end_move_task(queue_id, handle, COMPLETED)
                    return
                # What is left is in flight (a consumer, or an unfinished hand-over): wait until it may be back.
                pacer.idle()
                due = engine.next_change(queue_id)
                wait = IDLE_SECONDS if due is None else min(IDLE_SECONDS, max(due - self._clock.now(), 0.0) + 0.01)
                await self._sleep(key, wait)
                continue
            try:
                by_target = await self._destinations(task, batch)
                moved = await self._hand_over(task, queue_id, by_target)
            except _TaskFailed as failed:
                engine.end_move_task(queue_id, handle, FAILED, failed.reason)
                return
            except ServiceUnavailable as exc:
                log.warning("move task %s of %s waits: %s", handle, queue_id, exc.message)
                await self._sleep(key, RETRY_SECONDS)
                continue
            except SqsError as exc:
                if not exc.sender:
                    raise
                # The destination refuses these messages for good: stop, as SQS does, with its reason.
                engine.end_move_task(queue_id, handle, FAILED, exc.query_code)
                return
            delay = pacer.moved(moved)
            if delay > 0:
                await self._sleep(key, delay)
            else:
                await asyncio.sleep(0)

    async def _destinations(self, task: MoveTask, batch: list[Outgoing]) -> dict[QueueTarget, list[Outgoing]]:
        by_target: dict[QueueTarget, list[Outgoing]] = {}
        for c in batch:
            target = await self._destination(task, c)
            by_target.setdefault(target, []).append(c)
        return by_target

    async def _destination(self, task: MoveTask, c: Outgoing) -> QueueTarget:
        d = task.destination
        if d is not None:
            live = await self._peers.queue(str(d["arn"]))
            if live is None or live.queue_id != d["queue_id"]:
                raise _TaskFailed(NO_QUEUE)
            return QueueTarget.from_wire(d)
        arn = c.system.get(DLQ_SOURCE_ARN)
        if not isinstance(arn, str):
            raise _TaskFailed(NO_SOURCE)
        target = await self._peers.queue(arn)
        if target is None:
            raise _TaskFailed(NO_QUEUE)
        return target

    async def _hand_over(self, task: MoveTask, queue_id: str, by_target: dict[QueueTarget, list[Outgoing]]) -> int:
        engine, handle = self._engine, task.handle
        moved = 0
        for target, originals in by_target.items():
            seqs = [c.seq for c in originals]
            if target.partition == self._peers.partition:
                engine.move_locally(queue_id, handle, seqs, target.queue_id, target.fifo)
            else:
                engine.hold(queue_id, seqs, self._hold_seconds)
                try:
                    await send_to(self._peers, target, [moved_copy(c, handle) for c in originals])
                except Exception:
                    # Visible again at once: the task retries them now or, failed, leaves them where they were.
                    engine.hold(queue_id, seqs, 0)
                    raise
                engine.moved(queue_id, handle, seqs)
            moved += len(seqs)
            if self._on_delivered is not None:
                self._on_delivered(target.queue_id)
        return moved
