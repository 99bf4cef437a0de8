"""The front end's side of priorities (``docs/design/priorities.md``): the ``FerryMQPriorityLevels`` queue
attribute and the level a ``FerryMQPriority`` message attribute picks."""

from __future__ import annotations

import pytest

from ferrymq.errors import InvalidAttributeValue, InvalidParameterValue
from ferrymq.frontend.message_checks import check_message_attributes
from ferrymq.frontend.priorities import level_of, priority_levels
from ferrymq.metadata import queue_attributes as qa


def _attrs(data_type: str, value: str) -> dict:
    return check_message_attributes({"FerryMQPriority": {"DataType": data_type, "StringValue": value}})


@pytest.mark.parametrize("value", ["1", "4", "10", " 7"])
def test_levels_from_1_to_10_are_settable(value: str) -> None:
    assert qa.check_settable({"FerryMQPriorityLevels": value}, fifo=False) == {"FerryMQPriorityLevels": value.strip()}


@pytest.mark.parametrize("value", ["0", "11", "-1", "two", "2.5"])
def test_other_level_counts_are_refused(value: str) -> None:
    with pytest.raises(InvalidAttributeValue, match="Invalid value for the parameter FerryMQPriorityLevels"):
        qa.check_settable({"FerryMQPriorityLevels": value}, fifo=False)


def test_fifo_queues_take_no_levels_but_1() -> None:
    assert qa.check_settable({"FerryMQPriorityLevels": "1"}, fifo=True) == {"FerryMQPriorityLevels": "1"}
    with pytest.raises(InvalidAttributeValue, match="FIFO queues deliver each message group in order"):
        qa.check_settable({"FerryMQPriorityLevels": "3"}, fifo=True)


def test_all_reports_levels_only_when_not_the_default() -> None:
    assert "FerryMQPriorityLevels" not in qa.reported({}, fifo=False)
    assert "FerryMQPriorityLevels" not in qa.reported({"FerryMQPriorityLevels": "1"}, fifo=False)
    assert qa.reported({"FerryMQPriorityLevels": "4"}, fifo=False)["FerryMQPriorityLevels"] == "4"
    # a repeated CreateQueue naming the default matches a queue that never set it
    assert qa.differing({}, {"FerryMQPriorityLevels": "1"}, fifo=False) == set()
    assert qa.differing({}, {"FerryMQPriorityLevels": "2"}, fifo=False) == {"FerryMQPriorityLevels"}


def test_priority_levels_default_to_off() -> None:
    assert priority_levels({}) == 1
    assert priority_levels({"FerryMQPriorityLevels": "5"}) == 5


@pytest.mark.parametrize(("data_type", "value", "level"),
                         [("Number", "0", 0), ("Number", "3", 3), ("Number.int", "2", 2), ("Number", "2.0", 2)])
def test_a_number_attribute_picks_the_level(data_type: str, value: str, level: int) -> None:
    assert level_of(_attrs(data_type, value), 4) == level


def test_without_the_attribute_a_message_is_level_0() -> None:
    assert level_of({}, 4) == 0
    assert level_of(check_message_attributes({"other": {"DataType": "String", "StringValue": "x"}}), 4) == 0


@pytest.mark.parametrize("value", ["4", "-1", "1.5", "1e3"])
def test_a_level_outside_the_queues_levels_is_refused(value: str) -> None:
    with pytest.raises(InvalidParameterValue) as caught:
        level_of(_attrs("Number", value), 4)
    assert caught.value.message == (
        f"Value {value} for parameter MessageAttributes.FerryMQPriority is invalid. Reason: FerryMQPriority must "
        "be an integer from 0 to 3 (the queue has 4 priority levels)."
    )


@pytest.mark.parametrize("data_type", ["String", "Binary"])
def test_a_level_that_is_not_a_number_is_refused(data_type: str) -> None:
    attrs = (check_message_attributes({"FerryMQPriority": {"DataType": "Binary", "BinaryValue": b"\x01"}})
             if data_type == "Binary" else _attrs("String", "2"))
    with pytest.raises(InvalidParameterValue, match="FerryMQPriority must be of type Number"):
        level_of(attrs, 4)


def test_a_queue_without_levels_leaves_the_attribute_alone() -> None:
    assert level_of(_attrs("String", "urgent"), 1) == 0
    assert level_of(_attrs("Number", "99"), 1) == 0
