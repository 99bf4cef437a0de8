"""IAM wildcard matching: ``*`` and ``?``, exact or case-insensitive, and never exponential in the pattern."""

from __future__ import annotations

import itertools
import re

import pytest

from ferrymq.metadata.wildcards import wildcard_match

ARN = "arn:aws:sqs:us-east-1:111111111111:orders"


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        ("", "", True),
        ("", "a", False),
        ("a", "", False),
        ("*", "", True),
        ("*", ARN, True),
        ("**", "", True),
        ("a**b", "ab", True),
        ("a***b", "axxb", True),
        ("?", "", False),
        ("?", "x", True),
        ("?", "xy", False),
        ("??", "xy", True),
        ("*?", "", False),
        ("?*", "x", True),
        ("orders", "orders", True),
        ("orders", "Orders", False),
        ("ord?rs", "orders", True),
        ("ord?rs", "ordrs", False),
        ("*orders", ARN, True),
        ("arn:*", ARN, True),
        ("arn:*:orders", ARN, True),
        ("arn:*:order", ARN, False),
        ("*:111111111111:*", ARN, True),
        ("*:222222222222:*", ARN, False),
        ("arn:aws:sqs:*:111111111111:ord*", ARN, True),
        ("a*b*c", "abc", True),
        ("a*b*c", "aXbYc", True),
        ("a*b*c", "acb", False),
        ("a*a", "a", False),
        ("a*a", "aa", True),
        ("*ab", "aab", True),
        ("ab*ab", "abab", True),
        ("ab*ab", "aba", False),
        ("*a?c*", "xxabcxx", True),
        ("*a?c*", "xxacxx", False),
        ("*?a?*", "ba", False),
        ("a*?", "a", False),
        ("line*end", "line\nend", True),
        ("*.fifo", "q.fifo", True),
        ("[ab]", "a", False),
        ("[ab]", "[ab]", True),
        ("a+", "aa", False),
        ("(x)|y", "(x)|y", True),
    ],
)
def test_stars_and_question_marks_match_as_iam_does(pattern: str, value: str, expected: bool) -> None:
    assert wildcard_match(pattern, value) is expected


def test_case_is_ignored_only_when_asked() -> None:
    assert wildcard_match("SQS:Send*", "sqs:sendmessage", ignore_case=True)
    assert wildcard_match("sqs:sendmessage", "SQS:SendMessage", ignore_case=True)
    assert wildcard_match("sqs:?ENDMESSAGE", "sqs:SendMessage", ignore_case=True)
    assert not wildcard_match("SQS:Send*", "sqs:sendmessage")
    assert not wildcard_match("sqs:Receive*", "sqs:SendMessage", ignore_case=True)


def _reference(pattern: str, value: str) -> bool:
    """A backtracking regex: exponential on hostile patterns, but right, so fine for tiny ones."""
    text = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(text, value, re.DOTALL) is not None


def test_every_small_pattern_agrees_with_a_reference_matcher() -> None:
    values = ["".join(v) for n in range(6) for v in itertools.product("ab", repeat=n)]
    patterns = ["".join(p) for n in range(6) for p in itertools.product("ab*?", repeat=n)]
    for pattern in patterns:
        for value in values:
            assert wildcard_match(pattern, value) is _reference(pattern, value), (pattern, value)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        # The pattern that held the gateway's event loop for seconds, with many more stars than that one.
        ("arn:aws:sqs:us-east-1:111111111111:" + "*a" * 30 + "*X", ARN[:-6] + "a" * 200, False),
        ("*a" * 30 + "*X", "a" * 200, False),
        ("*a" * 30 + "*", "a" * 200, True),
        ("*a?" * 30 + "*X", "a" * 200, False),
        ("?*" * 500 + "X", "a" * 400, False),
        ("*" + "a" * 50 + "*b", "a" * 5_000, False),
        ("*" * 4_000 + "b", "a" * 5_000, False),
    ],
)
def test_hostile_patterns_finish(pattern: str, value: str, expected: bool) -> None:
    # The timeout only turns a match that would run for hours (a backtracking one) into a failure.
    assert wildcard_match(pattern, value) is expected
    assert wildcard_match(pattern, value, ignore_case=True) is expected
