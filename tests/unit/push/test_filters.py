"""Lambda's filter patterns: what is refused when a mapping is made, and what matches a record."""

from __future__ import annotations

import json

import pytest

from ferrymq.push.errors import MappingParameterInvalid
from ferrymq.push.filters import matches_any, parse_pattern


def record(body: str, **attributes: str) -> dict:
    return {"body": body, "attributes": attributes, "messageAttributes": {}, "eventSource": "aws:sqs"}


@pytest.mark.parametrize("text", [
    "", "[]", "{}", "null", '"x"', '{"body": "x"}', '{"body": []}', '{"body": {}}', '{"body": [[1]]}',
    '{"body": [{"prefix": 1}]}', '{"body": [{"prefix": "a", "suffix": "b"}]}', '{"body": [{"exists": "yes"}]}',
    '{"body": [{"numeric": [">"]}]}', '{"body": [{"numeric": ["!", 1]}]}', '{"body": [{"numeric": [">", "1"]}]}',
    '{"body": [{"anything-but": []}]}', '{"body": [{"anything-but": {"suffix": "x"}}]}',
    '{"body": [{"wildcard": "*"}]}', '{"a": ' * 20 + "[1]" + "}" * 20, '{"body": [NaN]}', "x" * 4097,
])
def test_patterns_that_are_not_lambdas_syntax_are_refused(text: str) -> None:
    with pytest.raises(MappingParameterInvalid, match=r"Invalid filter pattern definition\."):
        parse_pattern(text)


def test_patterns_match_json_bodies_attributes_and_plain_bodies() -> None:
    by_kind = parse_pattern('{"body": {"kind": ["order", {"prefix": "refund-"}], "total": [{"numeric": [">", 10, '
                            '"<=", 100]}]}}')
    assert matches_any([by_kind], record(json.dumps({"kind": "order", "total": 11})))
    assert matches_any([by_kind], record(json.dumps({"kind": "refund-7", "total": 100})))
    assert not matches_any([by_kind], record(json.dumps({"kind": "order", "total": 101})))
    assert not matches_any([by_kind], record(json.dumps({"kind": "order"})))
    assert not matches_any([by_kind], record("kind=order"))
    plain = parse_pattern('{"body": [{"suffix": "!"}]}')
    assert matches_any([plain], record("hello!")) and not matches_any([plain], record("hello"))
    absent = parse_pattern('{"attributes": {"MessageGroupId": [{"exists": false}]}}')
    assert matches_any([absent], record("x")) and not matches_any([absent], record("x", MessageGroupId="g"))
    but = parse_pattern('{"body": {"kind": [{"anything-but": ["test", 7]}]}}')
    assert matches_any([but], record('{"kind": "live"}')) and not matches_any([but], record('{"kind": 7}'))
    any_of = [parse_pattern('{"body": ["a"]}'), parse_pattern('{"body": ["b"]}')]
    assert matches_any(any_of, record("b")) and not matches_any(any_of, record("c"))
    assert matches_any([], record("anything"))


def test_a_deep_body_does_not_break_matching() -> None:
    pattern = parse_pattern('{"body": {"a": [1]}}')
    assert not matches_any([pattern], record("[" * 100_000 + "]" * 100_000))
