import pytest

from ferrymq.errors import InvalidAddress, InvalidParameterValue
from ferrymq.frontend.queue_urls import (
    QueueAddress,
    parse_queue_url,
    queue_url,
    split_queue_arn,
    split_queue_url,
)


def test_round_trip_through_any_host() -> None:
    url = queue_url("http://localhost:9324/", "000000000000", "q1", region="us-east-1", home_region="us-east-1")
    assert url == "http://localhost:9324/000000000000/q1"
    assert split_queue_url(url) == ("000000000000", "q1")
    assert split_queue_url("https://sqs.us-east-1.amazonaws.com/123456789012/q.fifo") == ("123456789012", "q.fifo")
    assert split_queue_url("/000000000000/q") == ("000000000000", "q")


@pytest.mark.parametrize(
    ("base", "form", "url"),
    [
        ("http://127.0.0.1:9324", "auto", "http://127.0.0.1:9324/queue/eu-north-1/000000000000/q1"),
        ("http://localhost:9324/", "auto", "http://localhost:9324/queue/eu-north-1/000000000000/q1"),
        ("http://[::1]:9324", "auto", "http://[::1]:9324/queue/eu-north-1/000000000000/q1"),
        ("https://mq.example.com", "auto", "https://sqs.eu-north-1.mq.example.com/000000000000/q1"),
        ("https://sqs.us-east-1.mq.example.com:8443", "host", "https://sqs.eu-north-1.mq.example.com:8443/000000000000/q1"),
        ("http://127.0.0.1:9324", "host", "http://sqs.eu-north-1.127.0.0.1:9324/000000000000/q1"),
        ("https://mq.example.com", "path", "https://mq.example.com/queue/eu-north-1/000000000000/q1"),
        # the plain form names no region: only the home region's queues get it
        ("http://127.0.0.1:9324", "plain", "http://127.0.0.1:9324/queue/eu-north-1/000000000000/q1"),
    ],
)
def test_queue_urls_name_the_region_in_the_configured_form(base: str, form: str, url: str) -> None:
    assert queue_url(base, "000000000000", "q1", region="eu-north-1", home_region="us-east-1", form=form) == url
    assert parse_queue_url(url) == QueueAddress("eu-north-1", "000000000000", "q1")


def test_the_plain_form_of_the_home_region_names_no_region() -> None:
    url = queue_url("http://127.0.0.1:9324", "000000000000", "q1", region="us-east-1", home_region="us-east-1",
                    form="plain")
    assert url == "http://127.0.0.1:9324/000000000000/q1"
    assert parse_queue_url(url) == QueueAddress(None, "000000000000", "q1")


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("https://sqs.us-west-1.amazonaws.com/123456789012/q", QueueAddress("us-west-1", "123456789012", "q")),
        ("https://eu-west-2.queue.amazonaws.com/123456789012/q", QueueAddress("eu-west-2", "123456789012", "q")),
        ("https://queue.amazonaws.com/123456789012/q", QueueAddress(None, "123456789012", "q")),
        ("http://sqs.eu-north-1.localhost.localstack.cloud:4566/000000000000/q",
         QueueAddress("eu-north-1", "000000000000", "q")),
        ("http://localhost:4566/queue/ap-south-1/000000000000/q", QueueAddress("ap-south-1", "000000000000", "q")),
        ("https://abc.execute-api.us-east-1.amazonaws.com/prod/000000000000/q",
         QueueAddress(None, "000000000000", "q")),
        ("/queue/us-west-2/000000000000/q", QueueAddress("us-west-2", "000000000000", "q")),
    ],
)
def test_every_form_is_read_whatever_the_setting(url: str, address: QueueAddress) -> None:
    assert parse_queue_url(url) == address


def test_an_unknown_form_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="unknown queue URL form"):
        queue_url("http://h", "000000000000", "q", region="eu-north-1", home_region="us-east-1", form="fancy")


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


def test_a_bare_queue_name_names_the_callers_queue() -> None:
    assert split_queue_url("jobs", "111122223333") == ("111122223333", "jobs")
    assert split_queue_url("jobs.fifo", "111122223333") == ("111122223333", "jobs.fifo")
    # a path is not a bare name, and without a caller there is nobody to resolve it for
    with pytest.raises(InvalidAddress):
        split_queue_url("abc/jobs", "111122223333")
    with pytest.raises(InvalidAddress):
        split_queue_url("jobs")
