"""Queue policy checking and evaluation: what another account may do with a queue."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ferrymq.errors import InvalidAttributeValue, InvalidParameterValue, OverLimit
from ferrymq.metadata import policy
from ferrymq.metadata.policy import Caller
from ferrymq.metadata.policy_conditions import RequestFacts

QUEUE = "arn:aws:sqs:us-east-1:111111111111:orders"
STRANGER = Caller("222222222222", "bob")


def _policy(*statements: dict[str, Any], version: str = "2012-10-17") -> str:
    return json.dumps({"Version": version, "Statement": list(statements)})


def _allow(principal: Any = "*", action: Any = "sqs:SendMessage", resource: Any = QUEUE, **extra: Any) -> dict:
    return {"Effect": "Allow", "Principal": principal, "Action": action, "Resource": resource, **extra}


# --- checking ------------------------------------------------------------------------------------------


def test_a_valid_policy_is_kept_as_sent() -> None:
    text = _policy(_allow(), _allow({"AWS": ["222222222222"]}, ["sqs:Receive*"], "*", Sid="two"))
    assert policy.check_policy(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        json.dumps({"Statement": []}),
        json.dumps({"Version": "2020-01-01", "Statement": [_allow()]}),
        json.dumps({"Version": "2012-10-17", "Statement": [_allow()], "Extra": 1}),
        _policy({"Effect": "Maybe", "Principal": "*", "Action": "sqs:*", "Resource": "*"}),
        _policy({"Effect": "Allow", "Action": "sqs:*", "Resource": "*"}),
        _policy({"Effect": "Allow", "Principal": "*", "Resource": "*"}),
        _policy({"Effect": "Allow", "Principal": "*", "Action": "sqs:*"}),
        _policy(_allow(action="SendMessage")),
        _policy(_allow(action=[])),
        _policy(_allow(principal={"Someone": "x"})),
        _policy(_allow(Condition="yes")),
        _policy(_allow(Unknown=1)),
        _policy({**_allow(), "NotAction": "sqs:ReceiveMessage"}),
    ],
)
def test_malformed_policies_are_refused_as_sqs_does(text: str) -> None:
    with pytest.raises(InvalidAttributeValue, match=r"^Invalid value for the parameter Policy\.$"):
        policy.check_policy(text)


def test_policy_quotas_are_enforced() -> None:
    with pytest.raises(OverLimit, match="21 statements were found in the submitted policy, max allowed is 20"):
        policy.check_policy(_policy(*[_allow() for _ in range(21)]))
    with pytest.raises(OverLimit, match="8 Actions were found, maximum allowed is 7"):
        policy.check_policy(_policy(_allow(action=[f"sqs:A{i}" for i in range(8)])))
    with pytest.raises(OverLimit, match="51 principals"):
        policy.check_policy(_policy(_allow(principal={"AWS": [f"{i:012d}" for i in range(51)]})))
    with pytest.raises(OverLimit, match="bytes long"):
        policy.check_policy(_policy(_allow(Sid="x" * 9000)))
    eleven = {"StringLike": {f"aws:Key{i}": "x" for i in range(6)}, "Bool": {f"aws:Flag{i}": "true" for i in range(5)}}
    with pytest.raises(OverLimit, match="11 conditions were found in the submitted policy, max allowed is 10"):
        policy.check_policy(_policy(_allow(Condition=eleven)))
    # and each quota's own limit is still accepted
    ten = {"StringLike": {f"aws:Key{i}": "x" for i in range(5)}, "Bool": {f"aws:Flag{i}": "true" for i in range(5)}}
    policy.check_policy(_policy(*[_allow(Condition=ten)], *[_allow() for _ in range(19)]))
    policy.check_policy(_policy(_allow(principal={"AWS": [f"{i:012d}" for i in range(50)]},
                                       action=[f"sqs:A{i}" for i in range(7)])))


@pytest.mark.timeout(60)
def test_a_hostile_wildcard_resource_is_decided_without_backtracking() -> None:
    # given the resource pattern that once held the gateway for seconds, with far more stars
    queue = "arn:aws:sqs:us-east-1:111111111111:" + "a" * 80
    hostile = "arn:aws:sqs:us-east-1:111111111111:" + "*a" * 40
    # then a pattern that cannot match is refused, and one that can is granted
    assert not policy.permits(_policy(_allow(resource=hostile + "*X")), STRANGER, "SendMessage", queue)
    assert policy.permits(_policy(_allow(resource=hostile + "*")), STRANGER, "SendMessage", queue)
    # and so are conditions that compare with wildcards
    like = {"StringLike": {"aws:PrincipalArn": "*a" * 40 + "*X"}}
    assert not policy.permits(_policy(_allow(Condition=like)), Caller("222222222222", "a" * 80), "SendMessage",
                              queue)


# --- evaluation ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "principal",
    [
        "*",
        {"AWS": "*"},
        {"AWS": "222222222222"},
        {"AWS": "arn:aws:iam::222222222222:root"},
        {"AWS": ["333333333333", "arn:aws:iam::222222222222:root"]},
        {"AWS": "arn:aws:iam::222222222222:user/team/bob"},
    ],
)
def test_principals_that_name_the_caller_grant(principal: Any) -> None:
    assert policy.permits(_policy(_allow(principal)), STRANGER, "SendMessage", QUEUE)


@pytest.mark.parametrize(
    "principal",
    [
        {"AWS": "333333333333"},
        {"AWS": "arn:aws:iam::333333333333:root"},
        {"AWS": "arn:aws:iam::222222222222:user/alice"},
        {"AWS": "arn:aws:iam::222222222222:role/worker"},
        {"Service": "sns.amazonaws.com"},
    ],
)
def test_principals_that_do_not_name_the_caller_grant_nothing(principal: Any) -> None:
    assert not policy.permits(_policy(_allow(principal)), STRANGER, "SendMessage", QUEUE)


@pytest.mark.parametrize(
    ("granted", "action", "expected"),
    [
        ("sqs:*", "ReceiveMessage", True),
        ("*", "ReceiveMessage", True),
        ("SQS:SendMessage", "SendMessage", True),
        ("sqs:sendmessage", "SendMessage", True),
        ("sqs:Send*", "SendMessage", True),
        ("sqs:Send*", "SendMessageBatch", True),
        ("sqs:?eceiveMessage", "ReceiveMessage", True),
        ("sqs:SendMessage", "ReceiveMessage", False),
        ("sqs:DeleteMessage", "DeleteMessageBatch", True),
        ("sqs:ChangeMessageVisibility", "ChangeMessageVisibilityBatch", True),
        ("sqs:SendMessageBatch", "SendMessageBatch", False),
        ("s3:*", "SendMessage", False),
    ],
)
def test_actions_match_with_wildcards_and_batches_as_single_actions(granted: str, action: str, expected: bool) -> None:
    assert policy.permits(_policy(_allow(action=granted)), STRANGER, action, QUEUE) is expected


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        (QUEUE, True),
        ("*", True),
        ("arn:aws:sqs:*:111111111111:*", True),
        ("arn:aws:sqs:us-east-1:111111111111:ord?rs", True),
        ("arn:aws:sqs:us-east-1:111111111111:other", False),
        ("arn:aws:sqs:us-east-1:111111111111:Orders", False),
    ],
)
def test_resources_match_the_queue_arn(resource: str, expected: bool) -> None:
    assert policy.permits(_policy(_allow(resource=resource)), STRANGER, "SendMessage", QUEUE) is expected


def test_an_explicit_deny_wins_over_an_allow() -> None:
    deny = {"Effect": "Deny", "Principal": {"AWS": "222222222222"}, "Action": "sqs:Send*", "Resource": QUEUE}
    text = _policy(_allow(action="sqs:*"), deny)
    assert not policy.permits(text, STRANGER, "SendMessage", QUEUE)
    assert policy.permits(text, STRANGER, "ReceiveMessage", QUEUE)


def test_a_statement_applies_only_when_its_condition_holds() -> None:
    # aws:SourceArn is only carried when a service sends on a resource's behalf, never by an account's request
    condition = {"ArnEquals": {"aws:SourceArn": "arn:aws:sns:us-east-1:111111111111:topic"}}
    # given an Allow that only holds under a condition the request fails, then it grants nothing
    assert not policy.permits(_policy(_allow(Condition=condition)), STRANGER, "SendMessage", QUEUE)
    # given an unconditional Allow and a Deny whose condition fails, then the Allow stands
    deny = {"Effect": "Deny", "Principal": "*", "Action": "sqs:*", "Resource": "*", "Condition": condition}
    assert policy.permits(_policy(_allow(), deny), STRANGER, "SendMessage", QUEUE)
    # and a Deny whose condition holds wins
    holds = {**deny, "Condition": {"StringEquals": {"aws:PrincipalAccount": STRANGER.account}}}
    assert not policy.permits(_policy(_allow(), holds), STRANGER, "SendMessage", QUEUE)


def test_not_elements_invert_their_match() -> None:
    everything_but_receive = {"Effect": "Allow", "Principal": "*", "NotAction": "sqs:ReceiveMessage", "Resource": "*"}
    assert policy.permits(_policy(everything_but_receive), STRANGER, "SendMessage", QUEUE)
    assert not policy.permits(_policy(everything_but_receive), STRANGER, "ReceiveMessage", QUEUE)
    not_carol = {"Effect": "Allow", "NotPrincipal": {"AWS": "333333333333"}, "Action": "sqs:*", "NotResource": "x"}
    assert policy.permits(_policy(not_carol), STRANGER, "SendMessage", QUEUE)
    assert not policy.permits(_policy(not_carol), Caller("333333333333"), "SendMessage", QUEUE)


@pytest.mark.parametrize("action", sorted(policy.OWNER_ONLY_ACTIONS))
def test_owner_only_actions_are_never_granted(action: str) -> None:
    assert not policy.permits(_policy(_allow(action="*")), STRANGER, action, QUEUE)


def test_no_policy_grants_nothing() -> None:
    assert not policy.permits(None, STRANGER, "SendMessage", QUEUE)
    assert not policy.permits("", STRANGER, "SendMessage", QUEUE)


def test_a_request_without_a_known_action_is_granted_nothing() -> None:
    assert not policy.permits(_policy(_allow(action="sqs:*")), STRANGER, "", QUEUE)


# --- the owner: bound by an explicit Deny only ----------------------------------------------------------------

OWNER = Caller("111111111111", "alice")
PLAIN_HTTP = RequestFacts(now=1_700_000_000.0, secure_transport=False)
TLS = RequestFacts(now=1_700_000_000.0, secure_transport=True)


def _deny(principal: Any = "*", action: Any = "sqs:SendMessage", **extra: Any) -> dict:
    return {"Effect": "Deny", "Principal": principal, "Action": action, "Resource": QUEUE, **extra}


@pytest.mark.parametrize("principal", ["*", {"AWS": "111111111111"}, {"AWS": "arn:aws:iam::111111111111:root"},
                                       {"AWS": "arn:aws:iam::111111111111:user/alice"}])
def test_an_explicit_deny_binds_the_owner(principal: Any) -> None:
    text = _policy(_deny(principal))
    assert policy.denies(text, OWNER, "SendMessage", QUEUE)
    assert policy.denies(text, OWNER, "SendMessageBatch", QUEUE)
    # and only for what it names
    assert not policy.denies(text, OWNER, "ReceiveMessage", QUEUE)


def test_a_deny_that_names_someone_else_or_another_queue_does_not_bind_the_owner() -> None:
    assert not policy.denies(_policy(_deny({"AWS": "222222222222"})), OWNER, "SendMessage", QUEUE)
    assert not policy.denies(_policy(_deny({"AWS": "arn:aws:iam::111111111111:user/bob"})), OWNER, "SendMessage",
                             QUEUE)
    assert not policy.denies(_policy({**_deny(), "Resource": QUEUE + "-other"}), OWNER, "SendMessage", QUEUE)
    everyone_but_the_owner = {"Effect": "Deny", "NotPrincipal": {"AWS": "111111111111"}, "Action": "sqs:*",
                              "Resource": QUEUE}
    assert not policy.denies(_policy(everyone_but_the_owner), OWNER, "SendMessage", QUEUE)


def test_allows_neither_grant_nor_restrict_the_owner() -> None:
    # given a policy that only allows another account, then nothing is denied to the owner
    assert not policy.denies(_policy(_allow({"AWS": "222222222222"})), OWNER, "SendMessage", QUEUE)
    # and an Allow beside a Deny does not soften it
    assert policy.denies(_policy(_allow("*", "sqs:*"), _deny()), OWNER, "SendMessage", QUEUE)
    assert not policy.denies(None, OWNER, "SendMessage", QUEUE)
    assert not policy.denies("", OWNER, "SendMessage", QUEUE)
    assert not policy.denies(_policy(_deny(action="*")), OWNER, "", QUEUE)


def test_a_deny_over_plain_http_binds_the_owner_only_over_plain_http() -> None:
    text = _policy(_deny(action="sqs:*", Condition={"Bool": {"aws:SecureTransport": "false"}}))
    assert policy.denies(text, OWNER, "SendMessage", QUEUE, PLAIN_HTTP)
    assert not policy.denies(text, OWNER, "SendMessage", QUEUE, TLS)


@pytest.mark.parametrize("action", sorted(policy.OWNER_ONLY_ACTIONS))
def test_a_deny_binds_the_owner_on_its_own_actions_too(action: str) -> None:
    assert policy.denies(_policy(_deny(action="sqs:*")), OWNER, action, QUEUE)


@pytest.mark.parametrize("action", sorted(policy.POLICY_REPAIR_ACTIONS))
def test_an_admin_key_may_still_read_and_take_off_a_policy_that_denies_everything(action: str) -> None:
    text = _policy(_deny(action="*"))
    assert policy.denies(text, OWNER, action, QUEUE)
    assert not policy.denies(text, OWNER, action, QUEUE, admin=True)


@pytest.mark.parametrize("action", ["SendMessage", "ReceiveMessage", "DeleteQueue", "PurgeQueue", "AddPermission"])
def test_an_admin_key_is_bound_by_a_deny_on_everything_else(action: str) -> None:
    assert policy.denies(_policy(_deny(action="*")), OWNER, action, QUEUE, admin=True)


# --- AddPermission / RemovePermission ---------------------------------------------------------------------


def test_add_permission_builds_the_statement_sqs_writes() -> None:
    # when a permission is added to a queue without a policy
    text = policy.with_permission(None, label="send", accounts=["222222222222"], actions=["SendMessage"],
                                  resource=QUEUE)
    # then the document is SQS's default policy with one statement
    assert json.loads(text) == {
        "Version": "2008-10-17",
        "Id": f"{QUEUE}/SQSDefaultPolicy",
        "Statement": [
            {
                "Sid": "send",
                "Effect": "Allow",
                "Principal": {"AWS": "arn:aws:iam::222222222222:root"},
                "Action": "SQS:SendMessage",
                "Resource": QUEUE,
            }
        ],
    }
    assert policy.permits(text, STRANGER, "SendMessageBatch", QUEUE)
    # when a second label grants several actions to several accounts, then they are listed
    text = policy.with_permission(text, label="both", accounts=["333333333333", "222222222222"],
                                  actions=["ReceiveMessage", "DeleteMessage"], resource=QUEUE)
    second = json.loads(text)["Statement"][1]
    assert second["Principal"] == {"AWS": ["arn:aws:iam::333333333333:root", "arn:aws:iam::222222222222:root"]}
    assert second["Action"] == ["SQS:ReceiveMessage", "SQS:DeleteMessage"]


def test_a_label_is_used_once_and_removed_once() -> None:
    text = policy.with_permission(None, label="l1", accounts=["222222222222"], actions=["*"], resource=QUEUE)
    already = r"^Value l1 for parameter Label is invalid\. Reason: Already exists\.$"
    with pytest.raises(InvalidParameterValue, match=already):
        policy.with_permission(text, label="l1", accounts=["222222222222"], actions=["*"], resource=QUEUE)
    text = policy.with_permission(text, label="l2", accounts=["222222222222"], actions=["*"], resource=QUEUE)
    remaining = policy.without_permission(text, "l1")
    assert remaining is not None and [s["Sid"] for s in json.loads(remaining)["Statement"]] == ["l2"]
    assert policy.without_permission(remaining, "l2") is None
    with pytest.raises(InvalidParameterValue, match=r"Reason: can't find label\.$"):
        policy.without_permission(remaining, "l1")
    with pytest.raises(InvalidParameterValue, match=r"Reason: can't find label\.$"):
        policy.without_permission(None, "l1")


def test_add_permission_respects_the_statement_quota() -> None:
    text = None
    for i in range(policy.MAX_STATEMENTS):
        text = policy.with_permission(text, label=f"l{i}", accounts=["222222222222"], actions=["*"], resource=QUEUE)
    with pytest.raises(OverLimit):
        policy.with_permission(text, label="one-more", accounts=["222222222222"], actions=["*"], resource=QUEUE)
