"""Encoding of journal records, and detection of a torn tail."""

from __future__ import annotations

from ferrymq.infra.standin.journal import JournalEntry, decode_entries, encode_entry


def _entry(seq: int, body: bytes = b'{"TableName": "t"}') -> JournalEntry:
    return JournalEntry(
        seq=seq,
        at=1_700_000_000.25,
        environ={"REQUEST_METHOD": "POST", "PATH_INFO": "/b/k\xe9", "HTTP_X_AMZ_META_A_B": "v"},
        preserved_header_names={"HTTP_X_AMZ_META_A_B": "x-amz-meta-a_b"},
        body=body,
    )


def test_entries_round_trip() -> None:
    # given two encoded entries back to back
    entries = [_entry(1), _entry(2, body=bytes(range(256)))]
    data = b"".join(encode_entry(e) for e in entries)
    # when decoded, then both come back whole and the intact prefix is everything
    decoded, intact = decode_entries(data)
    assert decoded == entries
    assert intact == len(data)


def test_a_torn_last_record_is_left_out() -> None:
    # given a complete record followed by a record cut short
    first, second = encode_entry(_entry(1)), encode_entry(_entry(2))
    data = first + second[: len(second) - 3]
    # when decoded, then only the complete record counts
    decoded, intact = decode_entries(data)
    assert [e.seq for e in decoded] == [1]
    assert intact == len(first)


def test_a_corrupted_record_stops_decoding() -> None:
    # given a second record whose payload has a flipped byte
    first, second = encode_entry(_entry(1)), bytearray(encode_entry(_entry(2)))
    second[-1] ^= 0xFF
    decoded, intact = decode_entries(first + bytes(second) + encode_entry(_entry(3)))
    # then decoding stops before it: what follows a bad record is not trusted
    assert [e.seq for e in decoded] == [1]
    assert intact == len(first)
