"""Total decoders for text a client sends: decimal integers, base64 blobs and JSON documents.

Python's own decoders are not total on hostile input, and each gap was a 500 once:

- ``int()`` takes any Unicode decimal digit (``"\\u0663"`` is 3), underscores (``"1_000"``) and surrounding
  whitespace, yet raises ``ValueError`` on superscripts (``"\\u00b2"``) and on more than 4,300 digits;
- ``base64.b64decode`` raises ``ValueError``, not ``binascii.Error``, for a ``str`` holding non-ASCII text;
- ``json.loads`` recurses, so deep nesting raises ``RecursionError``, and orjson hands back documents nested
  up to 1,024 deep, deeper than a later ``repr`` or comparison can walk.

Every decode of client input goes through here.  Each function either returns a value or signals failure in one
way (``None`` or :class:`DocumentError`), which the caller turns into the SQS error for its parameter.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import orjson

# Digits kept after leading zeros: an int64 has 19, so anything longer is out of every SQS range anyway.
MAX_INT_DIGITS = 19
# No SQS document (a policy with conditions is the deepest) nests more than 6 levels; a deeper one is malformed
# whatever it holds, and the bound keeps every later walk over the document clear of Python's recursion limit.
MAX_DOCUMENT_DEPTH = 32

_ASCII_DIGITS = frozenset("0123456789")


class DocumentError(ValueError):
    """A JSON document that is not valid JSON, or is bigger or deeper than the bounds allow."""


def parse_int(text: str, *, max_digits: int = MAX_INT_DIGITS) -> int | None:
    """The integer ``text`` spells as an optional sign and ASCII decimal digits, or None.

    Leading zeros do not count towards ``max_digits``.  No whitespace, underscores or other scripts' digits.
    """
    digits = text[1:] if text[:1] in ("-", "+") else text
    if not digits or not _ASCII_DIGITS.issuperset(digits):
        return None
    if len(digits.lstrip("0")) > max_digits:
        return None
    return int(text)


def is_index(text: str) -> bool:
    """Whether ``text`` is a query-protocol list index: ASCII digits only, of any length."""
    return bool(text) and _ASCII_DIGITS.issuperset(text)


def index_order(text: str) -> tuple[int, str]:
    """A sort key putting indexes (see :func:`is_index`) in numeric order without converting them to ``int``,
    which refuses more than 4,300 digits."""
    significant = text.lstrip("0")
    return len(significant), significant


def decode_base64(text: str | bytes) -> bytes | None:
    """The bytes ``text`` encodes in standard base64 (padding required), or None."""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        # ValueError: a str with non-ASCII characters, which b64decode refuses before it looks at the alphabet.
        return None


def load_document(text: str | bytes, *, max_length: int | None = None,
                  max_depth: int = MAX_DOCUMENT_DEPTH) -> Any:
    """Parse a JSON document a client sent, of at most ``max_length`` characters (or bytes, if given bytes) and
    ``max_depth`` levels of nesting.

    Strict JSON: no ``NaN``/``Infinity``, no lone surrogates; integers beyond 64 bits come back as floats
    and those beyond a double's range are refused.  Raises :class:`DocumentError`.
    """
    if max_length is not None and len(text) > max_length:
        raise DocumentError(f"document longer than {max_length}")
    try:
        document = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise DocumentError(str(exc)) from None
    if _deeper_than(document, max_depth):
        raise DocumentError(f"document nested deeper than {max_depth} levels")
    return document


def _deeper_than(document: Any, max_depth: int) -> bool:
    # Iterative, so checking depth cannot itself run out of stack.
    pending: list[tuple[Any, int]] = [(document, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > max_depth:
            return True
        pending.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False
