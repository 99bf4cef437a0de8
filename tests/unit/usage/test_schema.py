"""The usage record's rules: billing units, payload measurement, partitions, validation."""

from __future__ import annotations

import pytest

from ferrymq.usage import schema

KIB = 1024


@pytest.mark.parametrize(
    ("bytes_in", "bytes_out", "units"),
    [(0, 0, 1), (1, 0, 1), (64 * KIB, 0, 1), (64 * KIB + 1, 0, 2), (256 * KIB, 0, 4), (0, 200 * KIB, 4),
     (60 * KIB, 10 * KIB, 2), (1024 * KIB, 0, 16)],
)
def test_each_started_64_kib_of_payload_is_one_request(bytes_in: int, bytes_out: int, units: int) -> None:
    assert schema.billable_units(bytes_in, bytes_out) == units


def test_send_counts_body_and_attribute_names_types_and_values() -> None:
    params = {"MessageBody": "héllo", "MessageAttributes": {"k": {"DataType": "String", "StringValue": "vv"}}}

    payload = schema.measure("SendMessage", params, {"MessageId": "x"})

    # "héllo" is 6 bytes in UTF-8; the attribute is 1 + 6 + 2.
    assert payload == (1, 0, 6 + 9, 0, 0)  # (messages_in, entries_failed, bytes_in, messages_out, bytes_out)


def test_batch_counts_entries_and_failed_entries() -> None:
    entries = [{"Id": str(i), "MessageBody": "x" * 100} for i in range(3)]

    payload = schema.measure("SendMessageBatch", {"Entries": entries}, {"Successful": [{}, {}], "Failed": [{}]})

    assert payload == (3, 1, 300, 0, 0)


def test_receive_counts_what_came_back() -> None:
    result = {"Messages": [{"Body": "a" * 10}, {"Body": "b" * 5, "MessageAttributes": {
        "n": {"DataType": "Binary", "BinaryValue": b"\x00\x01"}}}]}

    payload = schema.measure("ReceiveMessage", {"QueueUrl": "u"}, result)

    assert payload == (0, 0, 0, 2, 10 + 5 + 1 + 6 + 2)


def test_unparsed_requests_carry_no_payload() -> None:
    assert schema.measure("Unknown", None, None) == (0, 0, 0, 0, 0)


def test_ts_is_millisecond_utc_and_names_its_partition() -> None:
    ts = schema.format_ts(1_763_854_867.1239)

    assert ts == "2025-11-22T23:41:07.123Z"
    assert schema.partition_of(ts) == ("2025-11-22", "23")
    assert schema.object_key("2025-11-22", "23", "fe", 5, 7) == "usage/v1/dt=2025-11-22/hour=23/fe-5-000007.jsonl.gz"


def _valid() -> dict:
    return {
        "v": 1, "ts": "2026-11-22T23:41:07.123Z", "request_id": "r", "account": None, "access_key_id": None,
        "queue_arn": None, "action": "ListQueues", "outcome": "Success", "http_status": 200, "messages_in": 0,
        "entries_failed": 0, "bytes_in": 0, "messages_out": 0, "bytes_out": 0, "billable_units": 1,
        "latency_ms": 1.5, "instance": "fe", "queue_type": None, "sse": "none", "kms_calls": 0,
        "source_ip": None, "user_agent": None,
    }


def test_a_complete_record_is_valid() -> None:
    assert schema.problems(_valid()) == []


@pytest.mark.parametrize(
    ("change", "problem"),
    [({"v": 2}, "version 2 is not 1"), ({"http_status": "200"}, "http_status is not int"),
     ({"ts": "yesterday"}, "ts is not an ISO 8601 UTC time"), ({"action": None}, "action missing"),
     ({"messages_in": True}, "messages_in is not int")],
)
def test_broken_records_say_why(change: dict, problem: str) -> None:
    assert problem in schema.problems({**_valid(), **change})


def test_a_non_object_is_not_a_record() -> None:
    assert schema.problems([1, 2]) == ["not a JSON object"]


def test_message_actions_have_classes_and_the_rest_is_management() -> None:
    assert schema.action_class("SendMessageBatch") == "send"
    assert schema.action_class("ChangeMessageVisibility") == "visibility"
    assert schema.action_class("CreateQueue") == "management"
