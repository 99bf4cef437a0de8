"""Log segment bytes and record payloads, without disks."""

from __future__ import annotations

import pytest

from ferrymq.storage.engine.records import (
    ATTEMPTS,
    BATCH,
    CREDITS,
    DELETED,
    DROPPED,
    EXPIRED,
    GONE,
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
from ferrymq.storage.log import records as codec
from ferrymq.storage.log.epochs import EpochHistory
from ferrymq.storage.log.format import (
    BASE,
    COMMIT,
    EPOCHS,
    FRAME_OVERHEAD,
    HEADER_SIZE,
    HEADER_SIZE_V1,
    RECORD,
    SNAPSHOT,
    VERSION,
    VERSION_1,
    BatchScan,
    CorruptSegment,
    SegmentHeader,
    commit_matches,
    committed,
    decode_header,
    encode_commit,
    encode_frame,
    encode_frame_v1,
    encode_header,
    encode_header_v1,
    resync,
    scan_frames,
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
    (GONE, "q", 2, [["id-1", 1]]),
    (TASK_STARTED, "dlq", "task-1", "arn:aws:sqs:us-east-1:0:dlq", {"queue_id": "q", "partition": 1}, 5, 1, 14, 3),
    (TASK_MOVED, "dlq", "task-1", [13]),
    (TASK_STATUS, "dlq", "task-1", "FAILED", "CouldNotDetermineMessageSource"),
    (SENT, "q", 1_700_000_000_000, 14, [["id-3", "b", {}, "md5", None, 0, {"SenderId": "AIDA", "FerryMQPriority": 2}]]),
    (CREDITS, "q", [-1, 1, 0]),
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


def test_headers_of_both_versions_round_trip_and_damage_is_detected() -> None:
    # version 2 carries the first offset, and for a base segment the offset and epoch of its snapshot
    header = encode_header(BASE, 101, 100, 7)
    assert len(header) == HEADER_SIZE == 36
    assert decode_header(header) == SegmentHeader(VERSION, BASE, 101, 100, 7)
    assert decode_header(encode_header(0, 5)) == SegmentHeader(VERSION, 0, 5, 0, 0)
    # version 1 is still read
    old = encode_header_v1(BASE)
    assert len(old) == HEADER_SIZE_V1 == 16
    assert decode_header(old) == SegmentHeader(VERSION_1, BASE)
    assert decode_header(old).size == HEADER_SIZE_V1 and decode_header(header).size == HEADER_SIZE
    damaged_headers = [
        header[:30],
        b"X" + header[1:],
        header[:-1] + bytes([header[-1] ^ 1]),
        header[:13] + b"\x09" + header[14:],  # the first offset
        old[:10],
        old[:-1] + bytes([old[-1] ^ 1]),
    ]
    for damaged in damaged_headers:
        with pytest.raises(CorruptSegment):
            decode_header(damaged)


def test_a_header_of_an_unknown_version_is_named_as_such() -> None:
    future = b"FERRYLOG\x00\x03" + bytes(26)
    with pytest.raises(CorruptSegment, match="unsupported log format version 3"):
        decode_header(future)


def _data(*frames: bytes) -> bytes:
    return encode_header() + b"".join(frames)


def test_frames_carry_flags_epoch_and_offset() -> None:
    # given frames of every kind
    data = _data(
        encode_frame(RECORD, 3, 41, b"one"),
        encode_frame(SNAPSHOT, 2, 40, b"two"),
        encode_frame(EPOCHS, 2, 40, EpochHistory([(0, 1), (2, 30)]).encode()),
        encode_commit(b"batch", 3, 41),
    )
    # when scanned, then each comes back with what it was written with, and its place
    frames = list(scan_frames(data, HEADER_SIZE))
    assert [(f.flags, f.epoch, f.offset) for f in frames] == [(RECORD, 3, 41), (SNAPSHOT, 2, 40), (EPOCHS, 2, 40),
                                                             (COMMIT, 3, 41)]
    assert bytes(frames[0].payload) == b"one"
    assert frames[0].start == HEADER_SIZE and frames[0].end == HEADER_SIZE + FRAME_OVERHEAD + 3
    assert [f.start for f in frames[1:]] == [f.end for f in frames[:-1]]
    assert frames[-1].end == len(data)


@pytest.mark.parametrize("at", [8, 9, 12, 13, 20, 21], ids=["flags", "epoch", "epoch-low", "offset", "offset-low",
                                                            "payload"])
def test_the_checksum_covers_flags_epoch_offset_and_payload(at: int) -> None:
    # given a frame with one byte after its CRC field changed
    frame = bytearray(encode_frame(RECORD, 1, 2, b"payload"))
    frame[at] ^= 0x01
    # when scanned, then it does not check out
    assert list(scan_frames(_data(bytes(frame)), HEADER_SIZE)) == []


def test_frames_of_unknown_kinds_empty_payloads_and_out_of_range_fields_are_refused() -> None:
    assert list(scan_frames(_data(encode_frame(0x42, 0, 1, b"x")), HEADER_SIZE)) == []
    for bad in [lambda: encode_frame(RECORD, 0, 1, b""), lambda: encode_frame(RECORD, -1, 1, b"x"),
                lambda: encode_frame(RECORD, 0, 2**64, b"x"), lambda: encode_frame_v1(b"")]:
        with pytest.raises(ValueError):
            bad()


def test_scan_stops_at_a_torn_or_damaged_tail() -> None:
    good = [encode_frame(RECORD, 0, 1, b"one"), encode_frame(RECORD, 0, 2, b"two")]
    data = _data(*good)
    three = encode_frame(RECORD, 0, 3, b"three")
    tails = {
        "cut length": three[:3],
        "cut head": three[:15],
        "cut payload": three[:-1],
        "bad crc": three[:-1] + b"X",
        "zeros": b"\0" * 64,
    }
    for name, tail in tails.items():
        scanned = list(scan_frames(data + tail, HEADER_SIZE))
        assert [bytes(f.payload) for f in scanned] == [b"one", b"two"], name
        assert scanned[-1].end == len(data), name


def test_version_1_frames_scan_as_records_without_offsets() -> None:
    data = encode_header_v1() + encode_frame_v1(b"one") + encode_frame_v1(b"two")[:-1]
    frames = list(scan_frames(data, HEADER_SIZE_V1, VERSION_1))
    assert [(f.flags, f.epoch, f.offset, bytes(f.payload)) for f in frames] == [(RECORD, 0, 0, b"one")]


def _frames(*records: tuple) -> list[bytes]:
    return [encode_frame(RECORD, 0, n, codec.encode(r)) for n, r in enumerate(records, start=1)]


def _span_kinds(data: bytes) -> list[tuple[int, int, str]]:
    return [(start, end, "frame" if frame is not None else "damaged") for start, end, frame in
            spans(data, codec.readable, HEADER_SIZE)]


def test_resync_finds_the_next_intact_frame_after_a_damaged_one() -> None:
    # given three records, the second with a flipped payload byte
    one, two, three = _frames((DELETED, "q", [1]), (DELETED, "q", [2]), (DELETED, "q", [3]))
    data = bytearray(_data(one, two, three))
    second = HEADER_SIZE + len(one)
    data[second + 25] ^= 0xFF
    # when a resync starts just past the damaged frame's start
    found = resync(bytes(data), second + 1, codec.readable)
    # then it lands where the third frame starts
    assert found == second + len(two)


def test_resync_finds_nothing_in_zeros_garbage_or_a_cut_frame() -> None:
    tails = {
        "zeros": b"\0" * 4096,
        "text": b"a torn batch of plain text " * 50,
        "cut frame": _frames((DELETED, "q", [1]))[0][:-1],
        "too short": b"\0\0\0",
    }
    for name, tail in tails.items():
        assert resync(tail, 0, codec.readable) is None, name
        assert resync(tail, 0, codec.readable, VERSION_1) is None, name


def test_resync_skips_a_checked_out_frame_that_does_not_hold_what_its_flags_say() -> None:
    # given frames with a correct CRC around bytes that are not a record, a commit or an epoch history
    junk = [encode_frame(RECORD, 0, 1, b"\xc1 not msgpack"), encode_frame(COMMIT, 0, 1, b"short"),
            encode_frame(EPOCHS, 0, 1, b"\x93\x01\x02\x03")]
    (record,) = _frames((PURGED, "q"))
    # when resyncing from the start, then each is passed over for the record
    for frame in junk:
        assert resync(frame + record, 0, codec.readable) == len(frame)


def test_spans_cover_the_segment_with_frames_and_damaged_ranges() -> None:
    # given four records with the second and the third damaged, and a torn half frame at the end
    frames = _frames(*[(DELETED, "q", [i]) for i in range(1, 5)])
    starts = [HEADER_SIZE + sum(len(f) for f in frames[:i]) for i in range(5)]
    torn = _frames((PURGED, "q"))[0][:5]
    data = bytearray(_data(*frames) + torn)
    data[starts[1] + 4] ^= 0x01  # second frame's CRC
    data[starts[2] + FRAME_OVERHEAD + 2] ^= 0x01  # third frame's payload
    # when the data is covered with spans
    got = _span_kinds(bytes(data))
    # then the damaged frames form one range, the torn half frame another, and the rest are frames
    assert got == [
        (starts[0], starts[1], "frame"),
        (starts[1], starts[3], "damaged"),
        (starts[3], starts[4], "frame"),
        (starts[4], len(data), "damaged"),
    ]


def test_spans_of_an_intact_segment_are_its_frames() -> None:
    data = _data(*_frames((PURGED, "a"), (PURGED, "b")))
    assert [k for _, _, k in _span_kinds(data)] == ["frame", "frame"]
    assert list(spans(encode_header(), codec.readable, HEADER_SIZE)) == []


def test_a_commit_describes_the_bytes_of_its_batch() -> None:
    # given a batch of two frames and its commit
    batch = b"".join(_frames((PURGED, "a"), (PURGED, "b")))
    data = _data(batch, encode_commit(batch, 4, 2))
    commit = list(scan_frames(data, HEADER_SIZE))[-1]
    # then it matches them, names the last record's epoch and offset, and no longer matches a changed batch
    assert commit.flags == COMMIT and (commit.epoch, commit.offset) == (4, 2)
    assert commit_matches(data, commit)
    changed = bytearray(data)
    changed[HEADER_SIZE + 30] ^= 0x01
    assert not commit_matches(bytes(changed), commit)


def _batch(*frames: bytes) -> bytes:
    data = b"".join(frames)
    return data + encode_commit(data, 0, 0)


def test_a_batch_scan_yields_committed_batches_and_stops_at_one_whose_commit_is_missing_or_wrong() -> None:
    a, b, c, d = _frames(*[(PURGED, str(i)) for i in range(4)])
    first, second = _batch(a, b), _batch(c)
    cases = {
        "all committed": (_data(first, second), 2, HEADER_SIZE + len(first) + len(second)),
        "commit missing": (_data(first, c, d), 1, HEADER_SIZE + len(first)),
        "commit torn": (_data(first, second[:-3]), 1, HEADER_SIZE + len(first)),
        # a commit that does not describe the bytes before it (here: d's batch, with c's commit)
        "commit wrong": (_data(first, d, encode_commit(c, 0, 0)), 1, HEADER_SIZE + len(first)),
        "frame damaged": (_data(first, c[:-1] + b"X", d), 1, HEADER_SIZE + len(first)),
    }
    for name, (data, batches, end) in cases.items():
        scan = BatchScan(data, HEADER_SIZE, VERSION)
        got = list(scan)
        assert len(got) == batches, name
        assert scan.end == end, name
    scan = BatchScan(_data(first, second), HEADER_SIZE, VERSION)
    assert [[bytes(f.payload) for f in batch] for batch in scan] == [
        [a[FRAME_OVERHEAD:], b[FRAME_OVERHEAD:]], [c[FRAME_OVERHEAD:]]
    ]
    assert scan.last_commit is not None and scan.last_commit.end == scan.end


def test_a_version_1_batch_scan_takes_every_frame_for_a_batch_of_its_own() -> None:
    data = encode_header_v1() + encode_frame_v1(b"one") + encode_frame_v1(b"two") + b"\0\0"
    scan = BatchScan(data, HEADER_SIZE_V1, VERSION_1)
    assert [len(batch) for batch in scan] == [1, 1]
    assert scan.end == len(data) - 2 and scan.last_commit is None


def test_committed_frames_come_in_batches_of_about_the_size_asked_each_with_its_commit() -> None:
    frames = _frames(*[(PURGED, "q" * 40) for _ in range(10)])
    chunks = list(committed(frames, 2, 9, batch_bytes=3 * len(frames[0])))
    data = _data(*chunks)
    scan = BatchScan(data, HEADER_SIZE, VERSION)
    assert [len(batch) for batch in scan] == [3, 3, 3, 1]
    assert scan.end == len(data)
    assert list(committed([], 0, 0)) == []
