"""The usage writer: batching by hour, retries, the spool (0600, survives a new writer), shutdown flush."""

from __future__ import annotations

import gzip
import stat
import time
from pathlib import Path

import orjson

from ferrymq.clock import ManualClock
from ferrymq.usage import schema
from ferrymq.usage.writer import FirehoseSink, UsageWriter

HOUR_23 = 1_763_852_400.0  # 2025-11-22T23:00:00Z


class MemorySink:
    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.down = False
        self.calls = 0

    def put(self, key: str, body: bytes) -> None:
        self.calls += 1
        if self.down:
            raise ConnectionError("bucket unreachable")
        self.objects[key] = body

    def records(self) -> list[dict]:
        return [orjson.loads(line) for body in self.objects.values() for line in gzip.decompress(body).splitlines()]


def _record(i: int, ts: float) -> tuple:
    """A buffered row: values in schema.FIELD_NAMES order."""
    values = dict.fromkeys(schema.FIELD_NAMES, 0)
    values.update(v=1, ts=ts, request_id=f"r{i}")
    return tuple(values[name] for name in schema.FIELD_NAMES)


def _writer(sink: MemorySink, spool: Path, **kw: object) -> UsageWriter:
    return UsageWriter(sink, spool, "fe-1", clock=ManualClock(HOUR_23), sleep=lambda _: None, **kw)  # type: ignore[arg-type]


def test_flush_writes_one_object_per_record_hour(tmp_path: Path) -> None:
    sink = MemorySink()
    writer = _writer(sink, tmp_path)
    writer.add(_record(1, HOUR_23 + 10))
    writer.add(_record(2, HOUR_23 + 3600 + 5))  # next day, hour 00
    writer.add(_record(3, HOUR_23 + 20))

    writer.flush()

    keys = sorted(sink.objects)
    assert [k.split("/")[2:4] for k in keys] == [["dt=2025-11-22", "hour=23"], ["dt=2025-11-23", "hour=00"]]
    assert sorted(r["request_id"] for r in sink.records()) == ["r1", "r2", "r3"]
    assert sink.records()[0]["ts"].endswith("Z")
    assert writer.pending() == 0 and writer.uploaded == 3


def test_a_transient_failure_is_retried(tmp_path: Path) -> None:
    sink = MemorySink()
    failures = iter([True, False])

    def flaky(key: str, body: bytes) -> None:
        sink.down = next(failures)
        MemorySink.put(sink, key, body)

    sink.put = flaky  # type: ignore[method-assign]
    writer = _writer(sink, tmp_path / "spool")
    writer.add(_record(1, HOUR_23))

    writer.flush()

    assert len(sink.records()) == 1 and writer.spooled == 0


def test_failed_uploads_spool_privately_and_arrive_once_later_even_through_a_new_writer(tmp_path: Path) -> None:
    sink = MemorySink()
    sink.down = True
    spool = tmp_path / "spool"
    writer = _writer(sink, spool, attempts=2)
    for i in range(5):
        writer.add(_record(i, HOUR_23 + i))

    writer.flush()

    files = writer.spooled_files()
    assert len(files) == 1 and writer.spooled == 5 and sink.objects == {}
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    # The process is gone; a new one starts with the bucket back.
    sink.down = False
    restarted = _writer(sink, spool)

    restarted.flush()

    assert sorted(r["request_id"] for r in sink.records()) == [f"r{i}" for i in range(5)]
    assert restarted.spooled_files() == []


def test_spool_waits_while_the_sink_stays_down(tmp_path: Path) -> None:
    sink = MemorySink()
    sink.down = True
    writer = _writer(sink, tmp_path, attempts=1)
    writer.add(_record(1, HOUR_23))
    writer.flush()
    writer.add(_record(2, HOUR_23))

    writer.flush()

    assert len(writer.spooled_files()) == 2 and sink.objects == {}


