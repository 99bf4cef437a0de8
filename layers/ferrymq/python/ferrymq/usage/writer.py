"""Shipping usage records without ever slowing or failing a request.

``UsageWriter.add`` is all a request pays: one ``deque.append`` (thread-safe, no lock) and, once the buffer
holds a batch, one wake-up of the flusher.  The flusher thread drains the buffer every ``flush_seconds`` or
``flush_records`` records, and once more on ``close``; it groups records by the hour of their ``ts``,
encodes each group as gzipped JSON Lines and hands it to a sink (S3 or Firehose).

A body the sink refuses is retried (``attempts``, exponential backoff); if it still fails it is written to the
spool directory, one file per object (mode 0600, fsynced, renamed into place), and the flusher uploads spooled
files on every later flush and when a writer starts, so records written before a crash or restart arrive
then.  A spooled file keeps its object key, so an upload repeated after a lost delete overwrites the same
object and no record is counted twice.

Records wait in memory until the next flush: a ``kill -9`` loses at most that much, by design (writing each
record to disk first would put a file write on every request).

Spool file names (``<key with / as !>``)::

    usage!v1!dt=2026-11-22!hour=23!fe-1-1763854867123-000004.jsonl.gz
"""

from __future__ import annotations

import contextlib
import gzip
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

import orjson

from ferrymq.clock import Clock, SystemClock
from ferrymq.usage import schema

log = logging.getLogger(__name__)

_SPOOL_SUFFIX = ".jsonl.gz"
_TMP_SUFFIX = ".tmp"
# Firehose's PutRecordBatch limits: 500 records and 4 MiB a call.
_FIREHOSE_MAX_RECORDS = 500
_FIREHOSE_MAX_BYTES = 4 * 1024 * 1024


class UsageSink(Protocol):
    def put(self, key: str, body: bytes) -> None:
        """Store one gzipped JSON Lines body under ``key``; raise on failure."""
        ...


class S3Sink:
    """Objects in the usage bucket; ``client`` is a boto3 S3 client."""

    def __init__(self, client: Any, bucket: str) -> None:
        self._client = client
        self._bucket = bucket

    def put(self, key: str, body: bytes) -> None:
        self._client.put_object(Bucket=self._bucket, Key=key, Body=body, ContentType="application/x-ndjson",
                                ContentEncoding="gzip")


class FirehoseSink:
    """Records into a Kinesis Data Firehose stream, which batches them into the same object layout.

    The stream partitions by each record's own ``ts`` (dynamic partitioning, see template.yaml), so the key is
    not needed.  Entries Firehose reports failed are retried once; Firehose itself delivers at least once.
    """

    def __init__(self, client: Any, stream: str) -> None:
        self._client = client
        self._stream = stream

    def put(self, key: str, body: bytes) -> None:
        lines = [line + b"\n" for line in gzip.decompress(body).splitlines() if line]
        for batch in _firehose_batches(lines):
            entries = [{"Data": line} for line in batch]
            answer = self._client.put_record_batch(DeliveryStreamName=self._stream, Records=entries)
            if answer.get("FailedPutCount"):
                failed = [e for e, r in zip(entries, answer["RequestResponses"], strict=True) if r.get("ErrorCode")]
                again = self._client.put_record_batch(DeliveryStreamName=self._stream, Records=failed)
                if again.get("FailedPutCount"):
                    raise OSError(f"Firehose refused {again['FailedPutCount']} usage records")


