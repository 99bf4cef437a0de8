"""A producer that batches sends: ``Producer(queue_url).send(body, **fields) -> Future[MessageId]``.

Messages wait in an open batch until it holds ``max_batch_entries`` (10), until the next message would take
it over ``max_batch_bytes`` (SQS's 1 MiB batch limit, counted as SQS counts, see
:mod:`ferrymq.message_size`), or until ``linger_seconds`` have passed since its first message; then sender
threads send it with one SendMessageBatch. A message too big for any batch is sent on its own with
SendMessage, so that it gets the server's own answer.

Each future resolves to the message's MessageId, or raises: a :class:`BatchEntryError` for an entry the
batch refused (``response["Error"]`` has SQS's Code, Message and SenderFault), or the ``ClientError`` of the
whole call. Entries refused through no fault of the sender (``SenderFault`` false) are sent again, with
backoff, up to ``max_attempts`` times, unchanged: a FIFO entry keeps its MessageDeduplicationId (or its body,
for content-based deduplication), so a retry of a message that was stored after all is deduplicated. When
a whole batch is refused for the sender's fault (one FIFO entry without its MessageGroupId fails the whole
request), its entries are sent one by one so that each future gets its own answer. Calls that fail on the
network or are throttled are retried by botocore itself (standard mode, see :mod:`ferrymq.client`).

FIFO queues (a URL or name ending in ``.fifo``) get one sender thread, so batches leave in the order their
messages were given, and a batch's retries are settled before the next batch goes.

``flush()`` sends what waits and waits for every answer; ``close()`` flushes and stops the threads, as does
leaving a ``with`` block and a normal interpreter exit (atexit), so a script that ends without closing
loses nothing it sent. A process killed by a signal it does not handle runs no atexit hook.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
import weakref
from collections.abc import Mapping
from concurrent.futures import Future, wait
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from ferrymq.client import is_fifo_queue
from ferrymq.limits import MAX_BATCH_BYTES, MAX_BATCH_ENTRIES
from ferrymq.message_size import message_bytes

_log = logging.getLogger(__name__)

ENTRY_FIELDS = frozenset(
    {"MessageAttributes", "MessageSystemAttributes", "DelaySeconds", "MessageGroupId", "MessageDeduplicationId"}
)
"""The keyword arguments ``send`` takes besides the body: a SendMessageBatchRequestEntry's fields."""

RETRY_BASE_SECONDS = 0.1
RETRY_MAX_SECONDS = 2.0


class BatchEntryError(ClientError):
    """One message of a SendMessageBatch was refused (a ``BatchResultErrorEntry``)."""

    def __init__(self, failure: Mapping[str, Any]) -> None:
        super().__init__(
            {
                "Error": {
                    "Code": failure.get("Code", ""),
                    "Message": failure.get("Message", ""),
                    "SenderFault": bool(failure.get("SenderFault")),
                }
            },
            "SendMessageBatch",
        )

    @property
    def code(self) -> str:
        return str(self.response["Error"]["Code"])

    @property
    def sender_fault(self) -> bool:
        return bool(self.response["Error"]["SenderFault"])


@dataclass(slots=True)
class _Message:
    body: str
    fields: dict[str, Any]
    size: int
    future: Future[str]

    def request(self) -> dict[str, Any]:
        return {"MessageBody": self.body, **self.fields}


