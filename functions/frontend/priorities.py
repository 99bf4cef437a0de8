"""A message's priority level, read from its ``FerryMQPriority`` attribute (``docs/design/priorities.md``).

Only a queue with ``FerryMQPriorityLevels`` above 1 reads the attribute; on any other queue it is an ordinary
message attribute, stored and returned and nothing more, so a queue that never turned priorities on treats
every attribute exactly as SQS does.  The attribute itself always stays with the message (a consumer sees it,
and its MD5 covers it); the level the storage worker serves by goes beside it in the system attributes.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from ferrymq.errors import InvalidParameterValue
from ferrymq.metadata import queue_attributes
from ferrymq.priorities import DEFAULT_LEVEL, LEVELS_ATTRIBUTE, MESSAGE_ATTRIBUTE


def priority_levels(attributes: Mapping[str, str]) -> int:
    """A stored queue's ``FerryMQPriorityLevels`` (1: priorities off)."""
    return queue_attributes.int_value(attributes, LEVELS_ATTRIBUTE)


def level_of(message_attributes: Mapping[str, Mapping[str, Any]], levels: int) -> int:
    """The level of a message with these (checked) attributes on a queue of ``levels`` levels; raises
    InvalidParameterValue when the queue has levels and the attribute is not one of them."""
    if levels <= 1:
        return DEFAULT_LEVEL
    value = message_attributes.get(MESSAGE_ATTRIBUTE)
    if value is None:
        return DEFAULT_LEVEL
    top = levels - 1
    wanted = f"an integer from 0 to {top} (the queue has {levels} priority levels)"
    if value["DataType"].split(".", 1)[0] != "Number":
        raise InvalidParameterValue(
            f"Value {value['DataType']} for parameter MessageAttributes.{MESSAGE_ATTRIBUTE}.DataType is invalid. "
            f"Reason: {MESSAGE_ATTRIBUTE} must be of type Number, {wanted}."
        )
    text = value["StringValue"]
    try:
        number = Decimal(text)
    except InvalidOperation:
        number = None
    if number is None or not number.is_finite() or number != number.to_integral_value() or not 0 <= number <= top:
        raise InvalidParameterValue(
            f"Value {text} for parameter MessageAttributes.{MESSAGE_ATTRIBUTE} is invalid. Reason: "
            f"{MESSAGE_ATTRIBUTE} must be {wanted}."
        )
    return int(number)
