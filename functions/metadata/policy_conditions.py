"""Queue policy ``Condition`` blocks: parsed once when a policy is checked, evaluated per request.

A block maps operators to ``{key: value | [values]}``. As IAM evaluates them: every operator and every key of
a block must hold (AND); the values of one key are alternatives (OR), except under a negated operator
(``StringNotEquals``, ``ArnNotLike``, ``NotIpAddress``, ...), which holds only when the request's value matches
none of them. A key the request does not carry fails a positive operator and satisfies a negated one; the
``...IfExists`` suffix makes a missing key satisfy any operator, and ``Null`` tests for presence itself.
``ForAnyValue:`` / ``ForAllValues:`` qualify multi-valued keys; every key known here is single-valued, so they
differ from the plain operator only when the key is missing (ForAllValues holds, ForAnyValue fails).

Keys (case-insensitive, as in IAM): ``aws:SourceIp``, ``aws:SecureTransport``, ``aws:CurrentTime``,
``aws:EpochTime``, ``aws:PrincipalAccount``, ``aws:PrincipalArn``, ``aws:username``. ``aws:SourceArn`` and
``aws:SourceAccount`` are only present when an AWS service sends on a resource's behalf; callers of this
front end are accounts, so a request never carries them, and neither any other key (they are missing).
Policy variables (``${aws:username}``) inside values are compared literally.  ``StringLike`` and ``ArnLike`` use
IAM's ``*`` and ``?`` through :mod:`ferrymq.metadata.wildcards`, which never backtracks.

A malformed block (unknown operator, an IP range, date or number that does not parse) raises
:class:`InvalidCondition`; the policy checker turns it into SQS's error for the whole document.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ferrymq.metadata.wildcards import wildcard_match

Matcher = Callable[[str, Any], bool]
Parser = Callable[[str], Any]


class InvalidCondition(ValueError):
    """A Condition block that IAM would refuse."""


@dataclass(frozen=True, slots=True)
class RequestFacts:
    """What a request tells conditions beyond its caller: when, from where, over what."""

    now: float
    source_ip: str | None = None
    secure_transport: bool = False


@dataclass(frozen=True, slots=True)
class ConditionTest:
    """One key under one operator: ``values`` are already parsed for ``match``."""

    key: str  # lower-cased
    match: Matcher
    values: tuple[Any, ...]
    negated: bool = False
    if_exists: bool = False
    qualifier: str = ""  # "", "any" or "all"
    null_test: bool = False  # the Null operator: values are booleans "key is absent"

    def holds(self, present: tuple[str, ...] | None) -> bool:
        if self.null_test:
            return all(v == (present is None) for v in self.values)
        if present is None:
            if self.qualifier:
                return self.qualifier == "all"
            return self.if_exists or self.negated
        # A negated operator holds for a context value that matches none of the policy's values.
        checks = (any(self.match(item, v) for v in self.values) != self.negated for item in present)
        return all(checks) if self.qualifier == "all" else any(checks)


# --- value parsing and matching ------------------------------------------------------------------------


def _string_like(value: str, pattern: str) -> bool:
    return wildcard_match(pattern, value)


def _arn_like(value: str, pattern: str) -> bool:
    # Each of the six colon-separated parts is matched on its own, so a wildcard never spans a colon.
    got, want = value.split(":", 5), pattern.split(":", 5)
    if len(got) != 6 or len(want) != 6:
        return False
    return all(_string_like(g, w) for g, w in zip(got, want, strict=True))


def _parse_number(text: str) -> float:
    try:
        number = float(text)
    except ValueError:
        raise InvalidCondition(text) from None
    if number != number or number in (float("inf"), float("-inf")):
        raise InvalidCondition(text)
    return number


def _parse_date(text: str) -> float:
    """Seconds since the epoch of an ISO 8601 date/time (UTC unless it says otherwise) or of epoch seconds."""
    try:
        return _parse_number(text)
    except InvalidCondition:
        pass
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise InvalidCondition(text) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.timestamp()


def _parse_network(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        raise InvalidCondition(text) from None


def _numeric(compare: Callable[[float, float], bool]) -> Matcher:
    def match(value: str, wanted: float) -> bool:
        try:
            got = _parse_number(value)
        except InvalidCondition:
            return False
        return compare(got, wanted)

    return match


def _dated(compare: Callable[[float, float], bool]) -> Matcher:
    def match(value: str, wanted: float) -> bool:
        try:
            got = _parse_date(value)
        except InvalidCondition:
            return False
        return compare(got, wanted)

    return match


def _in_network(value: str, network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.version == network.version and address in network


def _same(text: str) -> str:
    return text


def _bool_value(text: str) -> str:
    return text.lower()


def _lt(a: float, b: float) -> bool:
    return a < b


def _le(a: float, b: float) -> bool:
    return a <= b


def _gt(a: float, b: float) -> bool:
    return a > b


def _ge(a: float, b: float) -> bool:
    return a >= b


def _eq(a: float, b: float) -> bool:
    return a == b


# operator: (parse a policy value, match a request value against it, negated)
_OPERATORS: dict[str, tuple[Parser, Matcher, bool]] = {
    "StringEquals": (_same, lambda v, w: v == w, False),
    "StringNotEquals": (_same, lambda v, w: v == w, True),
    "StringEqualsIgnoreCase": (str.casefold, lambda v, w: v.casefold() == w, False),
    "StringNotEqualsIgnoreCase": (str.casefold, lambda v, w: v.casefold() == w, True),
    "StringLike": (_same, _string_like, False),
    "StringNotLike": (_same, _string_like, True),
    "ArnEquals": (_same, _arn_like, False),
    "ArnLike": (_same, _arn_like, False),
    "ArnNotEquals": (_same, _arn_like, True),
    "ArnNotLike": (_same, _arn_like, True),
    "IpAddress": (_parse_network, _in_network, False),
    "NotIpAddress": (_parse_network, _in_network, True),
    "Bool": (_bool_value, lambda v, w: v.lower() == w, False),
    "NumericEquals": (_parse_number, _numeric(_eq), False),
    "NumericNotEquals": (_parse_number, _numeric(_eq), True),
    "NumericLessThan": (_parse_number, _numeric(_lt), False),
    "NumericLessThanEquals": (_parse_number, _numeric(_le), False),
    "NumericGreaterThan": (_parse_number, _numeric(_gt), False),
    "NumericGreaterThanEquals": (_parse_number, _numeric(_ge), False),
    "DateEquals": (_parse_date, _dated(_eq), False),
    "DateNotEquals": (_parse_date, _dated(_eq), True),
    "DateLessThan": (_parse_date, _dated(_lt), False),
    "DateLessThanEquals": (_parse_date, _dated(_le), False),
    "DateGreaterThan": (_parse_date, _dated(_gt), False),
    "DateGreaterThanEquals": (_parse_date, _dated(_ge), False),
}
_QUALIFIERS = {"ForAnyValue:": "any", "ForAllValues:": "all"}


def _policy_values(raw: Any) -> tuple[str, ...]:
    """A condition's values as IAM reads them: a scalar or a non-empty list of scalars, compared as text."""
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        raise InvalidCondition("no values")
    out: list[str] = []
    for item in items:
        if isinstance(item, bool):
            out.append("true" if item else "false")
        elif isinstance(item, str):
            out.append(item)
        elif isinstance(item, int | float):
            out.append(str(item))
        else:
            raise InvalidCondition(repr(item))
    return tuple(out)


