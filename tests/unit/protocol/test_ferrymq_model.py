"""FerryMQ's own service: the botocore data ferrymq.client("ferrymq") loads is the model the front end parses and
renders with, requests botocore serialises come back as their params, and nothing mixes with SQS."""

from __future__ import annotations

import json
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.serialize import create_serializer

import ferrymq
from ferrymq.errors import AccessDenied, InvalidAction, QueueDoesNotExist
from ferrymq.protocol import ferrymq_model
from ferrymq.protocol.model import OPERATIONS as SQS_OPERATIONS
from ferrymq.protocol.requests import parse_request
from ferrymq.protocol.responses import render_error, render_result


@pytest.fixture(scope="module")
def api() -> Any:
    return ferrymq.client("ferrymq", endpoint_url="http://127.0.0.1:1", region_name="us-east-1",
                          aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret")


def _parse(api: Any, operation: str, params: dict[str, Any]) -> Any:
    """``params`` as botocore puts them on the wire for ``operation``, read back by the front end's parser."""
    model = api.meta.service_model.operation_model(operation)
    wire = create_serializer("json").serialize_to_request(params, model)
    headers = {k.lower(): v for k, v in wire["headers"].items()}
    return parse_request("POST", "/", "", headers, wire["body"])


def test_the_client_and_the_front_end_read_the_same_operations(api: Any) -> None:
    assert set(api.meta.service_model.operation_names) == set(ferrymq_model.OPERATIONS)
    assert api.meta.service_model.signing_name == ferrymq_model.SIGNING_NAME
    assert api.meta.service_model.metadata["targetPrefix"] + "." == ferrymq_model.TARGET_PREFIX
    assert not set(ferrymq_model.OPERATIONS) & set(SQS_OPERATIONS)


def test_paginators_waiters_and_modeled_errors_come_from_the_shipped_data(api: Any) -> None:
    assert api.can_paginate("list_access_keys")
    assert set(api.waiter_names) == {"queue_empty", "cluster_healthy"}
    assert {"AccessDenied", "InvalidParameterValue", "QueueDoesNotExist", "ResourceNotFound"} <= set(
        dir(api.exceptions))


def test_a_session_of_the_caller_learns_the_service_from_the_data_path() -> None:
    core = botocore.session.get_session()
    assert "ferrymq" not in core.get_available_services()
    ferrymq.client("ferrymq", session=boto3.session.Session(botocore_session=core), endpoint_url="http://127.0.0.1:1",
                   aws_access_key_id="a", aws_secret_access_key="b")
    assert "ferrymq" in core.get_available_services()


@pytest.mark.parametrize(
    ("operation", "params"),
    [
        ("PeekMessages", {"QueueUrl": "http://h/000000000000/q", "MaxNumberOfMessages": 5}),
        ("GetQueueStatistics", {"QueueUrl": "q"}),
        ("GetClusterStatus", {}),
        ("CreateAccessKey", {"AccountId": "111122223333", "UserName": "u", "Admin": True, "DurationSeconds": 60}),
        ("ListAccessKeys", {"AccountId": "111122223333", "MaxResults": 2, "NextToken": "t"}),
        ("GetUsageSummary", {"Date": "2026-01-02"}),
        ("GetAccountLimits", {"AccountId": "111122223333"}),
    ],
)
def test_what_botocore_sends_is_parsed_back_as_its_params(api: Any, operation: str, params: dict) -> None:
    parsed = _parse(api, operation, params)
    assert (parsed.action, parsed.params, parsed.protocol) == (operation, params, "json")


def test_targets_of_one_service_do_not_reach_the_other() -> None:
    json_headers = {"content-type": "application/x-amz-json-1.0"}
    for target in ("AmazonSQS.PeekMessages", "FerryMQ.SendMessage", "FerryMQ.Bogus", "FerryMQPeekMessages"):
        with pytest.raises(InvalidAction):
            parse_request("POST", "/", "", {**json_headers, "x-amz-target": target}, b"{}")
    # FerryMQ's actions speak JSON only: the query protocol does not know them
    with pytest.raises(InvalidAction):
        parse_request("POST", "/", "", {"content-type": "application/x-www-form-urlencoded"},
                      b"Action=PeekMessages&QueueUrl=q")


def test_requests_are_signed_for_ferrymq_or_sqs_by_their_target() -> None:
    assert ferrymq_model.signing_service({"x-amz-target": "FerryMQ.GetClusterStatus"}) == "ferrymq"
    assert ferrymq_model.signing_service({"x-amz-target": "AmazonSQS.SendMessage"}) == "sqs"
    assert ferrymq_model.signing_service({}) == "sqs"


def test_results_render_by_the_model_leaving_out_what_is_absent() -> None:
    result = {"QueueUrl": "u", "QueueArn": "a", "Visible": 3, "InFlight": 0, "Delayed": 0,
              "OldestMessageAgeSeconds": None,
              "Shards": [{"Shard": 0, "Partition": 2, "Visible": 3, "InFlight": 0, "Delayed": 0,
                          "OldestMessageAgeSeconds": None, "Unknown": 1}]}
    body = json.loads(render_result("json", "GetQueueStatistics", result, "rid").body)
    assert body == {"QueueUrl": "u", "QueueArn": "a", "Visible": 3, "InFlight": 0, "Delayed": 0,
                    "Shards": [{"Shard": 0, "Partition": 2, "Visible": 3, "InFlight": 0, "Delayed": 0}]}
    peeked = json.loads(render_result("json", "PeekMessages", {"Messages": []}, "rid").body)
    assert peeked == {"Messages": []}


def test_errors_carry_the_codes_the_modeled_exceptions_are_matched_by(api: Any) -> None:
    modeled = {shape: api.meta.service_model.shape_for(shape).error_code
               for shape in ("AccessDenied", "QueueDoesNotExist")}
    for error, shape in ((AccessDenied("no"), "AccessDenied"), (QueueDoesNotExist(), "QueueDoesNotExist")):
        response = render_error("json", error, "rid")
        header = dict(response.headers)["x-amzn-query-error"]
        # botocore takes the code from x-amzn-query-error, then finds the exception modeled with it
        assert header.split(";")[0] == modeled[shape]