def test_close_flushes_what_is_buffered(tmp_path: Path) -> None:
    sink = MemorySink()
    writer = _writer(sink, tmp_path, flush_seconds=3600)
    writer.start()
    writer.add(_record(1, HOUR_23))

    writer.close()

    assert [r["request_id"] for r in sink.records()] == ["r1"]


def test_a_full_batch_wakes_the_flusher(tmp_path: Path) -> None:
    sink = MemorySink()
    writer = UsageWriter(sink, tmp_path, "fe", flush_seconds=3600, flush_records=3)
    writer.start()
    try:
        for i in range(3):
            writer.add(_record(i, HOUR_23))
        for _ in range(500):
            if len(sink.records()) == 3:
                break
            time.sleep(0.01)
    finally:
        writer.close()
    assert len(sink.records()) == 3


def test_due_after_the_interval_or_a_full_batch(tmp_path: Path) -> None:
    clock = ManualClock(HOUR_23)
    writer = UsageWriter(MemorySink(), tmp_path, "fe", flush_seconds=10, flush_records=2, clock=clock)
    assert not writer.due()
    writer.add(_record(1, HOUR_23))
    assert not writer.due()
    clock.advance(10)
    assert writer.due()
    writer.flush()
    writer.add(_record(2, HOUR_23))
    writer.add(_record(3, HOUR_23))
    assert writer.due()


class FakeFirehose:
    def __init__(self, fail_first: int = 0) -> None:
        self.fail_first = fail_first
        self.received: list[bytes] = []

    def put_record_batch(self, DeliveryStreamName: str, Records: list[dict]) -> dict:
        answers = []
        for entry in Records:
            if self.fail_first:
                self.fail_first -= 1
                answers.append({"ErrorCode": "ServiceUnavailableException"})
            else:
                self.received.append(entry["Data"])
                answers.append({"RecordId": "x"})
        return {"FailedPutCount": sum(1 for a in answers if "ErrorCode" in a), "RequestResponses": answers}


def test_firehose_gets_one_line_per_record_in_batches_of_at_most_500(tmp_path: Path) -> None:
    firehose = FakeFirehose(fail_first=2)
    writer = UsageWriter(FirehoseSink(firehose, "usage"), tmp_path, "fe", clock=ManualClock(HOUR_23))
    for i in range(1203):
        writer.add(_record(i, HOUR_23))

    writer.flush()

    assert len(firehose.received) == 1203
    assert all(line.endswith(b"\n") and line.count(b"\n") == 1 for line in firehose.received)


def test_two_processes_sharing_a_spool_upload_each_file_and_neither_fails_on_the_other_s_removal(
        tmp_path: Path) -> None:
    # given a spooled object, and two writers on that spool (two gateway processes of one port)
    sink = MemorySink()
    sink.down = True
    spool = tmp_path / "spool"
    first = _writer(sink, spool, attempts=1)
    first.add(_record(1, HOUR_23))
    first.flush()
    [spooled] = first.spooled_files()
    sink.down = False
    second = UsageWriter(sink, spool, "fe-2", clock=ManualClock(HOUR_23), sleep=lambda _: None)
    failed_before = first.failed_uploads

    # when the other uploads and removes the file while this one uploads it too (after its listing)
    class Racing(MemorySink):
        def put(self, key: str, body: bytes) -> None:
            super().put(key, body)
            spooled.unlink(missing_ok=True)

    racing = Racing()
    first._sink = racing
    first._upload_spool()
    # and the other, having listed the file before it went, reads it only after
    second.spooled_files = lambda: [spooled]  # type: ignore[method-assign]
    second._upload_spool()
    # then the object arrived, the spool is empty, and neither counts a failure
    assert list(racing.objects) == [spooled.name.replace("!", "/")] and first.spooled_files() == []
    assert first.failed_uploads == failed_before and second.failed_uploads == 0 and second.uploaded == 0
