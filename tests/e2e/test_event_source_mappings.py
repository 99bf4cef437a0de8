"""Event-source mappings through ``ferrymq.client("ferrymq")`` against the session's stack: Lambda's calls,
answers and errors; bad input changes nothing; the signing secret is shown once and never stored in the clear."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.config import Config

import ferrymq
from tests.e2e.conftest import Stack, new_queue


def api_client(stack: Stack, key_id: str | None = None, secret: str | None = None, *, validate: bool = True) -> Any:
    return ferrymq.client("ferrymq", endpoint_url=stack.endpoint, region_name=stack.region,
                          aws_access_key_id=key_id or stack.access_key,
                          aws_secret_access_key=secret or stack.secret_key,
                          config=Config(parameter_validation=validate, retries={"total_max_attempts": 1}))


@pytest.fixture
def api(stack: Stack) -> Any:
    return api_client(stack)


@pytest.fixture
def raw(stack: Stack) -> Any:
    """The client without botocore's own parameter checks, so hostile values reach the server."""
    return api_client(stack, validate=False)


def queue_arn(sdk: Any, url: str) -> str:
    return str(sdk.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"])


@pytest.fixture
def queue(sdk: Any) -> Iterator[str]:
    url = new_queue(sdk, "mapped")
    yield queue_arn(sdk, url)
    sdk.delete_queue(QueueUrl=url)


def mine(api: Any, arn: str) -> list[dict[str, Any]]:
    return list(api.list_event_source_mappings(EventSourceArn=arn)["EventSourceMappings"])


def test_an_http_mapping_is_created_read_listed_updated_and_deleted(api: Any, queue: str) -> None:
    # given a mapping of a queue to an HTTP endpoint
    created = api.create_event_source_mapping(
        EventSourceArn=queue, Destination={"Url": "http://127.0.0.1:9/hook"}, BatchSize=100,
        MaximumBatchingWindowInSeconds=5, FunctionResponseTypes=["ReportBatchItemFailures"],
        ScalingConfig={"MaximumConcurrency": 3}, FilterCriteria={"Filters": [{"Pattern": '{"body": {"k": ["v"]}}'}]})
    # then the answer is Lambda's configuration, with the signing secret shown this once
    mapping_id = created["UUID"]
    assert str(uuid.UUID(mapping_id)) == mapping_id
    assert created["SigningSecret"].startswith("fmqs_") and len(created["SigningSecret"]) > 40
    expected = {"UUID": mapping_id, "EventSourceArn": queue, "Destination": {"Url": "http://127.0.0.1:9/hook"},
                "BatchSize": 100, "MaximumBatchingWindowInSeconds": 5, "State": "Enabled",
                "FunctionResponseTypes": ["ReportBatchItemFailures"], "ScalingConfig": {"MaximumConcurrency": 3},
                "FilterCriteria": {"Filters": [{"Pattern": '{"body": {"k": ["v"]}}'}]},
                "StateTransitionReason": "USER_INITIATED"}
    assert {k: created[k] for k in expected} == expected
    # when it is read and listed, the secret is not shown
    got = api.get_event_source_mapping(UUID=mapping_id)
    assert "SigningSecret" not in got and {k: got[k] for k in expected} == expected
    assert [m["UUID"] for m in mine(api, queue)] == [mapping_id]
    # when it is updated, what is not named stays
    updated = api.update_event_source_mapping(UUID=mapping_id, Enabled=False, BatchSize=10,
                                              FunctionResponseTypes=[], ScalingConfig={})
    assert (updated["State"], updated["BatchSize"], updated["FunctionResponseTypes"]) == ("Disabled", 10, [])
    assert "ScalingConfig" not in updated and updated["MaximumBatchingWindowInSeconds"] == 5
    assert updated["FilterCriteria"] == expected["FilterCriteria"]
    assert api.get_event_source_mapping(UUID=mapping_id)["State"] == "Disabled"
    # when it is deleted, the answer shows it Deleting and it is gone
    assert api.delete_event_source_mapping(UUID=mapping_id)["State"] == "Deleting"
    with pytest.raises(api.exceptions.ResourceNotFound) as gone:
        api.get_event_source_mapping(UUID=mapping_id)
    assert gone.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    assert mine(api, queue) == []


def test_a_function_mapping_names_the_function_by_its_arn_and_is_listed_by_function(
    stack: Stack, api: Any, queue: str
) -> None:
    account = queue.split(":")[4]
    created = api.create_event_source_mapping(EventSourceArn=queue, FunctionName="worker:live")
    assert created["FunctionArn"] == f"arn:aws:lambda:{stack.region}:{account}:function:worker:live"
    assert "SigningSecret" not in created and "Destination" not in created and created["BatchSize"] == 10
    try:
        listed = api.list_event_source_mappings(FunctionName=created["FunctionArn"])["EventSourceMappings"]
        assert created["UUID"] in [m["UUID"] for m in listed]
        # the same queue and function again is a conflict naming the existing mapping
        with pytest.raises(api.exceptions.ResourceConflictException) as taken:
            api.create_event_source_mapping(EventSourceArn=queue, FunctionName=created["FunctionArn"])
        assert created["UUID"] in taken.value.response["Error"]["Message"]
        assert taken.value.response["ResponseMetadata"]["HTTPStatusCode"] == 409
        assert len(mine(api, queue)) == 1
    finally:
        api.delete_event_source_mapping(UUID=created["UUID"])


def test_an_update_onto_a_taken_target_is_a_conflict_and_changes_nothing(api: Any, queue: str) -> None:
    first = api.create_event_source_mapping(EventSourceArn=queue, Destination={"Url": "https://a.example/x"})
    second = api.create_event_source_mapping(EventSourceArn=queue, Destination={"Url": "https://b.example/x"})
    try:
        with pytest.raises(api.exceptions.ResourceConflictException):
            api.update_event_source_mapping(UUID=second["UUID"], Destination={"Url": "https://a.example/x"},
                                            BatchSize=5)
        kept = api.get_event_source_mapping(UUID=second["UUID"])
        assert (kept["Destination"]["Url"], kept["BatchSize"]) == ("https://b.example/x", 10)
        # while moving to a free target frees the old one
        api.update_event_source_mapping(UUID=second["UUID"], Destination={"Url": "https://c.example/x"})
        third = api.create_event_source_mapping(EventSourceArn=queue, Destination={"Url": "https://b.example/x"})
        api.delete_event_source_mapping(UUID=third["UUID"])
    finally:
        api.delete_event_source_mapping(UUID=first["UUID"])
        api.delete_event_source_mapping(UUID=second["UUID"])


def test_the_paginator_walks_every_mapping_of_a_queue(api: Any, queue: str) -> None:
    made = [api.create_event_source_mapping(EventSourceArn=queue, Destination={"Url": f"http://h{i}.example/"})["UUID"]
            for i in range(5)]
    try:
        pages = list(api.get_paginator("list_event_source_mappings").paginate(
            EventSourceArn=queue, PaginationConfig={"PageSize": 2}))
        assert [len(p["EventSourceMappings"]) for p in pages] == [2, 2, 1]
        assert sorted(m["UUID"] for p in pages for m in p["EventSourceMappings"]) == sorted(made)
    finally:
        for mapping_id in made:
            api.delete_event_source_mapping(UUID=mapping_id)


URL = {"Url": "http://127.0.0.1:9/"}
BAD_CREATES = [
    # (parameters, code, words of the message)
    ({"BatchSize": 0}, "ValidationException", "at 'batchSize' failed to satisfy constraint"),
    ({"BatchSize": 10001, "MaximumBatchingWindowInSeconds": 1}, "ValidationException", "less than or equal to 10000"),
    ({"BatchSize": 11}, "InvalidParameterValueException", "Maximum batch window in seconds must be greater than 0"),
    ({"BatchSize": 11, "MaximumBatchingWindowInSeconds": 0}, "InvalidParameterValueException", "batch window"),
    ({"MaximumBatchingWindowInSeconds": 301}, "ValidationException", "maximumBatchingWindowInSeconds"),
    ({"MaximumBatchingWindowInSeconds": -1}, "ValidationException", "greater than or equal to 0"),
    ({"ScalingConfig": {"MaximumConcurrency": 1}}, "ValidationException", "scalingConfig.maximumConcurrency"),
    ({"ScalingConfig": {"MaximumConcurrency": 1001}}, "ValidationException", "less than or equal to 1000"),
    ({"FunctionResponseTypes": ["ReportBatchItemFailures", "ReportBatchItemFailures"]}, "ValidationException",
     "enum value set"),
    ({"FunctionResponseTypes": ["Everything"]}, "ValidationException", "functionResponseTypes"),
    ({"FilterCriteria": {"Filters": [{"Pattern": "not json"}]}}, "InvalidParameterValueException",
     "Invalid filter pattern definition."),
    ({"FilterCriteria": {"Filters": [{"Pattern": '{"body": "x"}'}]}}, "InvalidParameterValueException",
     "Invalid filter pattern"),
    ({"FilterCriteria": {"Filters": [{"Pattern": '{"body": [{"regex": ".*"}]}'}]}}, "InvalidParameterValueException",
     "Invalid filter pattern"),
    ({"FilterCriteria": {"Filters": [{"Pattern": '{"a":' * 5000 + "1" + "}" * 5000}]}},
     "InvalidParameterValueException", "Invalid filter pattern"),
    ({"FilterCriteria": {"Filters": [{"Pattern": '{"body": ["x"]}'}] * 6}}, "InvalidParameterValueException",
     "maximum number of filters"),
    ({"FilterCriteria": {"Filters": [{}]}}, "InvalidParameterValueException", "Invalid filter pattern"),
    # wrong JSON types never reach the rules
    ({"BatchSize": "10"}, "SerializationException", ""),
    ({"Enabled": "yes"}, "SerializationException", ""),
    ({"BatchSize": 2**40}, "SerializationException", ""),
]
BAD_TARGETS = [
    ({}, "InvalidParameterValueException", "Exactly one of FunctionName or Destination"),
    ({"FunctionName": "f", "Destination": URL}, "InvalidParameterValueException", "Exactly one"),
    ({"Destination": {}}, "InvalidParameterValueException", "Destination must name a Url"),
    ({"Destination": {"Url": "ftp://127.0.0.1/"}}, "InvalidParameterValueException", "absolute http or https"),
    ({"Destination": {"Url": "/relative"}}, "InvalidParameterValueException", "absolute http or https"),
    ({"Destination": {"Url": "http://user:pw@127.0.0.1/"}}, "InvalidParameterValueException", "user information"),
    ({"Destination": {"Url": "http://127.0.0.1/a b"}}, "InvalidParameterValueException", "absolute http"),
    ({"Destination": {"Url": "http://127.0.0.1/\r\nX-Evil: 1"}}, "InvalidParameterValueException", "absolute"),
    ({"Destination": {"Url": "http://h\u00e9.example/"}}, "InvalidParameterValueException", "ASCII"),
    ({"Destination": {"Url": "http://127.0.0.1:99999/"}}, "InvalidParameterValueException", "absolute"),
    ({"Destination": {"Url": "http://x.example/" + "a" * 3000}}, "InvalidParameterValueException", "2048"),
    ({"FunctionName": "bad name!"}, "ValidationException", "at 'functionName' failed to satisfy constraint"),
    ({"FunctionName": "f" * 141}, "ValidationException", "length less than or equal to 140"),
    ({"FunctionName": "arn:aws:lambda:us-east-1:123:function:f"}, "ValidationException", "functionName"),
]


def _refused(call: Any, code: str, words: str, status: int = 400) -> None:
    with pytest.raises(Exception) as refused:
        call()
    error = refused.value.response  # type: ignore[attr-defined]
    assert (error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"]) == (code, status), error
    assert words in error["Error"]["Message"]


@pytest.mark.parametrize(("params", "code", "words"), BAD_CREATES + BAD_TARGETS)
def test_a_create_breaking_a_rule_gets_lambdas_error_and_changes_nothing(
    raw: Any, api: Any, queue: str, params: dict[str, Any], code: str, words: str
) -> None:
    target = {} if params in [p for p, _, _ in BAD_TARGETS] else {"Destination": URL}
    _refused(lambda: raw.create_event_source_mapping(EventSourceArn=queue, **{**target, **params}), code, words)
    assert mine(api, queue) == []


def test_fifo_queues_take_at_most_ten_records_and_no_batching_window(raw: Any, api: Any, sdk: Any) -> None:
    arn = queue_arn(sdk, new_queue(sdk, "mapped", fifo=True))
    _refused(lambda: raw.create_event_source_mapping(EventSourceArn=arn, Destination=URL, BatchSize=11,
                                                     MaximumBatchingWindowInSeconds=1),
             "InvalidParameterValueException", "cannot be greater than 10")
    _refused(lambda: raw.create_event_source_mapping(EventSourceArn=arn, Destination=URL,
                                                     MaximumBatchingWindowInSeconds=1),
             "InvalidParameterValueException", "not supported for FIFO queues")
    made = api.create_event_source_mapping(EventSourceArn=arn, Destination=URL, BatchSize=10)
    try:
        # an update is checked as the whole configuration it leaves
        _refused(lambda: raw.update_event_source_mapping(UUID=made["UUID"], MaximumBatchingWindowInSeconds=2),
                 "InvalidParameterValueException", "not supported for FIFO queues")
        assert api.get_event_source_mapping(UUID=made["UUID"])["MaximumBatchingWindowInSeconds"] == 0
    finally:
        api.delete_event_source_mapping(UUID=made["UUID"])


def test_an_update_breaking_a_rule_changes_nothing(raw: Any, api: Any, queue: str) -> None:
    made = api.create_event_source_mapping(EventSourceArn=queue, Destination=URL)
    try:
        before = api.get_event_source_mapping(UUID=made["UUID"])
        _refused(lambda: raw.update_event_source_mapping(UUID=made["UUID"], BatchSize=500, Enabled=False),
                 "InvalidParameterValueException", "Maximum batch window")
        _refused(lambda: raw.update_event_source_mapping(UUID=made["UUID"], FunctionName="f"),
                 "InvalidParameterValueException", "cannot change between a function and a Destination")
        _refused(lambda: raw.update_event_source_mapping(UUID=made["UUID"], Destination={"Url": "gopher://x/"}),
                 "InvalidParameterValueException", "absolute http")
        after = api.get_event_source_mapping(UUID=made["UUID"])
        before.pop("ResponseMetadata"), after.pop("ResponseMetadata")
        assert after == before
    finally:
        api.delete_event_source_mapping(UUID=made["UUID"])


def test_queues_that_are_missing_or_not_the_callers_are_lambdas_sqs_error(stack: Stack, raw: Any, sdk: Any,
                                                                         queue: str) -> None:
    _refused(lambda: raw.create_event_source_mapping(EventSourceArn=queue + "-gone", Destination=URL),
             "InvalidParameterValueException", "AWS.SimpleQueueService.NonExistentQueue")
    _refused(lambda: raw.create_event_source_mapping(EventSourceArn="arn:aws:sns:us-east-1:000000000000:t",
                                                     Destination=URL),
             "InvalidParameterValueException", "Unrecognized event source")
    _refused(lambda: raw.create_event_source_mapping(EventSourceArn="x" * 2000, Destination=URL),
             "ValidationException", "eventSourceArn")
    # another account may not map a queue it may not receive from, nor see or change the owner's mappings
    outsider = f"8{uuid.uuid4().int % 10**11:011d}"
    key_id, secret = stack.create_credentials(outsider, "outsider")
    theirs = api_client(stack, key_id, secret, validate=False)
    _refused(lambda: theirs.create_event_source_mapping(EventSourceArn=queue, Destination=URL),
             "InvalidParameterValueException", "NonExistentQueue")
    made = raw.create_event_source_mapping(EventSourceArn=queue, Destination=URL)
    try:
        for call in (lambda: theirs.get_event_source_mapping(UUID=made["UUID"]),
                     lambda: theirs.update_event_source_mapping(UUID=made["UUID"], Enabled=False),
                     lambda: theirs.delete_event_source_mapping(UUID=made["UUID"])):
            _refused(call, "ResourceNotFoundException", "does not exist", 404)
        assert theirs.list_event_source_mappings()["EventSourceMappings"] == []
        assert raw.get_event_source_mapping(UUID=made["UUID"])["State"] == "Enabled"
    finally:
        raw.delete_event_source_mapping(UUID=made["UUID"])


UNKNOWN_MAPPING = "5f0c7a3e-0b1d-4c2e-9a4f-6d8e1b2c3a4f"


@pytest.mark.parametrize("mapping_id", ["", "nope", "0" * 5000, UNKNOWN_MAPPING, "'; DROP TABLE x; --"])
def test_unknown_or_malformed_uuids_are_not_found(raw: Any, mapping_id: str) -> None:
    for call in (raw.get_event_source_mapping, raw.delete_event_source_mapping, raw.update_event_source_mapping):
        _refused(lambda call=call: call(UUID=mapping_id), "ResourceNotFoundException",
                 "The resource you requested does not exist.", 404)


def test_list_refuses_bad_markers_and_sizes(raw: Any) -> None:
    _refused(lambda: raw.list_event_source_mappings(Marker="not-a-marker"), "InvalidParameterValueException",
             "Invalid Marker")
    _refused(lambda: raw.list_event_source_mappings(MaxItems=0), "ValidationException", "maxItems")
    _refused(lambda: raw.list_event_source_mappings(MaxItems=10001), "ValidationException", "maxItems")


def test_the_signing_secret_is_sealed_at_rest(stack: Stack, api: Any, queue: str) -> None:
    made = api.create_event_source_mapping(EventSourceArn=queue, Destination={"Url": "http://127.0.0.1:9/sealed"})
    try:
        dynamodb = stack.aws_client("dynamodb")
        table = f"{stack.env.get('FERRYMQ_TABLE_PREFIX', 'ferrymq-')}event-source-mappings"
        items = [item for page in dynamodb.get_paginator("scan").paginate(TableName=table)
                 for item in page["Items"]]
        stored = [i for i in items if i.get("uuid", {}).get("S") == made["UUID"] and "secret" in i]
        assert len(stored) == 1
        assert made["SigningSecret"].encode() not in stored[0]["secret"]["B"]
        assert made["SigningSecret"] not in json.dumps(items, default=str)
    finally:
        api.delete_event_source_mapping(UUID=made["UUID"])
