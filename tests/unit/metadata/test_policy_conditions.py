"""Queue policy conditions: each operator and key, how blocks combine, and malformed blocks refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ferrymq.errors import InvalidAttributeValue
from ferrymq.metadata import policy
from ferrymq.metadata.policy import Caller
from ferrymq.metadata.policy_conditions import InvalidCondition, RequestFacts, parse_condition

QUEUE = "arn:aws:sqs:us-east-1:111111111111:orders"
STRANGER = Caller("222222222222", "bob")
NOW = 1_700_000_000.0  # 2023-11-14T22:13:20Z
FACTS = RequestFacts(now=NOW, source_ip="10.1.2.3", secure_transport=True)


def _allowed_when(condition: dict[str, Any], facts: RequestFacts = FACTS, caller: Caller = STRANGER) -> bool:
    statement = {"Effect": "Allow", "Principal": "*", "Action": "sqs:SendMessage", "Resource": QUEUE,
                 "Condition": condition}
    text = json.dumps({"Version": "2012-10-17", "Statement": [statement]})
    policy.check_policy(text)
    return policy.permits(text, caller, "SendMessage", QUEUE, facts)


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        # strings: exact, case-insensitive, wildcards, and their negations
        ({"StringEquals": {"aws:PrincipalAccount": "222222222222"}}, True),
        ({"StringEquals": {"aws:PrincipalAccount": "333333333333"}}, False),
        ({"StringEquals": {"aws:username": "BOB"}}, False),
        ({"StringEqualsIgnoreCase": {"aws:username": "BOB"}}, True),
        ({"StringNotEquals": {"aws:username": "bob"}}, False),
        ({"StringNotEquals": {"aws:username": "alice"}}, True),
        ({"StringNotEqualsIgnoreCase": {"aws:username": "BOB"}}, False),
        ({"StringLike": {"aws:username": "b?b"}}, True),
        ({"StringLike": {"aws:username": "a*"}}, False),
        ({"StringNotLike": {"aws:username": "b*"}}, False),
        ({"StringNotLike": {"aws:username": "a*"}}, True),
        # ARNs: matched part by part, so a wildcard never spans a colon
        ({"ArnEquals": {"aws:PrincipalArn": "arn:aws:iam::222222222222:user/bob"}}, True),
        ({"ArnLike": {"aws:PrincipalArn": "arn:aws:iam::*:user/*"}}, True),
        ({"ArnLike": {"aws:PrincipalArn": "arn:aws:iam::*"}}, False),
        ({"ArnLike": {"aws:PrincipalArn": "not-an-arn"}}, False),
        ({"ArnNotEquals": {"aws:PrincipalArn": "arn:aws:iam::222222222222:user/bob"}}, False),
        ({"ArnNotLike": {"aws:PrincipalArn": "arn:aws:iam::333333333333:*"}}, True),
        # addresses
        ({"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}, True),
        ({"IpAddress": {"aws:SourceIp": "10.1.2.3"}}, True),
        ({"IpAddress": {"aws:SourceIp": "192.168.0.0/16"}}, False),
        ({"IpAddress": {"aws:SourceIp": "::/0"}}, False),
        ({"NotIpAddress": {"aws:SourceIp": "192.168.0.0/16"}}, True),
        ({"NotIpAddress": {"aws:SourceIp": "10.0.0.0/8"}}, False),
        # booleans, as strings or JSON booleans, any case
        ({"Bool": {"aws:SecureTransport": "true"}}, True),
        ({"Bool": {"aws:SecureTransport": "TRUE"}}, True),
        ({"Bool": {"aws:SecureTransport": False}}, False),
        # dates: ISO 8601 (UTC unless said) or epoch seconds, against aws:CurrentTime and aws:EpochTime
        ({"DateGreaterThan": {"aws:CurrentTime": "2023-01-01T00:00:00Z"}}, True),
        ({"DateLessThan": {"aws:CurrentTime": "2023-01-01"}}, False),
        ({"DateLessThan": {"aws:CurrentTime": "2023-11-14T22:13:21+00:00"}}, True),
        ({"DateLessThanEquals": {"aws:CurrentTime": "2023-11-14T22:13:20Z"}}, True),
        ({"DateGreaterThanEquals": {"aws:CurrentTime": "2023-11-14T23:13:20+01:00"}}, True),
        ({"DateEquals": {"aws:EpochTime": "1700000000"}}, True),
        ({"DateNotEquals": {"aws:EpochTime": 1700000000}}, False),
        ({"DateGreaterThan": {"aws:EpochTime": "2024-01-01T00:00:00Z"}}, False),
        # numbers
        ({"NumericEquals": {"aws:EpochTime": 1700000000}}, True),
        ({"NumericNotEquals": {"aws:EpochTime": "1700000000"}}, False),
        ({"NumericLessThan": {"aws:EpochTime": "1700000001"}}, True),
        ({"NumericLessThanEquals": {"aws:EpochTime": "1699999999"}}, False),
        ({"NumericGreaterThan": {"aws:EpochTime": "1699999999.5"}}, True),
        ({"NumericGreaterThanEquals": {"aws:EpochTime": "1700000001"}}, False),
        ({"NumericEquals": {"aws:username": "1"}}, False),
    ],
)
def test_each_operator_compares_as_iam_does(condition: dict[str, Any], expected: bool) -> None:
    assert _allowed_when(condition) is expected


def test_values_of_one_key_are_alternatives_but_a_negated_operator_needs_all_to_miss() -> None:
    assert _allowed_when({"IpAddress": {"aws:SourceIp": ["192.168.0.0/16", "10.0.0.0/8"]}})
    assert not _allowed_when({"NotIpAddress": {"aws:SourceIp": ["192.168.0.0/16", "10.0.0.0/8"]}})
    assert _allowed_when({"StringNotEquals": {"aws:username": ["alice", "carol"]}})


def test_every_key_and_every_operator_of_a_block_must_hold() -> None:
    ip_ok = {"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}
    assert _allowed_when({**ip_ok, "Bool": {"aws:SecureTransport": "true"}})
    assert not _allowed_when({**ip_ok, "Bool": {"aws:SecureTransport": "false"}})
    assert not _allowed_when({"StringEquals": {"aws:username": "bob", "aws:PrincipalAccount": "999999999999"}})


def test_a_missing_key_fails_positive_operators_and_satisfies_negated_ones() -> None:
    no_ip = RequestFacts(now=NOW)
    assert not _allowed_when({"IpAddress": {"aws:SourceIp": "0.0.0.0/0"}}, no_ip)
    assert _allowed_when({"NotIpAddress": {"aws:SourceIp": "10.0.0.0/8"}}, no_ip)
    # aws:SourceArn and aws:SourceAccount only exist when a service sends on a resource's behalf
    assert not _allowed_when({"ArnEquals": {"aws:SourceArn": "arn:aws:sns:us-east-1:111111111111:topic"}})
    assert not _allowed_when({"StringEquals": {"aws:SourceAccount": "111111111111"}})
    assert _allowed_when({"ArnNotLike": {"aws:SourceArn": "arn:aws:sns:*:*:*"}})
    # a key without a user name: the account's root
    assert not _allowed_when({"StringLike": {"aws:username": "*"}}, caller=Caller("222222222222"))


def test_if_exists_passes_a_missing_key_and_tests_a_present_one() -> None:
    no_ip = RequestFacts(now=NOW)
    assert _allowed_when({"IpAddressIfExists": {"aws:SourceIp": "192.168.0.0/16"}}, no_ip)
    assert not _allowed_when({"IpAddressIfExists": {"aws:SourceIp": "192.168.0.0/16"}})
    assert _allowed_when({"StringEqualsIfExists": {"aws:SourceAccount": "111111111111"}})


def test_null_tests_whether_the_key_is_present() -> None:
    assert _allowed_when({"Null": {"aws:SourceArn": "true"}})
    assert not _allowed_when({"Null": {"aws:SourceIp": "true"}})
    assert _allowed_when({"Null": {"aws:SourceIp": False}})


def test_set_qualifiers_differ_from_the_plain_operator_only_for_a_missing_key() -> None:
    assert _allowed_when({"ForAnyValue:StringEquals": {"aws:username": ["alice", "bob"]}})
    assert not _allowed_when({"ForAnyValue:StringEquals": {"aws:SourceAccount": "111111111111"}})
    assert _allowed_when({"ForAllValues:StringEquals": {"aws:SourceAccount": "111111111111"}})
    assert not _allowed_when({"ForAllValues:StringLike": {"aws:username": "a*"}})


def test_keys_are_case_insensitive() -> None:
    assert _allowed_when({"IpAddress": {"AWS:SOURCEIP": "10.0.0.0/8"}})


def test_ipv4_mapped_ipv6_peers_match_ipv4_ranges() -> None:
    mapped = RequestFacts(now=NOW, source_ip="::ffff:127.0.0.1")
    assert _allowed_when({"IpAddress": {"aws:SourceIp": "127.0.0.1/32"}}, mapped)
    ipv6 = RequestFacts(now=NOW, source_ip="2001:db8::1")
    assert _allowed_when({"IpAddress": {"aws:SourceIp": "2001:db8::/32"}}, ipv6)
    assert not _allowed_when({"IpAddress": {"aws:SourceIp": "0.0.0.0/0"}}, ipv6)


def test_an_explicit_deny_under_a_holding_condition_wins_and_one_whose_condition_fails_does_not() -> None:
    allow = {"Effect": "Allow", "Principal": "*", "Action": "sqs:*", "Resource": QUEUE}
    deny = {"Effect": "Deny", "Principal": "*", "Action": "sqs:*", "Resource": QUEUE,
            "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
    text = json.dumps({"Version": "2012-10-17", "Statement": [allow, deny]})
    assert policy.permits(text, STRANGER, "SendMessage", QUEUE, FACTS)
    plain = RequestFacts(now=NOW, source_ip="10.1.2.3", secure_transport=False)
    assert not policy.permits(text, STRANGER, "SendMessage", QUEUE, plain)


@pytest.mark.parametrize(
    "condition",
    [
        "yes",
        {"StringEquals": "aws:username"},
        {"StringEquals": {}},
        {"StringSortOf": {"aws:username": "bob"}},
        {"ForSomeValues:StringEquals": {"aws:username": "bob"}},
        {"StringEquals": {"aws:username": []}},
        {"StringEquals": {"aws:username": [{"nested": 1}]}},
        {"StringEquals": {"aws:username": None}},
        {"IpAddress": {"aws:SourceIp": "10.0.0.0/33"}},
        {"IpAddress": {"aws:SourceIp": "not-an-address"}},
        {"DateLessThan": {"aws:CurrentTime": "yesterday"}},
        {"NumericLessThan": {"aws:EpochTime": "many"}},
        {"NumericLessThan": {"aws:EpochTime": "nan"}},
        {"Null": {"aws:SourceIp": "maybe"}},
        {"ForAnyValue:Null": {"aws:SourceIp": "true"}},
        {"NullIfExists": {"aws:SourceIp": "true"}},
    ],
)
def test_malformed_conditions_make_the_policy_invalid_as_sqs_answers(condition: Any) -> None:
    statement = {"Effect": "Allow", "Principal": "*", "Action": "sqs:SendMessage", "Resource": QUEUE,
                 "Condition": condition}
    with pytest.raises(InvalidAttributeValue, match=r"^Invalid value for the parameter Policy\.$"):
        policy.check_policy(json.dumps({"Version": "2012-10-17", "Statement": [statement]}))


def test_parse_condition_refuses_what_is_not_a_block() -> None:
    with pytest.raises(InvalidCondition):
        parse_condition(["StringEquals"])
    assert parse_condition({}) == ()
