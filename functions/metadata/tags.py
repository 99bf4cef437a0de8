"""Queue tags: SQS's rules for cost allocation tags, checked on CreateQueue, TagQueue and UntagQueue.

Keys are 1 to 128 characters, values up to 256; both may hold Unicode letters, digits, whitespace and
``_ . : / = + - @``; neither may start with the reserved prefix ``aws:``; a queue holds at most 50 tags.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ferrymq.errors import InvalidParameterValue, MissingParameter

MAX_TAGS = 50
MAX_KEY_LENGTH = 128
MAX_VALUE_LENGTH = 256
RESERVED_PREFIX = "aws:"
# \w is Unicode letters, digits and the underscore; \s is whitespace.
_ALLOWED = re.compile(r"^[\w\s.:/=+\-@]*$")


def _check_key(key: str) -> None:
    if not 1 <= len(key) <= MAX_KEY_LENGTH:
        raise InvalidParameterValue(f"Tag keys must be between 1 and {MAX_KEY_LENGTH} characters in length.")
    if not _ALLOWED.match(key):
        raise InvalidParameterValue(
            "Tag keys may only contain unicode letters, digits, whitespace, or one of these symbols: _ . : / = + - @"
        )
    if key.lower().startswith(RESERVED_PREFIX):
        raise InvalidParameterValue(f"Tag keys must not start with the reserved prefix {RESERVED_PREFIX}")


def _check_value(value: str) -> None:
    if len(value) > MAX_VALUE_LENGTH:
        raise InvalidParameterValue(f"Tag values must be between 0 and {MAX_VALUE_LENGTH} characters in length.")
    if not _ALLOWED.match(value):
        raise InvalidParameterValue(
            "Tag values may only contain unicode letters, digits, whitespace, or one of these symbols: _ . : / = + - @"
        )
    if value.lower().startswith(RESERVED_PREFIX):
        raise InvalidParameterValue(f"Tag values must not start with the reserved prefix {RESERVED_PREFIX}")


def check_tags(tags: Mapping[str, str], queue_name: str, *, required: bool) -> dict[str, str]:
    """The tags of a CreateQueue (``required=False``) or TagQueue request, or SQS's error for them."""
    if not tags:
        if required:
            raise MissingParameter("The request must contain the parameter Tags.")
        return {}
    for key, value in tags.items():
        _check_key(key)
        _check_value(value)
    if len(tags) > MAX_TAGS:
        raise too_many(queue_name)
    return dict(tags)


def check_tag_keys(keys: Sequence[str]) -> list[str]:
    """The keys of an UntagQueue request; removing keys a queue does not carry is not an error."""
    if not keys:
        raise InvalidParameterValue(f"Tag keys must be between 1 and {MAX_KEY_LENGTH} characters in length.")
    for key in keys:
        if not 1 <= len(key) <= MAX_KEY_LENGTH:
            raise InvalidParameterValue(f"Tag keys must be between 1 and {MAX_KEY_LENGTH} characters in length.")
    return list(keys)


def merged(current: Mapping[str, str], added: Mapping[str, str], queue_name: str) -> dict[str, str]:
    """``current`` with ``added`` laid over it (a key already there takes the new value), at most 50 in all."""
    out = {**current, **added}
    if len(out) > MAX_TAGS:
        raise too_many(queue_name)
    return out


def too_many(queue_name: str) -> InvalidParameterValue:
    return InvalidParameterValue(f"Too many tags added for queue {queue_name}.")
