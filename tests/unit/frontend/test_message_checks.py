import pytest

from ferrymq.errors import (
    BatchEntryIdsNotDistinct,
    EmptyBatchRequest,
    InvalidBatchEntryId,
    InvalidMessageContents,
    InvalidParameterValue,
    MissingParameter,
    TooManyEntriesInBatchRequest,
)
from ferrymq.frontend import message_checks as checks
from ferrymq.message_size import attributes_bytes


def test_body_accepts_the_sqs_character_set() -> None:
    body = "tab\t nl\n cr\r plain é \ue000 \U0001f600"
    assert checks.check_body(body) == body


@pytest.mark.parametrize("bad", ["\x00", "a\x08b", "\ufffe", "\x1f"])
def test_body_rejects_characters_outside_the_set(bad: str) -> None:
    with pytest.raises(InvalidMessageContents, match="Invalid characters found"):
        checks.check_body(bad)


@pytest.mark.parametrize("others", ["", "é", "\U0001f600"], ids=["ascii", "latin", "astral"])
def test_every_character_below_0x80_is_judged_as_the_set_says_in_ascii_bodies_and_others(others: str) -> None:
    # ASCII bodies take a path of their own: each of the 128 characters, alone and amid others, with and without
    # a non-ASCII character beside it, is accepted exactly when SQS's set holds it (tab, newline, return, 0x20-0x7F)
    for code in range(0x80):
        allowed = code in (0x09, 0x0A, 0x0D) or code >= 0x20
        for body in (chr(code) + others, f"head{chr(code)}tail{others}"):
            if allowed:
                assert checks.check_body(body) == body
            else:
                with pytest.raises(InvalidMessageContents):
                    checks.check_body(body)


@pytest.mark.parametrize("missing", [None, ""])
def test_body_is_required(missing: str | None) -> None:
    with pytest.raises(MissingParameter, match="MessageBody"):
        checks.check_body(missing)


def test_message_attributes_are_canonicalised() -> None:
    attrs = {
        "s": {"DataType": "String", "StringValue": "v"},
        "n": {"DataType": "Number.float", "StringValue": "1.5"},
        "b": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
    }
    assert checks.check_message_attributes(attrs) == attrs


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        ({"AWS.x": {"DataType": "String", "StringValue": "v"}}, "name 'AWS.x' is invalid"),
        ({"a..b": {"DataType": "String", "StringValue": "v"}}, "is invalid"),
        ({".a": {"DataType": "String", "StringValue": "v"}}, "is invalid"),
        ({"a": {"DataType": "Float", "StringValue": "v"}}, "type of message attribute 'a' is invalid"),
        ({"a": {"StringValue": "v"}}, "non-empty message attribute type"),
        ({"a": {"DataType": "Number", "StringValue": "abc"}}, "cast the value"),
        ({"a": {"DataType": "String", "StringValue": ""}},
         r"^Message \(user\) attribute 'a' must contain a non-empty value of type 'String'\.$"),
        ({"a": {"DataType": "Binary", "StringValue": "x"}}, "must use field 'Binary'"),
        ({f"a{i}": {"DataType": "String", "StringValue": "v"} for i in range(11)}, r"\[11\] exceeds"),
    ],
)
def test_bad_message_attributes_are_rejected(attrs: dict, message: str) -> None:
    with pytest.raises(InvalidParameterValue, match=message):
        checks.check_message_attributes(attrs)


def test_attribute_size_counts_name_type_and_value() -> None:
    attrs = {"ab": {"DataType": "String", "StringValue": "xyz"}, "c": {"DataType": "Binary", "BinaryValue": b"12"}}
    assert attributes_bytes(attrs) == (2 + 6 + 3) + (1 + 6 + 2)


def test_batch_entry_rules() -> None:
    with pytest.raises(EmptyBatchRequest):
        checks.check_batch_entries([], "SendMessageBatchRequestEntry")
    with pytest.raises(TooManyEntriesInBatchRequest, match="You have sent 11"):
        checks.check_batch_entries([{"Id": str(i)} for i in range(11)], "SendMessageBatchRequestEntry")
    with pytest.raises(BatchEntryIdsNotDistinct, match="Id a repeated"):
        checks.check_batch_entries([{"Id": "a"}, {"Id": "a"}], "SendMessageBatchRequestEntry")
    with pytest.raises(InvalidBatchEntryId):
        checks.check_batch_entries([{"Id": "bad id!"}], "SendMessageBatchRequestEntry")
    assert len(checks.check_batch_entries([{"Id": "a"}, {"Id": "b-1_"}], "X")) == 2


def test_optional_int_range() -> None:
    assert checks.optional_int({}, "MaxNumberOfMessages", 1, 10) is None
    assert checks.optional_int({"MaxNumberOfMessages": 10}, "MaxNumberOfMessages", 1, 10) == 10
    with pytest.raises(InvalidParameterValue, match="Value 11 for parameter MaxNumberOfMessages is invalid"):
        checks.optional_int({"MaxNumberOfMessages": 11}, "MaxNumberOfMessages", 1, 10)


@pytest.mark.parametrize("name", ["attr.1øßä", "Größe", "café-au_lait.2"])
def test_attribute_names_with_latin_letters_beyond_ascii_are_valid(name: str) -> None:
    # AWS takes these (recorded against AWS: "attr.1øßä")
    attrs = {name: {"DataType": "String", "StringValue": "v"}}
    assert checks.check_message_attributes(attrs) == attrs


@pytest.mark.parametrize("name", ["a b", "emoji😀", "x/y", "漢字"])
def test_attribute_names_with_other_characters_are_invalid(name: str) -> None:
    with pytest.raises(InvalidParameterValue, match=f"^Message attribute name '{name}' is invalid.$"):
        checks.check_message_attributes({name: {"DataType": "String", "StringValue": "v"}})
