"""The bounded decoders every piece of client input goes through: each input decodes or is refused, never raises
anything else."""

from __future__ import annotations

import base64

import pytest

from ferrymq.protocol.decoding import (
    MAX_DOCUMENT_DEPTH,
    DocumentError,
    decode_base64,
    index_order,
    is_index,
    load_document,
    parse_int,
)

HUGE = "1" * 4301


@pytest.mark.parametrize(("text", "number"), [("0", 0), ("42", 42), ("-7", -7), ("+7", 7), ("007", 7),
                                              ("0" * 40 + "5", 5), ("9" * 19, int("9" * 19))])
def test_ascii_decimal_integers_parse(text: str, number: int) -> None:
    assert parse_int(text) == number


@pytest.mark.parametrize("text", ["", "-", "+", " 5", "5 ", "1_000", "\u0663", "\u00b2", "\uff11", "1e3", "0x10",
                                  "5.0", "--5", "9" * 20, HUGE])
def test_anything_else_is_not_an_integer(text: str) -> None:
    assert parse_int(text) is None


def test_the_digit_bound_is_the_callers_to_choose() -> None:
    assert parse_int("1" * 30, max_digits=30) == int("1" * 30)
    assert parse_int("1" * 31, max_digits=30) is None


@pytest.mark.parametrize(("text", "expected"), [("1", True), ("10", True), (HUGE, True), ("", False),
                                                ("\u00b2", False), ("\u0663", False), ("-1", False), ("x", False)])
def test_list_indexes_are_ascii_digits_of_any_length(text: str, expected: bool) -> None:
    assert is_index(text) is expected


def test_indexes_sort_numerically_without_becoming_ints() -> None:
    indexes = [HUGE, "10", "2", "01", "9" * 30]
    assert sorted(indexes, key=index_order) == ["01", "2", "10", "9" * 30, HUGE]


@pytest.mark.parametrize("text", ["\u00e9t\u00e9", "not base64!", "QQ", "A", b"\xff\xfe"])
def test_base64_that_is_not_is_refused(text: str | bytes) -> None:
    assert decode_base64(text) is None


def test_base64_decodes() -> None:
    assert decode_base64(base64.b64encode(b"\x00\xffbytes").decode()) == b"\x00\xffbytes"


def test_documents_parse() -> None:
    assert load_document('{"a":[1,{"b":null}]}') == {"a": [1, {"b": None}]}
    assert load_document(b"[true]") == [True]


@pytest.mark.parametrize("text", ["", "{", "NaN", '{"a":Infinity}', '"\\ud800"', "1" * 4301, "1e400",
                                  "[" * 3000 + "]" * 3000, '{"a":' * 3000 + "1" + "}" * 3000])
def test_unreadable_or_unbounded_documents_are_document_errors(text: str) -> None:
    with pytest.raises(DocumentError):
        load_document(text)


def test_depth_is_bounded_exactly() -> None:
    at_limit = "[" * MAX_DOCUMENT_DEPTH + "]" * MAX_DOCUMENT_DEPTH
    assert load_document(at_limit) is not None
    with pytest.raises(DocumentError):
        load_document("[" + at_limit + "]")
    with pytest.raises(DocumentError):
        load_document(at_limit, max_depth=MAX_DOCUMENT_DEPTH - 1)


def test_length_is_bounded_when_asked() -> None:
    assert load_document("[1]", max_length=3) == [1]
    with pytest.raises(DocumentError):
        load_document("[1] ", max_length=3)
