"""A consumer loop: ``Consumer(queue_url, handler).run()``, or ``consume(queue_url, handler)``.

Threads and what they do::

    poller ── ReceiveMessage (long poll, up to 10) ──► held messages ──► handler pool (``concurrency`` threads)
                  waits while ``concurrency`` are held        │                  │ returned      │ raised
    extender ── ChangeMessageVisibilityBatch for held ◄───────┘                  ▼               ▼
                messages past half their visibility                       deleter: batched    left to the redrive
                                                                          DeleteMessageBatch  policy (or made visible
                                                                                              after retry_visibility)

- A message is *held* from its receipt until it is deleted, failed or released; the poller asks for no more
  than the room ``concurrency`` leaves, so received messages do not wait long for a handler.
- While a message is held its visibility is extended (to the queue's VisibilityTimeout, or the one given)
  whenever half of it has run out, so a slow handler keeps its message from other consumers.
- A handler that returns has its message deleted, in batches of up to 10 gathered for
  ``delete_linger_seconds``; entries that failed through no fault of the sender are deleted again.
- A handler that raises never has its message deleted: it reappears once its visibility runs out (at once,
  or after ``retry_visibility_seconds`` when given) and the queue's redrive policy moves it to its DLQ after
  maxReceiveCount receives.
- FIFO queues: the messages of one MessageGroupId are handled one at a time, in the order received; after
  a failure the group's later messages in hand are given up the same way, so none overtakes it.
- ``stop()``, SIGTERM or SIGINT (when ``run`` is called on the main thread) stop the poller; handlers
  already running finish and their messages are deleted; messages not yet started are made visible again
  at once; then ``run`` returns. A long poll still open then is not waited for beyond
  ``poll_grace_seconds``: if it brings messages they are made visible again at once.
"""

from __future__ import annotations

import logging
import queue
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import FrameType
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ferrymq.client import is_fifo_queue
from ferrymq.limits import MAX_MESSAGES_PER_RECEIVE, MAX_VISIBILITY_TIMEOUT_SECONDS, MAX_WAIT_TIME_SECONDS

_log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], object]

MAX_BATCH = 10
RETRY_ATTEMPTS = 5
BACKOFF_BASE_SECONDS = 0.1
BACKOFF_MAX_SECONDS = 5.0
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@dataclass(slots=True)
class ConsumerStats:
    """What a consumer did, counted as it went."""

    received: int = 0
    succeeded: int = 0
    failed: int = 0
    deleted: int = 0
    released: int = 0


@dataclass(eq=False, slots=True)
class _Held:
    message: dict[str, Any]
    # When the message's visibility runs out, on the monotonic clock (measured from before the call that set it).
    deadline: float
    group: str | None

    @property
    def receipt(self) -> str:
        return str(self.message["ReceiptHandle"])


class ConsumerError(RuntimeError):
    """The consumer stopped because a call failed in a way retrying cannot mend (e.g. the queue is gone)."""


