import pytest

from ferrymq.errors import InvalidAttributeName, InvalidAttributeValue
from functions.metadata import queue_attributes as qa


def test_values_are_canonicalised() -> None:
    assert qa.check_settable({"VisibilityTimeout": " 60", "SqsManagedSseEnabled": "TRUE"}, fifo=False) == {
        "VisibilityTimeout": "60",
        "SqsManagedSseEnabled": "true",
    }


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("VisibilityTimeout", "43201"),
        ("DelaySeconds", "-1"),
        ("MessageRetentionPeriod", "59"),
        ("MaximumMessageSize", "1048577"),
        ("ReceiveMessageWaitTimeSeconds", "x"),
    ],
)
def test_out_of_range_values_are_rejected(name: str, value: str) -> None:
    with pytest.raises(InvalidAttributeValue, match=f"Invalid value for the parameter {name}."):
        qa.check_settable({name: value}, fifo=False)


@pytest.mark.parametrize("name", ["Bogus", "QueueArn", "ContentBasedDeduplication"])
def test_unknown_read_only_and_fifo_only_names_are_rejected_on_standard_queues(name: str) -> None:
    with pytest.raises(InvalidAttributeName, match=f"Unknown Attribute {name}."):
        qa.check_settable({name: "true"}, fifo=False)


def test_defaults() -> None:
    assert qa.int_value({}, "VisibilityTimeout") == 30
    assert qa.int_value({"VisibilityTimeout": "5"}, "VisibilityTimeout") == 5
    assert qa.DEFAULTS["MessageRetentionPeriod"] == "345600"