class Producer:
    """Batches messages for one queue; see the module docstring. Thread-safe."""

    def __init__(
        self,
        queue_url: str,
        *,
        client: Any = None,
        linger_seconds: float = 0.05,
        max_batch_entries: int = MAX_BATCH_ENTRIES,
        max_batch_bytes: int = MAX_BATCH_BYTES,
        max_attempts: int = 5,
        max_concurrent_batches: int = 4,
        flush_at_exit: bool = True,
    ) -> None:
        if linger_seconds < 0:
            raise ValueError("linger_seconds must be >= 0")
        if not 1 <= max_batch_entries <= MAX_BATCH_ENTRIES:
            raise ValueError(f"max_batch_entries must be between 1 and {MAX_BATCH_ENTRIES}")
        if not 1 <= max_batch_bytes <= MAX_BATCH_BYTES:
            raise ValueError(f"max_batch_bytes must be between 1 and {MAX_BATCH_BYTES}")
        if max_attempts < 1 or max_concurrent_batches < 1:
            raise ValueError("max_attempts and max_concurrent_batches must be >= 1")
        self._owns_client = client is None
        if client is None:
            from ferrymq.client import client as make_client

            client = make_client("sqs")
        self.queue_url = queue_url
        self.client = client
        self.fifo = is_fifo_queue(queue_url)
        self._linger = linger_seconds
        self._max_entries = max_batch_entries
        self._max_bytes = max_batch_bytes
        self._max_attempts = max_attempts
        self._cond = threading.Condition()
        self._open: list[_Message] = []
        self._open_bytes = 0
        self._opened_at = 0.0
        self._closed = False
        self._unsettled: set[Future[str]] = set()
        # None tells a sender to stop; a bare _Message is sent on its own with SendMessage.
        self._ready: queue.Queue[list[_Message] | _Message | None] = queue.Queue()
        # Daemon threads: an interpreter exit must not wait for them, the atexit hook flushes through them.
        senders = 1 if self.fifo else max_concurrent_batches
        self._threads = [threading.Thread(target=self._send_loop, name="ferrymq-producer-send", daemon=True)
                         for _ in range(senders)]
        self._threads.append(threading.Thread(target=self._linger_loop, name="ferrymq-producer-linger", daemon=True))
        for thread in self._threads:
            thread.start()
        if flush_at_exit:
            _LIVE.add(self)

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, body: str, **fields: Any) -> Future[str]:
        """Queue ``body`` with SendMessageBatchRequestEntry ``fields`` (MessageAttributes, DelaySeconds,
        MessageGroupId, MessageDeduplicationId, MessageSystemAttributes); the future gives its MessageId."""
        unknown = set(fields) - ENTRY_FIELDS
        if unknown:
            raise TypeError(f"unknown message fields {sorted(unknown)}; known: {sorted(ENTRY_FIELDS)}")
        future: Future[str] = Future()
        # Running from the start: a caller cannot cancel a message the batch may already have sent.
        future.set_running_or_notify_cancel()
        message = _Message(body, fields, message_bytes(body, fields.get("MessageAttributes")), future)
        with self._cond:
            if self._closed:
                raise RuntimeError("the producer is closed")
            self._unsettled.add(future)
            future.add_done_callback(self._settled)
            if message.size > self._max_bytes:
                self._ready.put(message)
                return future
            if self._open and self._open_bytes + message.size > self._max_bytes:
                self._seal()
            self._open.append(message)
            self._open_bytes += message.size
            if len(self._open) >= self._max_entries:
                self._seal()
            elif len(self._open) == 1:
                self._opened_at = time.monotonic()
                self._cond.notify_all()
        return future

    def flush(self, timeout: float | None = None) -> bool:
        """Send every waiting message now and wait for all answers; False if ``timeout`` ran out first."""
        with self._cond:
            if self._open:
                self._seal()
            unsettled = list(self._unsettled)
        _done, pending = wait(unsettled, timeout)
        return not pending

    def close(self, timeout: float | None = None) -> None:
        """Flush, then stop the threads. Further sends raise RuntimeError."""
        with self._cond:
            if self._closed:
                return
        self.flush(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        senders = len(self._threads) - 1
        for _ in range(senders):
            self._ready.put(None)
        for thread in self._threads:
            thread.join(timeout)
        _LIVE.discard(self)
        if self._owns_client:
            self.client.close()

    def _settled(self, future: Future[str]) -> None:
        with self._cond:
            self._unsettled.discard(future)

    def _seal(self) -> None:
        """Hand the open batch to the senders (the condition's lock held)."""
        self._ready.put(self._open)
        self._open = []
        self._open_bytes = 0

    def _linger_loop(self) -> None:
        with self._cond:
            while not self._closed:
                if not self._open:
                    self._cond.wait()
                    continue
                left = self._opened_at + self._linger - time.monotonic()
                if left <= 0:
                    self._seal()
                else:
                    self._cond.wait(left)

    def _send_loop(self) -> None:
        while True:
            work = self._ready.get()
            if work is None:
                return
            try:
                if isinstance(work, _Message):
                    self._send_one(work)
                else:
                    self._send_batch(work)
            except Exception as exc:  # a bug must not strand the futures of this batch
                _log.exception("sending to %s failed", self.queue_url)
                for message in [work] if isinstance(work, _Message) else work:
                    if not message.future.done():
                        message.future.set_exception(exc)

    def _send_one(self, message: _Message) -> None:
        try:
            answer = self.client.send_message(QueueUrl=self.queue_url, **message.request())
        except (ClientError, BotoCoreError) as exc:
            message.future.set_exception(exc)
            return
        message.future.set_result(answer["MessageId"])

    def _send_batch(self, batch: list[_Message]) -> None:
        attempt = 1
        while True:
            entries = [{"Id": str(i), **message.request()} for i, message in enumerate(batch)]
            try:
                answer = self.client.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
            except ClientError as exc:
                if len(batch) > 1 and _sender_fault(exc):
                    # One bad entry can fail the whole request; alone, each gets its own answer.
                    for message in batch:
                        self._send_one(message)
                    return
                _fail_all(batch, exc)
                return
            except BotoCoreError as exc:
                _fail_all(batch, exc)
                return
            for success in answer.get("Successful", []):
                batch[int(success["Id"])].future.set_result(success["MessageId"])
            again: list[_Message] = []
            for failure in answer.get("Failed", []):
                message = batch[int(failure["Id"])]
                if failure.get("SenderFault") or attempt >= self._max_attempts:
                    message.future.set_exception(BatchEntryError(failure))
                else:
                    again.append(message)
            if not again:
                return
            _log.info("retrying %d of %d entries sent to %s", len(again), len(batch), self.queue_url)
            time.sleep(min(RETRY_MAX_SECONDS, RETRY_BASE_SECONDS * 2 ** (attempt - 1)))
            attempt += 1
            batch = again


def _sender_fault(exc: ClientError) -> bool:
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    return 400 <= status < 500 and status != 429 and not _is_throttling(exc)


def _is_throttling(exc: ClientError) -> bool:
    code = str(exc.response.get("Error", {}).get("Code", ""))
    return "Throttl" in code or code in {"RequestThrottled", "TooManyRequestsException", "SlowDown"}


def _fail_all(batch: list[_Message], exc: BaseException) -> None:
    for message in batch:
        message.future.set_exception(exc)


_LIVE: weakref.WeakSet[Producer] = weakref.WeakSet()


@atexit.register
def _flush_at_exit() -> None:
    for producer in list(_LIVE):
        try:
            producer.close()
        except Exception:
            _log.exception("flushing a producer at exit failed")