def _firehose_batches(lines: list[bytes]) -> Iterable[list[bytes]]:
    batch: list[bytes] = []
    size = 0
    for line in lines:
        if batch and (len(batch) == _FIREHOSE_MAX_RECORDS or size + len(line) > _FIREHOSE_MAX_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(line)
        size += len(line)
    if batch:
        yield batch


def encode(records: Iterable[dict[str, Any]]) -> bytes:
    """Gzipped JSON Lines of finished records."""
    return gzip.compress(b"".join(orjson.dumps(r) + b"\n" for r in records), compresslevel=6)


Row = tuple[Any, ...]
"""A record as values in ``schema.FIELD_NAMES`` order, ``ts`` as epoch seconds or already formatted."""


def finish_row(row: Row) -> dict[str, Any]:
    """A row as stored: a dict, ``ts`` formatted (which costs microseconds, so not on the request path)."""
    record = dict(zip(schema.FIELD_NAMES, row, strict=True))
    ts = record["ts"]
    if not isinstance(ts, str):
        record["ts"] = schema.format_ts(ts)
    return record


class UsageWriter:
    """Buffers items (rows, or whatever ``finish`` turns into a record in the flusher) and ships them.

    ``weight`` of an item is what it keeps alive in memory (the request path hands over references to the
    request's parameters and result, so measuring them happens here, off the request path): past
    ``flush_bytes`` of it the flusher is woken early, so memory stays bounded whatever the payloads.
    """

    def __init__(self, sink: UsageSink, spool_dir: Path, instance: str, *, flush_seconds: float = 10.0,
                 flush_records: int = 5000, flush_bytes: int = 16 * 1024 * 1024, attempts: int = 3,
                 backoff_seconds: float = 0.2, max_buffered: int = 1_000_000, clock: Clock | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 finish: Callable[[Any], dict[str, Any]] = finish_row) -> None:
        self._finish = finish
        self._flush_bytes = flush_bytes
        self._weight = 0
        self._sink = sink
        self._spool = spool_dir
        self.instance = instance
        self._flush_seconds = flush_seconds
        self._flush_records = flush_records
        self._attempts = attempts
        self._backoff = backoff_seconds
        self._max_buffered = max_buffered
        self._clock = clock or SystemClock()
        self._sleep = sleep
        self._buffer: deque[Any] = deque()
        self._wake = threading.Event()
        self._stop = threading.Event()
        # One flush at a time: the thread's and close()'s (or a test's) must not interleave spool uploads.
        self._flush_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._sequence = 0
        self._last_flush = self._clock.monotonic()
        self.uploaded = 0  # records that reached the sink, spooled ones included once they did
        self.spooled = 0  # records written to the spool
        self.dropped = 0  # records lost: buffer over its cap while the flusher could not keep up
        self.failed_uploads = 0

    # --- the request path --------------------------------------------------------------------------------

    def add(self, item: Any, weight: int = 0) -> None:
        buffer = self._buffer
        if len(buffer) >= self._max_buffered:
            self.dropped += 1
            return
        buffer.append(item)
        # Not atomic with the flusher's reset: it only decides when to wake the flusher early.
        self._weight += weight
        if len(buffer) == self._flush_records or self._weight > self._flush_bytes:
            self._wake.set()

    # --- flushing ----------------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the flusher thread; it first uploads what an earlier process left in the spool."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="usage-flusher", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        self._safe_flush()
        while not self._stop.is_set():
            self._wake.wait(self._flush_seconds)
            self._wake.clear()
            self._safe_flush()

    def _safe_flush(self) -> None:
        try:
            self.flush()
        except Exception:  # the flusher must outlive any one failure; records stay in buffer or spool
            log.exception("usage flush failed")

    def due(self) -> bool:
        """Whether a caller without the thread (the Lambda entry) should flush now."""
        return bool(self._buffer) and (
            len(self._buffer) >= self._flush_records
            or self._weight > self._flush_bytes
            or self._clock.monotonic() - self._last_flush >= self._flush_seconds
        )

    def flush(self) -> None:
        """Ship everything buffered, then whatever the spool holds."""
        with self._flush_lock:
            self._last_flush = self._clock.monotonic()
            records = self._drain()
            delivered = True
            for key, body, count in self._bodies(records):
                if self._deliver(key, body):
                    self.uploaded += count
                else:
                    delivered = False
                    self._spool_body(key, body, count)
            if delivered:
                self._upload_spool()

    def _drain(self) -> list[dict[str, Any]]:
        buffer, finish = self._buffer, self._finish
        self._weight = 0
        records = []
        for _ in range(len(buffer)):
            item = buffer.popleft()
            try:
                records.append(finish(item))
            except Exception:  # one bad item must not hold back the others
                self.dropped += 1
                log.exception("usage record could not be built; dropped")
        return records

    def _bodies(self, records: list[dict[str, Any]]) -> Iterable[tuple[str, bytes, int]]:
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for record in records:
            groups.setdefault(schema.partition_of(record["ts"]), []).append(record)
        first_ms = int(self._clock.now() * 1000)
        for (dt, hour), group in sorted(groups.items()):
            self._sequence += 1
            yield schema.object_key(dt, hour, self.instance, first_ms, self._sequence), encode(group), len(group)

    def _deliver(self, key: str, body: bytes) -> bool:
        for attempt in range(self._attempts):
            try:
                self._sink.put(key, body)
                return True
            except Exception as exc:  # botocore raises many kinds; any of them means "not stored"
                self.failed_uploads += 1
                log.warning("usage upload of %s failed (attempt %d): %s", key, attempt + 1, exc)
                if attempt + 1 < self._attempts:
                    self._sleep(self._backoff * 2**attempt)
        return False

    # --- the spool ---------------------------------------------------------------------------------------

    def _spool_body(self, key: str, body: bytes, count: int) -> None:
        self._spool.mkdir(parents=True, exist_ok=True, mode=0o700)
        final = self._spool / key.replace("/", "!")
        tmp = final.with_name(final.name + _TMP_SUFFIX)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, body)
            os.fsync(fd)
        finally:
            os.close(fd)
        tmp.replace(final)
        _fsync_dir(self._spool)
        self.spooled += count

    def spooled_files(self) -> list[Path]:
        if not self._spool.is_dir():
            return []
        return sorted(p for p in self._spool.iterdir() if p.name.endswith(_SPOOL_SUFFIX))

    def _upload_spool(self) -> None:
        for path in self.spooled_files():
            key = path.name.replace("!", "/")
            try:
                body = path.read_bytes()
            except FileNotFoundError:
                continue  # another process sharing the spool (a gateway of the same port) uploaded it meanwhile
            if not self._deliver_once(key, body):
                return  # the sink is down again: keep the rest for the next flush
            self.uploaded += _line_count(body)
            # Both may have uploaded it: the same key with the same body, so the object is the same.
            path.unlink(missing_ok=True)

    def _deliver_once(self, key: str, body: bytes) -> bool:
        try:
            self._sink.put(key, body)
            return True
        except Exception as exc:  # see _deliver
            self.failed_uploads += 1
            log.warning("usage spool upload of %s failed: %s", key, exc)
            return False

    def close(self, timeout: float = 30.0) -> None:
        """Stop the flusher and flush what is left: shutdown never loses a buffered record."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self._safe_flush()

    def pending(self) -> int:
        return len(self._buffer)


def _line_count(body: bytes) -> int:
    try:
        return gzip.decompress(body).count(b"\n")
    except (OSError, EOFError):
        return 0


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