class Consumer:
    """Runs ``handler(message)`` for the messages of ``queue_url``; see the module docstring."""

    def __init__(
        self,
        queue_url: str,
        handler: Handler,
        *,
        client: Any = None,
        concurrency: int = 4,
        max_messages: int = MAX_MESSAGES_PER_RECEIVE,
        wait_time_seconds: int = MAX_WAIT_TIME_SECONDS,
        visibility_timeout: int | None = None,
        extend_visibility: bool = True,
        retry_visibility_seconds: int | None = None,
        message_attribute_names: Sequence[str] = ("All",),
        delete_linger_seconds: float = 0.05,
        poll_grace_seconds: float = 1.0,
        handle_signals: bool = True,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if not 1 <= max_messages <= MAX_MESSAGES_PER_RECEIVE:
            raise ValueError(f"max_messages must be between 1 and {MAX_MESSAGES_PER_RECEIVE}")
        if not 0 <= wait_time_seconds <= MAX_WAIT_TIME_SECONDS:
            raise ValueError(f"wait_time_seconds must be between 0 and {MAX_WAIT_TIME_SECONDS}")
        for name, value in (("visibility_timeout", visibility_timeout),
                            ("retry_visibility_seconds", retry_visibility_seconds)):
            if value is not None and not 0 <= value <= MAX_VISIBILITY_TIMEOUT_SECONDS:
                raise ValueError(f"{name} must be between 0 and {MAX_VISIBILITY_TIMEOUT_SECONDS}")
        self._owns_client = client is None
        if client is None:
            from ferrymq.client import client as make_client

            client = make_client("sqs")
        self.queue_url = queue_url
        self.handler = handler
        self.client = client
        self.stats = ConsumerStats()
        self._concurrency = concurrency
        self._max_messages = max_messages
        self._wait = wait_time_seconds
        self._visibility_given = visibility_timeout
        self._visibility = 0
        self._extend = extend_visibility
        self._retry_visibility = retry_visibility_seconds
        self._message_attribute_names = list(message_attribute_names)
        self._delete_linger = delete_linger_seconds
        self._poll_grace = poll_grace_seconds
        self._handle_signals = handle_signals
        self._fifo = False
        self._started = False
        self._stop = threading.Event()
        self._cond = threading.Condition()
        self._held: dict[int, _Held] = {}
        self._groups: dict[str, deque[_Held]] = {}
        # Serialises visibility changes, so an extension cannot land after a failure's or a release's.
        self._visibility_lock = threading.Lock()
        self._to_delete: queue.Queue[_Held | None] = queue.Queue()
        self._pool: ThreadPoolExecutor | None = None
        self._fatal: BaseException | None = None

    # --- lifecycle -------------------------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        """Whether a stop was asked for (by ``stop()``, a signal, or a call that failed for good)."""
        return self._stop.is_set()

    def stop(self) -> None:
        """Ask ``run`` to stop gracefully; safe from any thread, a handler or a signal handler."""
        self._stop.set()
        # Wakes the poller if it waits for room. Never blocks: a signal handler may run while its thread holds
        # the lock, and run() wakes the poller again on its way out anyway.
        if self._cond.acquire(blocking=False):
            try:
                self._cond.notify_all()
            finally:
                self._cond.release()

    def run(self) -> ConsumerStats:
        """Consume until stopped; returns the counts. Raises ConsumerError if a call failed for good."""
        if self._started:
            raise RuntimeError("a Consumer runs once")
        self._started = True
        # Also what fails at once on a queue that does not exist. (Asking a standard queue for FifoQueue is an
        # error: the name tells the type.)
        attributes = self.client.get_queue_attributes(
            QueueUrl=self.queue_url, AttributeNames=["VisibilityTimeout"]
        )["Attributes"]
        self._visibility = (self._visibility_given if self._visibility_given is not None
                            else int(attributes["VisibilityTimeout"]))
        self._fifo = is_fifo_queue(self.queue_url)
        restore = self._install_signal_handlers()
        self._pool = ThreadPoolExecutor(self._concurrency, thread_name_prefix="ferrymq-handler")
        poller = threading.Thread(target=self._poll_loop, name="ferrymq-poller", daemon=True)
        deleter = threading.Thread(target=self._delete_loop, name="ferrymq-deleter", daemon=True)
        extender_done = threading.Event()
        extender = threading.Thread(target=self._extend_loop, args=(extender_done,), name="ferrymq-extender",
                                    daemon=True)
        try:
            poller.start()
            deleter.start()
            if self._extend and self._visibility > 0:
                extender.start()
            while not self._stop.wait(0.5):
                pass
        finally:
            with self._cond:
                self._stop.set()
                self._cond.notify_all()
            # Running handlers finish; those not started release their messages (_handle_one, _handle_group).
            self._pool.shutdown(wait=True)
            self._to_delete.put(None)
            deleter.join()
            extender_done.set()
            if extender.is_alive():
                extender.join()
            self._release(self._take_all_held())
            poller.join(self._poll_grace)
            restore()
            if self._owns_client and not poller.is_alive():
                self.client.close()
        if self._fatal is not None:
            raise ConsumerError(f"consuming {self.queue_url} stopped: {self._fatal}") from self._fatal
        return self.stats

    def _install_signal_handlers(self) -> Callable[[], None]:
        if not self._handle_signals or threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {sig: signal.getsignal(sig) for sig in _STOP_SIGNALS}

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        def on_signal(signum: int, frame: FrameType | None) -> None:
            _log.info("signal %d: stopping after the running handlers", signum)
            # A second signal acts as it did before: the way out of a handler that never returns.
            restore()
            self.stop()

        for sig in _STOP_SIGNALS:
            signal.signal(sig, on_signal)
        return restore

    # --- receiving -------------------------------------------------------------------------------------

    def _poll_loop(self) -> None:
        failures = 0
        while True:
            with self._cond:
                while not self._stop.is_set() and len(self._held) >= self._concurrency:
                    self._cond.wait()
                if self._stop.is_set():
                    return
                room = min(self._max_messages, self._concurrency - len(self._held))
            request: dict[str, Any] = {
                "QueueUrl": self.queue_url,
                "MaxNumberOfMessages": room,
                "WaitTimeSeconds": self._wait,
                "AttributeNames": ["All"],
                "MessageAttributeNames": self._message_attribute_names,
            }
            if self._visibility_given is not None:
                request["VisibilityTimeout"] = self._visibility_given
            started = time.monotonic()
            try:
                messages = self.client.receive_message(**request).get("Messages", [])
            except (ClientError, BotoCoreError) as exc:
                if self._stop.is_set():
                    return
                if isinstance(exc, ClientError) and _permanent(exc):
                    self._fatal = exc
                    self.stop()
                    return
                failures += 1
                _log.warning("receiving from %s failed (%s); retrying", self.queue_url, exc)
                self._stop.wait(_backoff(failures))
                continue
            failures = 0
            self._accept(messages, started)

    def _accept(self, messages: list[dict[str, Any]], started: float) -> None:
        held = [
            _Held(m, started + self._visibility, m.get("Attributes", {}).get("MessageGroupId") if self._fifo else None)
            for m in messages
        ]
        with self._cond:
            self.stats.received += len(held)
            if self._stop.is_set():
                late = held
            else:
                late = []
                assert self._pool is not None
                for h in held:
                    self._held[id(h)] = h
                    if h.group is None:
                        self._pool.submit(self._handle_one, h)
                    elif h.group in self._groups:
                        self._groups[h.group].append(h)
                    else:
                        self._groups[h.group] = deque([h])
                        self._pool.submit(self._handle_group, h.group)
        if late:
            self._release(late)

    # --- handling --------------------------------------------------------------------------------------

    def _handle_one(self, held: _Held) -> None:
        if self._stop.is_set():
            self._release(self._unhold([held]))
            return
        self._run_handler(held)

    def _handle_group(self, group: str) -> None:
        while True:
            # Visibility calls are made outside the lock: the extender takes the two locks the other way round.
            with self._cond:
                waiting = self._groups[group]
                if not waiting:
                    del self._groups[group]
                    return
                held = waiting.popleft()
                stopping = self._stop.is_set()
                if stopping:
                    rest = [held, *self._groups.pop(group)]
            if stopping:
                self._release(self._unhold(rest))
                return
            if not self._run_handler(held):
                with self._cond:
                    rest = list(self._groups.pop(group))
                self._give_up(rest)
                return

    def _run_handler(self, held: _Held) -> bool:
        try:
            self.handler(held.message)
        except Exception:
            _log.warning("handler failed on message %s of %s", held.message.get("MessageId"), self.queue_url,
                         exc_info=True)
            with self._cond:
                self.stats.failed += 1
            self._give_up([held])
            return False
        with self._cond:
            self.stats.succeeded += 1
        self._to_delete.put(held)
        return True

    def _give_up(self, held: list[_Held]) -> None:
        """Leave ``held`` to reappear: after the retry visibility when one is set, else when theirs runs out."""
        mine = self._unhold(held)
        if self._retry_visibility is not None:
            self._set_visibility(mine, self._retry_visibility)

    def _release(self, held: list[_Held]) -> None:
        """Make ``held`` (no longer held) visible to other consumers now."""
        if held:
            self._set_visibility(held, 0)
            with self._cond:
                self.stats.released += len(held)

    def _unhold(self, held: Iterable[_Held]) -> list[_Held]:
        with self._cond:
            mine = [h for h in held if self._held.pop(id(h), None) is not None]
            self._cond.notify_all()
        return mine

    def _take_all_held(self) -> list[_Held]:
        with self._cond:
            held = list(self._held.values())
            self._held.clear()
            self._groups.clear()
        return held

    # --- visibility ------------------------------------------------------------------------------------

    def _extend_loop(self, done: threading.Event) -> None:
        # Often enough to catch each message well before its visibility runs out.
        tick = max(0.05, min(1.0, self._visibility / 8))
        while not done.wait(tick):
            now = time.monotonic()
            with self._cond:
                due = [h for h in self._held.values() if h.deadline - now <= self._visibility / 2]
            for start in range(0, len(due), MAX_BATCH):
                self._extend_batch(due[start:start + MAX_BATCH])

    def _extend_batch(self, batch: list[_Held]) -> None:
        with self._visibility_lock:
            with self._cond:
                batch = [h for h in batch if id(h) in self._held]
            if not batch:
                return
            started = time.monotonic()
            failed = self._change_visibility(batch, self._visibility)
            with self._cond:
                for h in batch:
                    if h not in failed:
                        h.deadline = started + self._visibility
                for h, sender_fault in failed.items():
                    if sender_fault and self._held.pop(id(h), None) is not None:
                        # Gone from the queue's in-flight set (deleted, or past its 12 hours): nothing to extend.
                        _log.warning("cannot extend the visibility of message %s", h.message.get("MessageId"))
                        self._cond.notify_all()

    def _set_visibility(self, held: list[_Held], seconds: int) -> None:
        with self._visibility_lock:
            for start in range(0, len(held), MAX_BATCH):
                self._change_visibility(held[start:start + MAX_BATCH], seconds)

    def _change_visibility(self, batch: list[_Held], seconds: int) -> dict[_Held, bool]:
        """ChangeMessageVisibilityBatch; returns the entries that failed, with their SenderFault."""
        entries = [{"Id": str(i), "ReceiptHandle": h.receipt, "VisibilityTimeout": seconds}
                   for i, h in enumerate(batch)]
        try:
            answer = self.client.change_message_visibility_batch(QueueUrl=self.queue_url, Entries=entries)
        except (ClientError, BotoCoreError) as exc:
            _log.warning("changing the visibility of %d messages failed: %s", len(batch), exc)
            return dict.fromkeys(batch, False)
        return {batch[int(f["Id"])]: bool(f.get("SenderFault")) for f in answer.get("Failed", [])}

    # --- deleting --------------------------------------------------------------------------------------

    def _delete_loop(self) -> None:
        draining = False
        while True:
            try:
                first = self._to_delete.get(timeout=None if not draining else 0)
            except queue.Empty:
                return
            if first is None:
                draining = True
                continue
            batch = [first]
            deadline = time.monotonic() + self._delete_linger
            while len(batch) < MAX_BATCH:
                try:
                    more = self._to_delete.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if more is None:
                    draining = True
                    continue
                batch.append(more)
            self._delete(batch)

    def _delete(self, batch: list[_Held]) -> None:
        deleted = 0
        for attempt in range(1, RETRY_ATTEMPTS + 1):
            entries = [{"Id": str(i), "ReceiptHandle": h.receipt} for i, h in enumerate(batch)]
            try:
                answer = self.client.delete_message_batch(QueueUrl=self.queue_url, Entries=entries)
            except (ClientError, BotoCoreError) as exc:
                if isinstance(exc, ClientError) and _permanent(exc):
                    _log.error("deleting %d messages from %s failed: %s", len(batch), self.queue_url, exc)
                    break
                _log.warning("deleting %d messages failed (%s); retrying", len(batch), exc)
                time.sleep(_backoff(attempt))
                continue
            failed = answer.get("Failed", [])
            deleted += len(batch) - len(failed)
            again = []
            for failure in failed:
                h = batch[int(failure["Id"])]
                if failure.get("SenderFault"):
                    _log.warning("message %s was not deleted: %s %s", h.message.get("MessageId"),
                                 failure.get("Code"), failure.get("Message"))
                else:
                    again.append(h)
            self._unhold([h for h in batch if h not in again])
            batch = again
            if not batch:
                break
            time.sleep(_backoff(attempt))
        # What could not be deleted reappears once its visibility runs out: handled twice, never lost.
        self._unhold(batch)
        with self._cond:
            self.stats.deleted += deleted


def consume(queue_url: str, handler: Handler, **options: Any) -> ConsumerStats:
    """``Consumer(queue_url, handler, **options).run()``."""
    return Consumer(queue_url, handler, **options).run()


def _permanent(exc: ClientError) -> bool:
    """A refusal that retrying will not change: the sender's fault, other than throttling."""
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    code = str(exc.response.get("Error", {}).get("Code", ""))
    return 400 <= status < 500 and status != 429 and "Throttl" not in code and code != "RequestThrottled"


def _backoff(attempt: int) -> float:
    return min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * 2 ** (attempt - 1))

