"""Message priorities, FerryMQ's own extension to SQS (``docs/design/priorities.md``): the names and numbers
the front end and the storage workers share.

A queue turns priorities on with its ``FerryMQPriorityLevels`` attribute (1, the default, is off; at most
:data:`MAX_LEVELS`); a message picks its level with the ``FerryMQPriority`` message attribute (a Number, 0 the
lowest, :data:`DEFAULT_LEVEL` when absent).  The front end checks the level and keeps it in the message's
system attributes under :data:`SYSTEM_KEY` (only when above 0, so a message without a level is stored exactly
as before priorities existed); system attributes are never encrypted, travel with a message into a dead-letter
queue and back, and are part of every record that stores one.

Receives serve levels by weighted round robin: while several levels have visible messages, level ``k`` gets
:func:`weight` ``(k)`` = 2**k deliveries for every one of level 0, so a higher level is served first and a
lower one never starves.
"""

from __future__ import annotations

LEVELS_ATTRIBUTE = "FerryMQPriorityLevels"
"""The queue attribute: how many levels (1 = priorities off)."""

MESSAGE_ATTRIBUTE = "FerryMQPriority"
"""The message attribute choosing a message's level."""

SYSTEM_KEY = "FerryMQPriority"
"""Where a stored message keeps its level (an int above 0) among its system attributes."""

MAX_LEVELS = 10
DEFAULT_LEVEL = 0
"""The level of a message sent without ``FerryMQPriority``: the lowest."""


def weight(level: int) -> int:
    """Deliveries of ``level`` per delivery of level 0 while both have visible messages."""
    return 1 << level
