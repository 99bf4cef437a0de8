"""Lambda's filter patterns (FilterCriteria) for SQS records: checked when a mapping is made, matched by the
poller against each record before delivery.

A pattern is a JSON object whose keys name record fields (``body``, ``attributes``, ``messageAttributes`` ...)
and nest into them; each leaf is a list of matchers, any of which may match:

- a string, number or null: equality;
- ``{"prefix": s}``, ``{"suffix": s}``, ``{"equals-ignore-case": s}``;
- ``{"anything-but": v | [v, ...] | {"prefix": s}}``;
- ``{"numeric": [op, n, (op, n)]}`` with op one of ``< <= = > >=``;
- ``{"exists": true|false}``.

A record matches when every key of the pattern matches. A ``body`` that is JSON is matched as the object it
encodes; any other body only by leaf matchers on the body as a string. Matching is a walk of the pattern,
linear in its size, so a pattern can cost no more than its length.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from ferrymq.protocol.decoding import DocumentError, load_document
from ferrymq.push.errors import MappingParameterInvalid

MAX_PATTERN_LENGTH = 4096
MAX_FILTERS = 5
MAX_DEPTH = 16
_OPS = frozenset({"<", "<=", "=", ">", ">="})
_ABSENT = object()


def _invalid() -> MappingParameterInvalid:
    return MappingParameterInvalid("Invalid filter pattern definition.")


def parse_pattern(text: str) -> dict[str, Any]:
    """The pattern ``text`` encodes, checked; raises Lambda's InvalidParameterValueException otherwise."""
    if len(text) > MAX_PATTERN_LENGTH:
        raise _invalid()
    try:
        pattern = load_document(text, max_depth=MAX_DEPTH)
    except DocumentError:
        raise _invalid() from None
    if not isinstance(pattern, dict) or not pattern:
        raise _invalid()
    _check_object(pattern)
    return pattern


def _check_object(node: dict[str, Any]) -> None:
    for value in node.values():
        if isinstance(value, dict):
            if not value:
                raise _invalid()
            _check_object(value)
        elif isinstance(value, list):
            if not value:
                raise _invalid()
            for matcher in value:
                _check_matcher(matcher)
        else:
            raise _invalid()


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_matcher(matcher: object) -> None:
    if matcher is None or isinstance(matcher, str) or _is_number(matcher):
        return
    if not isinstance(matcher, dict) or len(matcher) != 1:
        raise _invalid()
    ((op, arg),) = matcher.items()
    if op in ("prefix", "suffix", "equals-ignore-case"):
        ok = isinstance(arg, str)
    elif op == "exists":
        ok = isinstance(arg, bool)
    elif op == "anything-but":
        if isinstance(arg, list):
            ok = bool(arg) and all(isinstance(v, str) or _is_number(v) for v in arg)
        elif isinstance(arg, dict):
            ok = len(arg) == 1 and isinstance(arg.get("prefix"), str)
        else:
            ok = isinstance(arg, str) or _is_number(arg)
    elif op == "numeric":
        ok = _numeric_ok(arg)
    else:
        ok = False
    if not ok:
        raise _invalid()


def _numeric_ok(arg: object) -> bool:
    if not isinstance(arg, list) or len(arg) not in (2, 4):
        return False
    return all(arg[i] in _OPS and _is_number(arg[i + 1]) for i in range(0, len(arg), 2))


def matches_any(patterns: Sequence[dict[str, Any]], record: dict[str, Any]) -> bool:
    """Whether ``record`` (a Lambda SQS record) matches one of ``patterns``; no patterns match everything."""
    if not patterns:
        return True
    view = dict(record)
    body = record.get("body")
    if isinstance(body, str):
        with contextlib.suppress(DocumentError):
            view["body"] = load_document(body, max_depth=MAX_DEPTH * 4)
    return any(_matches_object(p, view) for p in patterns)


def _matches_object(pattern: dict[str, Any], value: object) -> bool:
    for key, expected in pattern.items():
        field = value.get(key, _ABSENT) if isinstance(value, dict) else _ABSENT
        if isinstance(expected, dict):
            if not _matches_object(expected, field):
                return False
        elif not _matches_leaf(expected, field):
            return False
    return True


def _matches_leaf(matchers: list[Any], field: object) -> bool:
    values = field if isinstance(field, list) else [field]
    return any(_matches_one(m, v, field is not _ABSENT) for m in matchers for v in values)


def _matches_one(matcher: object, value: object, present: bool) -> bool:
    if not isinstance(matcher, dict):
        if not present:
            return False
        if _is_number(matcher) and _is_number(value):
            return float(matcher) == float(value)  # type: ignore[arg-type]
        return matcher == value and type(matcher) is type(value)
    ((op, arg),) = matcher.items()
    if op == "exists":
        return present is arg
    if not present:
        return False
    if op == "prefix":
        return isinstance(value, str) and value.startswith(arg)
    if op == "suffix":
        return isinstance(value, str) and value.endswith(arg)
    if op == "equals-ignore-case":
        return isinstance(value, str) and value.casefold() == arg.casefold()
    if op == "anything-but":
        if isinstance(arg, dict):
            return isinstance(value, str) and not value.startswith(arg["prefix"])
        excluded = arg if isinstance(arg, list) else [arg]
        return not any(_matches_one(e, value, True) for e in excluded)
    return _is_number(value) and all(_compare(value, arg[i], arg[i + 1]) for i in range(0, len(arg), 2))


def _compare(value: Any, op: str, bound: float) -> bool:
    if op == "<":
        return bool(value < bound)
    if op == "<=":
        return bool(value <= bound)
    if op == "=":
        return bool(value == bound)
    if op == ">":
        return bool(value > bound)
    return bool(value >= bound)
