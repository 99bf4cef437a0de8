"""Log segment bytes and record payloads, without disks."""

from __future__ import annotations

import pytest

from storage_workers.engine.records import (
    ATTEMPTS,
    BATCH,
    DELETED,
    DROPPED,
    EXPIRED,
    KINDS,
    PURGED,
    QUEUE_META,
    RECEIVED,
    RENEWED,
    RESENDS,
    RESTORED,
    SENT,
    SEQUENCE,
    STORED,
    TASK_MOVED,
    TASK_STARTED,
    TASK_STATUS,
    VISIBILITY,
)
from storage_workers.log import records as codec
from storage_workers.log.format import (
    BASE,
    HEADER_SIZE,
    CorruptSegment,
    decode_header,
    encode_header,
    encode_record,
    scan_records,
)

ATTRS = {"bin": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xff"}, "s": {"DataType": "String", "StringValue": "é"}}
EXAMPLES = [
    (SENT, "q", 1_700_000_000_000, 7, [["id-1", "body ✓", ATTRS, "md5", None, 0, {"SenderId": "AIDA"}]]),
    (RECEIVED, "q", 1_700_000_000_000, 1_700_000_030_000, [7, 8]),
    (DELETED, "q", [7]),
    (VISIBILITY, "q", [[8, 1_700_000_040_000]]),
    (EXPIRED, "q", [9, 10]),
    (PURGED, "q"),
    (DROPPED, "q"),
    (RESTORED, "q", [[7, "id-1", "b", ATTRS, "md5", "md5a", {}, 1, 2, 3, 4]]),
    (SEQUENCE, 11),
    (RECEIVED, "q.fifo", 1_700_000_000_000, 1_700_000_030_000, [7], "attempt-1"),
    (STORED, "q.fifo", 1, 12, True, [["id-2", "b", ATTRS, "md5", None, {}, 1, 1, 0, 0, "g", "dedup"]]),
    (BATCH, [(STORED, "dlq", 1, 13, False, []), (DELETED, "q", [7])]),
    (RENEWED, "q.fifo", "attempt-1", 1_700_000_060_000),
    (RESTORED, "q.fifo", [[12, "id-2", "b", {}, "md5", None, {}, 1, 2, 3, 4, "g", "dedup", "attempt-1"]]),
    (QUEUE_META, "q.fifo", True, [["task-1", "arn", None, None, 1, 14, 3, 0, "RUNNING", None]]),
    (RESENDS, "q.fifo", [["id-2", 12, 1, 1]]),
    (ATTEMPTS, "q.fifo", [["attempt-1", 1, [12]]]),
    (TASK_STARTED, "dlq", "task-1", "arn:aws:sqs:us-east-1:0:dlq", {"queue_id": "q", "partition": 1}, 5, 1, 14, 3),
    (TASK_MOVED, "dlq", "task-1", [13]),
    (TASK_STATUS, "dlq", "task-1", "FAILED", "CouldNotDetermineMessageSource"),
]


def test_every_record_kind_has_an_example() -> None:
    assert {r[0] for r in EXAMPLES} == set(KINDS)


@pytest.mark.parametrize("record", EXAMPLES, ids=lambda r: str(r[0]))
def test_records_round_trip_through_payload_bytes(record: tuple) -> None:
    decoded = codec.decode(codec.encode(record))
    assert decoded == tuple(codec.decode(codec.encode(decoded)))
    assert codec.encode(decoded) == codec.encode(record)
    assert decoded[0] == record[0]


def test_a_payload_that_is_not_a_record_is_refused() -> None:
    with pytest.raises(ValueError):
        codec.decode(codec.encode({"not": "a record"}))


def test_header_round_trips_and_damage_is_detected() -> None:
    header = encode_header(BASE)
    assert len(header) == HEADER_SIZE
    assert decode_header(header) == BASE
    assert decode_header(encode_header()) == 0
    for damaged in [header[:10], b"X" + header[1:], header[:-1] + bytes([header[-1] ^ 1])]:
        with pytest.raises(CorruptSegment):
            decode_header(damaged)


def test_scan_stops_at_a_torn_or_damaged_tail() -> None:
    good = [encode_record(b"one"), encode_record(b"two")]
    data = encode_header() + b"".join(good)
    end_of_good = len(data)
    tails = {
        "cut length": encode_record(b"three")[:3],
        "cut payload": encode_record(b"three")[:-1],
        "bad crc": encode_record(b"three")[:-1] + b"X",
        "zeros": b"\0" * 64,
    }
    for name, tail in tails.items():
        scanned = list(scan_records(data + tail))
        assert [bytes(p) for _, p in scanned] == [b"one", b"two"], name
        assert scanned[-1][0] == end_of_good, name


def test_empty_payloads_are_not_records() -> None:
    with pytest.raises(ValueError):
        encode_record(b"")
