"""Queue policies with conditions, over HTTP: another account let in, or kept out, by where and when it asks."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from tests.support.errors import expect_error
from tests.support.policies import queue_with_arn, set_policy
from tests.support.sqs_clients import sqs_client

OTHER = "323232323232"


@pytest.fixture(scope="module")
def other_keys(stack: Any) -> tuple[str, str]:
    return stack.create_credentials(OTHER, "carol")


@pytest.fixture
def other(stack: Any, protocol: str, other_keys: tuple[str, str]) -> Any:
    """A client of another account than the ``sqs`` client's."""
    return sqs_client(stack.endpoint, protocol, access_key=other_keys[0], secret_key=other_keys[1])


def _allow(arn: str, condition: dict[str, Any] | None = None) -> dict[str, Any]:
    statement: dict[str, Any] = {"Effect": "Allow", "Principal": {"AWS": OTHER}, "Action": "sqs:SendMessage",
                                 "Resource": arn}
    if condition is not None:
        statement["Condition"] = condition
    return statement


def _iso(delta: datetime.timedelta) -> str:
    return (datetime.datetime.now(datetime.UTC) + delta).strftime("%Y-%m-%dT%H:%M:%SZ")


def _refused(other: Any, url: str) -> None:
    expect_error(lambda: other.send_message(QueueUrl=url, MessageBody="x"), "AccessDenied", 403,
                 json_code="AccessDeniedException")


def test_source_ip_condition_lets_in_only_the_named_addresses(sqs: Any, other: Any) -> None:
    url, arn = queue_with_arn(sqs, "cond")
    # given an Allow for requests from the loopback address the client uses
    set_policy(sqs, url, _allow(arn, {"IpAddress": {"aws:SourceIp": "127.0.0.1/32"}}))
    # then the other account may send
    assert other.send_message(QueueUrl=url, MessageBody="from loopback")["MessageId"]
    # when the Allow names another network, then it is refused
    set_policy(sqs, url, _allow(arn, {"IpAddress": {"aws:SourceIp": "192.0.2.0/24"}}))
    _refused(other, url)
    # and a NotIpAddress on that other network lets it in again
    set_policy(sqs, url, _allow(arn, {"NotIpAddress": {"aws:SourceIp": "192.0.2.0/24"}}))
    assert other.send_message(QueueUrl=url, MessageBody="not from there")["MessageId"]


def test_a_forwarded_for_header_does_not_pass_for_the_callers_address(sqs: Any, other: Any) -> None:
    url, arn = queue_with_arn(sqs, "cond")
    set_policy(sqs, url, _allow(arn, {"IpAddress": {"aws:SourceIp": "192.0.2.0/24"}}))

    def claim_another_address(request: Any, **_: Any) -> None:
        request.headers["X-Forwarded-For"] = "192.0.2.9"

    # when the other account claims, in a header, to come from the allowed network
    other.meta.events.register_first("before-send.sqs.SendMessage", claim_another_address)
    # then the address it connected from is the one judged, and it is refused
    _refused(other, url)


def test_current_time_window_lets_in_only_while_it_is_open(sqs: Any, other: Any) -> None:
    url, arn = queue_with_arn(sqs, "cond")
    hour = datetime.timedelta(hours=1)
    # given an Allow for a window around now
    set_policy(sqs, url, _allow(arn, {"DateGreaterThan": {"aws:CurrentTime": _iso(-hour)},
                                       "DateLessThan": {"aws:CurrentTime": _iso(hour)}}))
    assert other.send_message(QueueUrl=url, MessageBody="in the window")["MessageId"]
    # when the window closed an hour ago, then it is refused
    set_policy(sqs, url, _allow(arn, {"DateGreaterThan": {"aws:CurrentTime": _iso(-2 * hour)},
                                       "DateLessThan": {"aws:CurrentTime": _iso(-hour)}}))
    _refused(other, url)


def test_a_conditional_deny_wins_over_an_allow_only_while_its_condition_holds(sqs: Any, other: Any) -> None:
    url, arn = queue_with_arn(sqs, "cond")
    # given an unconditional Allow, and a Deny for requests not over TLS (this stack serves plain HTTP)
    deny_plain = {"Effect": "Deny", "Principal": "*", "Action": "sqs:*", "Resource": arn,
                  "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
    set_policy(sqs, url, _allow(arn), deny_plain)
    # then the Deny wins
    _refused(other, url)
    # when the Deny only covers another account, then its condition fails and the Allow stands
    deny_plain["Condition"]["StringEquals"] = {"aws:PrincipalAccount": "999999999999"}
    set_policy(sqs, url, _allow(arn), deny_plain)
    assert other.send_message(QueueUrl=url, MessageBody="allowed")["MessageId"]
    # and the owner, which needs no Allow and which this Deny's conditions leave out, still receives
    assert sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]


def test_an_unknown_condition_operator_is_refused_as_sqs_does(sqs: Any) -> None:
    url, arn = queue_with_arn(sqs, "cond")
    for condition in ({"StringSortOf": {"aws:SourceArn": "x"}}, {"IpAddress": {"aws:SourceIp": "300.1.1.1/8"}}):
        policy = json.dumps({"Version": "2012-10-17", "Statement": [_allow(arn, condition)]})
        expect_error(lambda policy=policy: sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": policy}),
                     "InvalidAttributeValue", 400, message="Invalid value for the parameter Policy.")
    assert "Attributes" not in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])
