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
    resync,
    scan_records,
    spans,
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


def _frames(*records: tuple) -> list[bytes]:
    return [encode_record(codec.encode(r)) for r in records]


def _span_kinds(data: bytes) -> list[tuple[int, int, str]]:
    return [(start, end, "record" if payload is not None else "damaged") for start, end, payload in
            spans(data, codec.readable)]


def test_resync_finds_the_next_intact_record_after_a_damaged_one() -> None:
    # given three records, the second with a flipped payload byte
    one, two, three = _frames((DELETED, "q", [1]), (DELETED, "q", [2]), (DELETED, "q", [3]))
    data = bytearray(encode_header() + one + two + three)
    second = HEADER_SIZE + len(one)
    data[second + 10] ^= 0xFF
    # when a resync starts just past the damaged record's start
    found = resync(bytes(data), second + 1, codec.readable)
    # then it lands where the third record starts
    assert found == second + len(two)


def test_resync_finds_nothing_in_zeros_garbage_or_a_cut_record() -> None:
    tails = {
        "zeros": b"\0" * 4096,
        "text": b"a torn batch of plain text " * 50,
        "cut record": encode_record(codec.encode((DELETED, "q", [1])))[:-1],
        "too short": b"\0\0\0",
    }
    for name, tail in tails.items():
        assert resync(tail, 0, codec.readable) is None, name


def test_resync_skips_a_checked_out_frame_whose_payload_is_not_a_record() -> None:
    # given a frame with a correct CRC around bytes that are not a record, then a record
    junk = encode_record(b"\xc1 not msgpack")
    (record,) = _frames((PURGED, "q"))
    # when resyncing from the start, then the junk frame is passed over for the record
    assert resync(junk + record, 0, codec.readable) == len(junk)


def test_spans_cover_the_segment_with_records_and_damaged_ranges() -> None:
    # given four records with the second and the third damaged, and a torn half record at the end
    frames = _frames(*[(DELETED, "q", [i]) for i in range(1, 5)])
    starts = [HEADER_SIZE + sum(len(f) for f in frames[:i]) for i in range(5)]
    torn = _frames((PURGED, "q"))[0][:5]
    data = bytearray(encode_header() + b"".join(frames) + torn)
    data[starts[1] + 4] ^= 0x01  # second record's CRC
    data[starts[2] + 9] ^= 0x01  # third record's payload
    # when the data is covered with spans
    got = _span_kinds(bytes(data))
    # then the damaged records form one range, the torn half record another, and the rest are records
    assert got == [
        (starts[0], starts[1], "record"),
        (starts[1], starts[3], "damaged"),
        (starts[3], starts[4], "record"),
        (starts[4], len(data), "damaged"),
    ]


def test_spans_of_an_intact_segment_are_its_records() -> None:
    frames = _frames((PURGED, "a"), (PURGED, "b"))
    data = encode_header() + b"".join(frames)
    assert [k for _, _, k in _span_kinds(data)] == ["record", "record"]
    assert list(spans(encode_header(), codec.readable)) == []
