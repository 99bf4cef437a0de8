"""Lambda's rules for SQS event-source mappings, checked alone and on the configuration they would make."""

from __future__ import annotations

import pytest

from ferrymq.push.errors import MappingParameterInvalid, MappingValidationError
from ferrymq.push.mapping import MappingConfig, check_url, configure, function_arn, read_changes

ARN = "arn:aws:sqs:us-east-1:000000000000:q"


def config(**params: object) -> MappingConfig:
    return configure(None, ARN, read_changes({"Destination": {"Url": "http://h/"}, **params}, "us-east-1",
                                             "000000000000"), fifo=False)


def test_defaults_are_lambdas() -> None:
    c = config()
    assert (c.batch_size, c.window_seconds, c.enabled, c.report_failures, c.max_concurrency) == (10, 0, True, False,
                                                                                                 None)


@pytest.mark.parametrize(("name", "arn"), [
    ("f", "arn:aws:lambda:us-east-1:000000000000:function:f"),
    ("f:prod", "arn:aws:lambda:us-east-1:000000000000:function:f:prod"),
    ("123456789012:function:f", "arn:aws:lambda:us-east-1:123456789012:function:f"),
    ("arn:aws:lambda:eu-west-1:123456789012:function:f:$LATEST",
     "arn:aws:lambda:eu-west-1:123456789012:function:f:$LATEST"),
])
def test_function_names_resolve_to_arns_in_the_callers_region_and_account(name: str, arn: str) -> None:
    assert function_arn(name, "us-east-1", "000000000000") == arn


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/hook?x=1", "https://example.com/", "http://[::1]:9/"])
def test_absolute_http_urls_are_accepted(url: str) -> None:
    assert check_url(url) == url


@pytest.mark.parametrize("url", ["", "file:///etc/passwd", "http://", "http://a@h/", "http://h:0/", "http://h/\t",
                                 "javascript:alert(1)", "http://[::1/", "http://h/\x7f"])
def test_other_urls_are_refused(url: str) -> None:
    with pytest.raises(MappingParameterInvalid):
        check_url(url)


def test_big_batches_need_a_window_and_fifo_queues_small_ones_without() -> None:
    assert config(BatchSize=10_000, MaximumBatchingWindowInSeconds=300).batch_size == 10_000
    with pytest.raises(MappingParameterInvalid, match="greater than 0 if maximum batch size is greater than 10"):
        config(BatchSize=11)
    with pytest.raises(MappingValidationError, match="Value '10001' at 'batchSize'"):
        config(BatchSize=10_001, MaximumBatchingWindowInSeconds=1)
    fifo = read_changes({"Destination": {"Url": "http://h/"}, "BatchSize": 10}, "us-east-1", "000000000000")
    assert configure(None, ARN + ".fifo", fifo, fifo=True).batch_size == 10
    with pytest.raises(MappingParameterInvalid, match="FIFO"):
        configure(None, ARN + ".fifo", {**fifo, "window_seconds": 1}, fifo=True)


def test_an_update_is_checked_as_the_whole_configuration() -> None:
    base = config(BatchSize=100, MaximumBatchingWindowInSeconds=1)
    with pytest.raises(MappingParameterInvalid, match="batch window"):
        configure(base, ARN, read_changes({"MaximumBatchingWindowInSeconds": 0}, "us-east-1", "0" * 12), fifo=False)
    assert configure(base, ARN, {"enabled": False}, fifo=False).batch_size == 100
