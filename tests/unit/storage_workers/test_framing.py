"""The worker RPC's frames and payloads, without sockets."""

from __future__ import annotations

import pytest

from ferrymq.errors import InternalError, QueueDoesNotExist, ReceiptHandleIsInvalid
from ferrymq.rpc.codec import pack, pack_error, unpack, unpack_error
from ferrymq.rpc.framing import HEADER_SIZE, FrameDecoder, FrameError, Op, encode_frame


def test_frame_layout_is_length_id_op_payload() -> None:
    frame = encode_frame(0x01020304, Op.SEND, b"xyz")
    assert frame == b"\x00\x00\x00\x08" + b"\x01\x02\x03\x04" + b"\x02" + b"xyz"
    assert HEADER_SIZE == 9


def test_decoder_yields_frames_fed_byte_by_byte() -> None:
    stream = encode_frame(1, Op.PING, b"") + encode_frame(2, Op.RECEIVE, b"abc") + encode_frame(3, 0, b"d" * 1000)
    decoder = FrameDecoder()
    frames = []
    for i in range(len(stream)):
        frames.extend(decoder.feed(stream[i : i + 1]))
    assert frames == [(1, Op.PING, b""), (2, Op.RECEIVE, b"abc"), (3, 0, b"d" * 1000)]
    assert decoder.buffered == 0


def test_decoder_yields_many_frames_from_one_chunk_and_keeps_the_rest() -> None:
    whole = encode_frame(7, 1, b"a") + encode_frame(8, 1, b"b")
    partial = encode_frame(9, 1, b"ccc")
    decoder = FrameDecoder()
    assert decoder.feed(whole + partial[:5]) == [(7, 1, b"a"), (8, 1, b"b")]
    assert decoder.feed(partial[5:]) == [(9, 1, b"ccc")]


@pytest.mark.parametrize("length", [0, 4, 2**31])
def test_decoder_rejects_impossible_lengths(length: int) -> None:
    with pytest.raises(FrameError):
        FrameDecoder(max_frame=1 << 20).feed(length.to_bytes(4, "big") + b"\0" * 8)


def test_payloads_keep_bytes_and_strings_apart() -> None:
    value = {"s": "text", "b": b"\x00\xff", "n": [1, None, 2.5], "nested": {"k": [b"x"]}}
    assert unpack(pack(value)) == value
    assert unpack(pack((1, 2))) == [1, 2]


def test_errors_travel_as_code_and_message() -> None:
    error = unpack_error(pack_error(ReceiptHandleIsInvalid("bad handle")))
    assert type(error) is ReceiptHandleIsInvalid
    assert error.message == "bad handle"
    assert type(unpack_error(pack_error(QueueDoesNotExist()))) is QueueDoesNotExist


def test_unknown_or_garbled_errors_become_internal_errors() -> None:
    assert type(unpack_error(pack({"code": "NoSuchThing", "message": "?"}))) is InternalError
    assert type(unpack_error(b"\xc1")) is InternalError
