"""MD5 digests, against values Amazon SQS itself returned (recorded in LocalStack's SQS test snapshots)."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from ferrymq.protocol.md5 import md5_of_attributes, md5_of_body


def _string(value: str) -> dict[str, Any]:
    return {"DataType": "String", "StringValue": value}


@pytest.mark.parametrize(
    ("body", "digest"),
    [
        ("msg", "6e2baaf3b97dbeef01c0043275f9a0e7"),
        ("message-body-1", "19c9e282d65f9733bc6b35d50062c7ee"),
        ("", "d41d8cd98f00b204e9800998ecf8427e"),
        ("The quick brown fox jumps over the lazy dog", "9e107d9d372bb6826bd81d3542a419d6"),
    ],
)
def test_md5_of_body_matches_known_digests(body: str, digest: str) -> None:
    assert md5_of_body(body) == digest


def test_md5_of_body_digests_utf8() -> None:
    assert md5_of_body("\u00e9\U0001f600") == hashlib.md5(b"\xc3\xa9\xf0\x9f\x98\x80").hexdigest()


@pytest.mark.parametrize(
    ("attributes", "digest"),
    [
        ({"Foo": _string("Bar")}, "ae7155c6026991b6d54b11589678bf9c"),
        ({"General": _string("Kenobi"), "Hello": _string("There"), "Help.Me": _string("Me")},
         "4c360f3fdafd970e05fae2f149d997f5"),
        ({"General": _string("Kenobi"), "Hello": _string("There")}, "fca026605781cb4126a1e9044df24232"),
        ({"Hello": _string("There")}, "a311262e065454b75da111d535b8dacd"),
        ({"Hello": _string("There"), "Help.Me": _string("Me")}, "83fee93c1bcd8b9a5a923ffacdc636c7"),
        ({"attr1": {"DataType": "Binary",
                    "BinaryValue": b"traceparent\x1e00-774062d6c37081a5a0b9b5b88e30627c-2d2482211f6489da-01"}},
         "8cbe4db156db8a94db8b801b7addb984"),
    ],
)
def test_md5_of_attributes_matches_what_sqs_returned(attributes: dict[str, Any], digest: str) -> None:
    assert md5_of_attributes(attributes) == digest


def test_md5_of_attributes_sorts_by_name_whatever_the_order_given() -> None:
    # given the same attributes in another order
    reordered = {"Help.Me": _string("Me"), "Hello": _string("There"), "General": _string("Kenobi")}
    # then the digest is SQS's, which sorts names
    assert md5_of_attributes(reordered) == "4c360f3fdafd970e05fae2f149d997f5"


def test_md5_of_attributes_depends_on_data_type_and_transport() -> None:
    as_string = md5_of_attributes({"a": _string("1")})
    as_number = md5_of_attributes({"a": {"DataType": "Number", "StringValue": "1"}})
    as_binary = md5_of_attributes({"a": {"DataType": "Binary", "BinaryValue": b"1"}})
    assert len({as_string, as_number, as_binary}) == 3


@pytest.mark.parametrize("empty", [{}, None])
def test_md5_of_no_attributes_is_none(empty: dict[str, Any] | None) -> None:
    assert md5_of_attributes(empty) is None
