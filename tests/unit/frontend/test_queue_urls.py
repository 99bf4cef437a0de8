import pytest

from ferrymq.errors import InvalidAddress
from functions.frontend.queue_urls import queue_url, split_queue_url


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
