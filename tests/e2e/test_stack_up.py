"""The stack comes up the way a user starts it, and an unmodified boto3 SQS client can talk to it."""

from __future__ import annotations

from typing import Any

import boto3


def test_boto3_lists_queues_on_a_fresh_stack(stack: Any) -> None:
    # given the stack started by `ferrymq up` and a plain boto3 client with the printed settings
    client = boto3.client(
        "sqs",
        endpoint_url=stack.endpoint,
        region_name=stack.region,
        aws_access_key_id=stack.access_key,
        aws_secret_access_key=stack.secret_key,
    )
    # when it lists queues
    response = client.list_queues()
    # then the gateway answers successfully
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 200