def parse_condition(block: Any) -> tuple[ConditionTest, ...]:
    """The tests of a statement's ``Condition`` element, all of which must hold."""
    if not isinstance(block, dict):
        raise InvalidCondition("Condition is not an object")
    tests: list[ConditionTest] = []
    for name, keys in block.items():
        if not isinstance(keys, dict) or not keys:
            raise InvalidCondition(str(name))
        qualifier = ""
        base = name
        for prefix, kind in _QUALIFIERS.items():
            if base.startswith(prefix):
                qualifier, base = kind, base[len(prefix):]
                break
        if base == "Null":
            if qualifier:
                raise InvalidCondition(name)
            for key, raw in keys.items():
                values = _policy_values(raw)
                if not isinstance(key, str) or not key or any(v.lower() not in ("true", "false") for v in values):
                    raise InvalidCondition(name)
                tests.append(ConditionTest(key.lower(), _never, tuple(v.lower() == "true" for v in values),
                                           null_test=True))
            continue
        if_exists = base.endswith("IfExists")
        operator = _OPERATORS.get(base.removesuffix("IfExists"))
        if operator is None:
            raise InvalidCondition(name)
        parse, match, negated = operator
        for key, raw in keys.items():
            if not isinstance(key, str) or not key:
                raise InvalidCondition(name)
            values = tuple(parse(v) for v in _policy_values(raw))
            tests.append(ConditionTest(key.lower(), match, values, negated=negated, if_exists=if_exists,
                                       qualifier=qualifier))
    return tuple(tests)


def _never(value: str, wanted: Any) -> bool:
    return False


# --- the request's side ----------------------------------------------------------------------------------


def _iso(now: float) -> str:
    return datetime.datetime.fromtimestamp(now, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def request_value(key: str, account: str, user: str | None, facts: RequestFacts) -> tuple[str, ...] | None:
    """The request's value(s) for the lower-cased condition ``key``; None when the request does not carry it."""
    if key == "aws:sourceip":
        return (facts.source_ip,) if facts.source_ip else None
    if key == "aws:securetransport":
        return ("true" if facts.secure_transport else "false",)
    if key == "aws:currenttime":
        return (_iso(facts.now),)
    if key == "aws:epochtime":
        return (str(int(facts.now)),)
    if key == "aws:principalaccount":
        return (account,)
    if key == "aws:principalarn":
        return (f"arn:aws:iam::{account}:user/{user}" if user else f"arn:aws:iam::{account}:root",)
    if key == "aws:username":
        return (user,) if user else None
    return None


def conditions_hold(tests: tuple[ConditionTest, ...], account: str, user: str | None, facts: RequestFacts) -> bool:
    """Whether every test of a statement's Condition holds for this request."""
    return all(t.holds(request_value(t.key, account, user, facts)) for t in tests)
