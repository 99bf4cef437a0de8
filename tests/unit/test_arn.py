"""Queue ARNs as the front end and the storage workers both read and write them."""

from __future__ import annotations

import pytest

from ferrymq.arn import Arn, QueueArn, parse_arn, parse_queue_arn, queue_arn


def test_a_queue_arn_is_written_and_read_back() -> None:
    # given a queue's region, account and name
    # when its ARN is written and read again
    text = queue_arn("eu-west-1", "123456789012", "orders.fifo")
    # then the ARN has SQS's form and reads back as the same queue
    assert text == "arn:aws:sqs:eu-west-1:123456789012:orders.fifo"
    assert parse_queue_arn(text) == QueueArn("eu-west-1", "123456789012", "orders.fifo")
    assert str(parse_queue_arn(text)) == text


def test_a_queue_arn_unpacks_as_region_account_name() -> None:
    region, account, name = QueueArn("us-east-1", "000000000000", "q")
    assert (region, account, name) == ("us-east-1", "000000000000", "q")


@pytest.mark.parametrize(
    "text",
    [
        "dummy",
        "",
        "arn:aws:sns:us-east-1:111111111111:topic",
        "arn:aws:sqs:us-east-1:abc:q",
        "arn:aws:sqs:us-east-1:1111111111112:q",
        "arn:aws:sqs:us-east-1:11111111111\n:q",
        "arn:aws:sqs::111111111111:q",
        "arn:aws:sqs:us-east-1:111111111111:",
        "arn:aws:sqs:us-east-1:111111111111:a:b",
        "arn:elsewhere:sqs:us-east-1:111111111111:q",
        "urn:aws:sqs:us-east-1:111111111111:q",
        None,
        17,
    ],
)
def test_what_is_not_a_queue_arn_reads_as_none(text: object) -> None:
    assert parse_queue_arn(text) is None


def test_other_aws_partitions_read_as_queue_arns() -> None:
    assert parse_queue_arn("arn:aws-cn:sqs:cn-north-1:111111111111:q") == QueueArn("cn-north-1", "111111111111", "q")


def test_an_arn_of_another_service_keeps_the_colons_of_its_resource() -> None:
    # given a Lambda function's ARN, whose resource part has a colon of its own
    parsed = parse_arn("arn:aws:lambda:us-east-1:111111111111:function:handler")
    # then it reads as an ARN of that service, and not as a queue
    assert parsed == Arn("aws", "lambda", "us-east-1", "111111111111", "function:handler")
    assert parse_queue_arn("arn:aws:lambda:us-east-1:111111111111:function:handler") is None
