import pytest

from ferrymq.errors import InvalidAddress, InvalidParameterValue
from functions.frontend.queue_urls import queue_url, split_queue_arn, split_queue_url


def test_round_trip_through_any_host() -> None:
    url = queue_url("http://localhost:9324/", "000000000000", "q1")
    assert url == "http://localhost:9324/000000000000/q1"
    assert split_queue_url(url) == ("000000000000", "q1")
    assert split_queue_url("https://sqs.us-east-1.amazonaws.com/123456789012/q.fifo") == ("123456789012", "q.fifo")
    assert split_queue_url("/000000000000/q") == ("000000000000", "q")


@pytest.mark.parametrize("bad", ["q1", "http://h/q1", "http://h/abc/q1", "http://h/0/1/2"])
def test_malformed_urls_are_invalid_addresses(bad: str) -> None:
    with pytest.raises(InvalidAddress):
        split_queue_url(bad)


def test_a_queue_arn_names_an_account_and_a_queue() -> None:
    assert split_queue_arn("arn:aws:sqs:us-east-1:000000000000:work-dlq") == ("000000000000", "work-dlq")


@pytest.mark.parametrize(
    "bad",
    ["work-dlq", "arn:aws:sns:us-east-1:000000000000:topic", "arn:aws:sqs:us-east-1:0:q",
     "arn:aws:sqs:us-east-1:000000000000:a:b"],
)
def test_what_is_not_a_queue_arn_is_an_invalid_arn_parameter(bad: str) -> None:
    with pytest.raises(InvalidParameterValue) as raised:
        split_queue_arn(bad)
    assert raised.value.message == f"Value {bad} for parameter ARN is invalid."
