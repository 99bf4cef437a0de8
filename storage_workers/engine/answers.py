"""The SQS wording of what the engine refuses, in one place.

Batch entries fail one by one, so those refusals are ``(code, message)`` pairs the worker sends on as they
are; whole requests fail with the :mod:`ferrymq.errors` class and one of the messages here.
"""

from __future__ import annotations

from ferrymq.errors import InvalidParameterValue, ReceiptHandleIsInvalid

BatchResult = tuple[str, str] | None
"""None for an entry that succeeded, ``(code, message)`` for one that failed."""

OVER_LIMIT_MESSAGE = (
    "Too many messages have been received without being deleted. "
    "Please delete your received messages or let them timeout before receiving more."
)

ACTIVE_TASK_MESSAGE = (
    "There is already a task running. Only one active task is allowed for a source queue arn at a given time."
)

NO_SUCH_TASK_MESSAGE = "Task does not exist."

def invalid_handle(handle: object) -> tuple[str, str]:
    """Not a handle minted for this queue with this partition's key."""
    error = ReceiptHandleIsInvalid.naming(handle)
    return (error.code, error.message)


def gone_handle(handle: object) -> tuple[str, str]:
    """A genuine handle whose message is no longer in the queue."""
    return (
        InvalidParameterValue.code,
        f"Value {handle} for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not "
        "available for visibility timeout change.",
    )


def expired_handle(handle: object) -> tuple[str, str]:
    """A genuine handle of an earlier receive than the message's latest (or, on FIFO queues, of a receive
    whose visibility timeout ran out)."""
    return (
        InvalidParameterValue.code,
        f"Value {handle} for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.",
    )
