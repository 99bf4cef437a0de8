"""The request id a worker RPC frame carries: encoded after the header, read back apart from the arguments,
and absent (the frame unchanged) outside a request."""

from __future__ import annotations

import pytest

from ferrymq.rpc.codec import pack, unpack
from ferrymq.rpc.framing import TRACED, FrameDecoder, FrameError, Op, encode_frame, encode_traced_frame, split_trace


def test_a_traced_frame_carries_the_request_id_before_the_arguments() -> None:
    # given a frame encoded with a request id
    frame = encode_traced_frame(7, Op.SEND, b"5f0c-req", pack([0, "q", "body"]))
    # when it is decoded
    ((request_id, op, payload),) = FrameDecoder().feed(frame)
    # then the operation has the bit, and the id and the arguments come back apart
    assert request_id == 7
    assert op == Op.SEND | TRACED
    trace, args = split_trace(payload)
    assert trace == "5f0c-req"
    assert unpack(args) == [0, "q", "body"]


def test_a_frame_without_a_request_id_is_the_plain_frame() -> None:
    ((_, op, payload),) = FrameDecoder().feed(encode_frame(1, Op.DELETE, pack([0])))
    assert op == Op.DELETE and not op & TRACED
    assert unpack(payload) == [0]


@pytest.mark.parametrize("payload", [b"", b"\x09abc"])
def test_a_traced_payload_too_short_for_its_id_is_refused(payload: bytes) -> None:
    with pytest.raises(FrameError):
        split_trace(payload)

