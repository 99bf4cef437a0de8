"""Queue policies: checking a ``Policy`` document when it is set, and deciding what it lets another account do.

A policy is kept as the JSON text the client set (or AddPermission wrote).  Evaluation parses each distinct text
once (an LRU keyed by the text), so a cross-account request on a cached queue costs a dictionary lookup, not a
JSON parse and no DynamoDB call.

What is evaluated: ``Effect``, ``Principal``/``NotPrincipal``, ``Action``/``NotAction`` and
``Resource``/``NotResource``, with IAM's ``*`` and ``?`` wildcards (actions case-insensitively), and ``Condition``
(operators and keys in :mod:`ferrymq.metadata.policy_conditions`): a statement whose conditions do not hold
for the request does not apply.  An unknown condition operator makes the whole policy invalid, as in SQS.  An
explicit Deny always wins over an Allow.

A policy is written by the queue's owner but evaluated, on the event loop, for other accounts' requests, so
what one may cost is bounded: wildcards are matched by :mod:`ferrymq.metadata.wildcards`, in time linear in
the value for each pattern (never a backtracking regex, where a few ``*a`` pairs took seconds), and a document
is held to SQS's quotas whenever it is set (CreateQueue, SetQueueAttributes, AddPermission): 8,192 bytes,
20 statements, 7 actions in a statement, 50 principals and 10 condition keys in all (``OverLimit``).

Another account may do only what a statement allows it (:func:`permits`), and never the actions that are the
owner's alone, whatever the policy says (:data:`OWNER_ONLY_ACTIONS`).  The queue's owner account needs no
Allow, but an explicit Deny binds it as it binds everyone (:func:`denies`), as a resource policy's Deny binds
the account's own users in AWS: ``Deny <owner> sqs:SendMessage``, or ``Deny * sqs:*`` when
``aws:SecureTransport`` is false, refuses the owner too.  That includes the owner-only actions: a Deny on
``sqs:SetQueueAttributes`` or ``sqs:DeleteQueue`` holds for the owner's keys.  In AWS only the account's root
user can still take such a policy off; FerryMQ's keys all belong to users, and the account's admin keys stand
in for its root user: whatever the policy denies, they may still read, replace and remove it
(:data:`POLICY_REPAIR_ACTIONS`: GetQueueAttributes, SetQueueAttributes, RemovePermission), so a queue can always
be recovered, and then deleted.  For the owner the front end consults the policy only when the cached queue
record has one: a queue without a policy costs its owner's requests a dictionary lookup, nothing more.
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ferrymq.errors import InvalidAttributeValue, InvalidParameterValue, OverLimit
from ferrymq.metadata import policy_conditions
from ferrymq.metadata.policy_conditions import RequestFacts
from ferrymq.metadata.wildcards import wildcard_match
from ferrymq.protocol.decoding import DocumentError, load_document

# SQS's policy quotas.
MAX_POLICY_BYTES = 8_192
MAX_STATEMENTS = 20
MAX_ACTIONS_PER_STATEMENT = 7
MAX_PRINCIPALS = 50
MAX_CONDITIONS = 10

# Actions AddPermission may grant ("*" grants them all) ...
GRANTABLE_ACTIONS = frozenset(
    {
        "*",
        "ChangeMessageVisibility",
        "DeleteMessage",
        "GetQueueAttributes",
        "GetQueueUrl",
        "ListDeadLetterSourceQueues",
        "PurgeQueue",
        "ReceiveMessage",
        "SendMessage",
    }
)
# ... and those only the owner may ever call: cross-account permissions don't apply to them.
OWNER_ONLY_ACTIONS = frozenset(
    {
        "AddPermission",
        "CancelMessageMoveTask",
        "CreateQueue",
        "DeleteQueue",
        "ListMessageMoveTasks",
        "ListQueues",
        "ListQueueTags",
        "RemovePermission",
        "SetQueueAttributes",
        "StartMessageMoveTask",
        "TagQueue",
        "UntagQueue",
    }
)
# What an account's admin key (FerryMQ's counterpart of the root user) may do to its own queue whatever the
# policy denies: read the policy and replace or remove it, so that a Deny can never lock the owner out for good.
POLICY_REPAIR_ACTIONS = frozenset({"GetQueueAttributes", "SetQueueAttributes", "RemovePermission"})
# Batch actions are authorised as the action they batch, as SQS does.
_AUTHORISED_AS = {
    "SendMessageBatch": "SendMessage",
    "DeleteMessageBatch": "DeleteMessage",
    "ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}

DEFAULT_VERSION = "2008-10-17"
_VERSIONS = frozenset({"2008-10-17", "2012-10-17"})
_DOCUMENT_KEYS = frozenset({"Version", "Id", "Statement"})
_STATEMENT_KEYS = frozenset(
    {"Sid", "Effect", "Principal", "NotPrincipal", "Action", "NotAction", "Resource", "NotResource", "Condition"}
)
_PRINCIPAL_KINDS = frozenset({"AWS", "Service", "Federated", "CanonicalUser"})
_ACCOUNT = re.compile(r"^[0-9]{12}$")
_IAM_ARN = re.compile(r"^arn:aws[\w-]*:iam::(\d{12}):(root|user/(?:[^/]+/)*([^/]+))$")
_INVALID = "Invalid value for the parameter Policy."


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is asking: the account of the access key, and its user name when it belongs to a user."""

    account: str
    user: str | None = None


def authorised_as(action: str) -> str:
    """The action a request is authorised as (a batch as its single-message action)."""
    return _AUTHORISED_AS.get(action, action)


# --- checking a document -------------------------------------------------------------------------------


def check_policy(text: str) -> str:
    """The policy to store for ``text``, or SQS's error for it; SQS keeps the document as it was sent."""
    if len(text.encode()) > MAX_POLICY_BYTES:
        raise OverLimit(f"Policy is {len(text.encode())} bytes long, maximum allowed is {MAX_POLICY_BYTES}.")
    _statements(_document(text))
    return text


def _document(text: str) -> dict[str, Any]:
    try:
        document = load_document(text)
    except DocumentError:
        raise InvalidAttributeValue(_INVALID) from None
    if not isinstance(document, dict) or set(document) - _DOCUMENT_KEYS:
        raise InvalidAttributeValue(_INVALID)
    if document.get("Version", DEFAULT_VERSION) not in _VERSIONS:
        raise InvalidAttributeValue(_INVALID)
    if "Id" in document and not isinstance(document["Id"], str):
        raise InvalidAttributeValue(_INVALID)
    return document


def _statements(document: dict[str, Any]) -> list[_Statement]:
    raw = document.get("Statement")
    if isinstance(raw, dict):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        raise InvalidAttributeValue(_INVALID)
    if len(raw) > MAX_STATEMENTS:
        raise OverLimit(f"{len(raw)} statements were found in the submitted policy, max allowed is {MAX_STATEMENTS}.")
    statements = [_statement(item) for item in raw]
    principals = sum(len(s.principals) for s in statements)
    if principals > MAX_PRINCIPALS:
        raise OverLimit(f"{principals} principals were found in the submitted policy, max allowed is {MAX_PRINCIPALS}.")
    conditions = sum(s.conditions for s in statements)
    if conditions > MAX_CONDITIONS:
        raise OverLimit(f"{conditions} conditions were found in the submitted policy, max allowed is {MAX_CONDITIONS}.")
    return statements


def _strings(value: Any) -> tuple[str, ...]:
    """A policy element that is one string or a non-empty list of strings."""
    if isinstance(value, str) and value:
        return (value,)
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    raise InvalidAttributeValue(_INVALID)


def _one_of(statement: dict[str, Any], name: str) -> tuple[tuple[str, ...], bool]:
    """The values of ``name`` or ``Not<name>`` (exactly one must be present) and whether it was the negation."""
    positive, negative = name in statement, f"Not{name}" in statement
    if positive == negative:
        raise InvalidAttributeValue(_INVALID)
    return (_strings(statement[name]), False) if positive else (_strings(statement[f"Not{name}"]), True)


def _principals(value: Any) -> tuple[str, ...]:
    if value == "*":
        return ("*",)
    if not isinstance(value, dict) or not value or set(value) - _PRINCIPAL_KINDS:
        raise InvalidAttributeValue(_INVALID)
    out: list[str] = []
    for kind, names in value.items():
        for name in _strings(names):
            # Only account principals can be callers of this service; others are kept but never match.
            out.append(name if kind == "AWS" else f"{kind}:{name}")
    return tuple(out)


def _statement(raw: Any) -> _Statement:
    if not isinstance(raw, dict) or set(raw) - _STATEMENT_KEYS:
        raise InvalidAttributeValue(_INVALID)
    if raw.get("Effect") not in ("Allow", "Deny"):
        raise InvalidAttributeValue(_INVALID)
    if "Sid" in raw and not isinstance(raw["Sid"], str):
        raise InvalidAttributeValue(_INVALID)
    positive, negative = "Principal" in raw, "NotPrincipal" in raw
    if positive == negative:
        raise InvalidAttributeValue(_INVALID)
    principals = _principals(raw["Principal"] if positive else raw["NotPrincipal"])
    actions, not_action = _one_of(raw, "Action")
    if any(a != "*" and not _service_action(a) for a in actions):
        raise InvalidAttributeValue(_INVALID)
    if len(actions) > MAX_ACTIONS_PER_STATEMENT:
        raise OverLimit(f"{len(actions)} Actions were found, maximum allowed is {MAX_ACTIONS_PER_STATEMENT}.")
    resources, not_resource = _one_of(raw, "Resource")
    condition = raw.get("Condition")
    try:
        tests = policy_conditions.parse_condition(condition) if condition is not None else ()
    except policy_conditions.InvalidCondition:
        raise InvalidAttributeValue(_INVALID) from None
    return _Statement(
        allow=raw["Effect"] == "Allow",
        principals=principals,
        not_principal=negative,
        actions=actions,
        not_action=not_action,
        resources=resources,
        not_resource=not_resource,
        conditions=sum(len(c) for c in condition.values()) if condition else 0,
        tests=tests,
    )


def _service_action(action: str) -> bool:
    service, _, name = action.partition(":")
    return bool(service) and bool(name) and ":" not in name


# --- evaluation ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Statement:
    allow: bool
    principals: tuple[str, ...]
    not_principal: bool
    actions: tuple[str, ...]
    not_action: bool
    resources: tuple[str, ...]
    not_resource: bool
    conditions: int
    # The Condition element, parsed: every test must hold for the statement to apply.
    tests: tuple[policy_conditions.ConditionTest, ...] = ()

    def applies(self, caller: Caller, action: str, resource: str) -> bool:
        """Whether this statement speaks about ``caller`` doing ``action`` (``sqs:<name>``) here."""
        if any(_principal_matches(p, caller) for p in self.principals) == self.not_principal:
            return False
        if any(wildcard_match(a, action, ignore_case=True) for a in self.actions) == self.not_action:
            return False
        return any(wildcard_match(r, resource) for r in self.resources) != self.not_resource


def _principal_matches(principal: str, caller: Caller) -> bool:
    if principal == "*":
        return True
    if _ACCOUNT.match(principal):
        return principal == caller.account
    arn = _IAM_ARN.match(principal)
    if arn is None or arn.group(1) != caller.account:
        return False
    return arn.group(2) == "root" or (caller.user is not None and arn.group(3) == caller.user)


@functools.lru_cache(maxsize=1_024)
def _evaluable(text: str) -> tuple[_Statement, ...]:
    try:
        return tuple(_statements(_document(text)))
    except (InvalidAttributeValue, OverLimit):
        # Only checked documents are ever stored; anything else grants nothing.
        return ()


def _verdict(policy: str, caller: Caller, action: str, resource: str, facts: RequestFacts | None, *,
             allows: bool) -> bool | None:
    """False when an explicit Deny applies to the request, True when an Allow does (and no Deny), else None.

    ``allows=False`` looks at the Deny statements only (all the owner's requests need to know).
    """
    wanted = f"sqs:{action}"
    allowed = False
    for statement in _evaluable(policy):
        if (statement.allow and not allows) or not statement.applies(caller, wanted, resource):
            continue
        if statement.tests:
            facts = facts or RequestFacts(now=time.time())
            if not policy_conditions.conditions_hold(statement.tests, caller.account, caller.user, facts):
                continue
        if not statement.allow:
            return False
        allowed = True
    return True if allowed else None


def permits(policy: str | None, caller: Caller, action: str, resource: str,
            facts: RequestFacts | None = None) -> bool:
    """Whether ``policy`` lets ``caller`` (not the owner) perform ``action`` on the queue whose ARN is ``resource``.

    ``facts`` feed the statements' conditions (source address, transport, time); without them a conditional
    statement is judged on the caller alone, at the current time.
    """
    action = authorised_as(action)
    if not policy or not action or action in OWNER_ONLY_ACTIONS:
        return False
    return _verdict(policy, caller, action, resource, facts, allows=True) is True


def denies(policy: str | None, caller: Caller, action: str, resource: str, facts: RequestFacts | None = None,
           *, admin: bool = False) -> bool:
    """Whether an explicit Deny in ``policy`` refuses the queue's owner ``caller`` this ``action``.

    ``admin``: the caller holds one of its account's admin keys, which may still read, replace and remove the
    policy (:data:`POLICY_REPAIR_ACTIONS`) whatever it denies.
    """
    action = authorised_as(action)
    if not policy or not action or (admin and action in POLICY_REPAIR_ACTIONS):
        return False
    return _verdict(policy, caller, action, resource, facts, allows=False) is False


# --- AddPermission / RemovePermission --------------------------------------------------------------------


def _dumps(document: dict[str, Any]) -> str:
    return json.dumps(document, separators=(",", ":"))


def _one_or_many(values: Sequence[str]) -> str | list[str]:
    return values[0] if len(values) == 1 else list(values)


def with_permission(policy: str | None, *, label: str, accounts: Iterable[str], actions: Iterable[str],
                    resource: str) -> str:
    """``policy`` with the statement AddPermission makes: Sid ``label`` allowing ``actions`` to ``accounts``."""
    if policy:
        document = json.loads(policy)
        statements = document["Statement"]
        document["Statement"] = statements = [statements] if isinstance(statements, dict) else list(statements)
    else:
        document = {"Version": DEFAULT_VERSION, "Id": f"{resource}/SQSDefaultPolicy", "Statement": []}
        statements = document["Statement"]
    if any(s.get("Sid") == label for s in statements):
        raise InvalidParameterValue(f"Value {label} for parameter Label is invalid. Reason: Already exists.")
    statements.append(
        {
            "Sid": label,
            "Effect": "Allow",
            "Principal": {"AWS": _one_or_many([f"arn:aws:iam::{account}:root" for account in accounts])},
            "Action": _one_or_many([f"SQS:{action}" for action in actions]),
            "Resource": resource,
        }
    )
    return check_policy(_dumps(document))


def without_permission(policy: str | None, label: str) -> str | None:
    """``policy`` less the statement whose Sid is ``label``; None when no statement is left."""
    missing = InvalidParameterValue(f"Value {label} for parameter Label is invalid. Reason: can't find label.")
    if not policy:
        raise missing
    document = json.loads(policy)
    statements = document["Statement"]
    statements = [statements] if isinstance(statements, dict) else statements
    kept = [s for s in statements if s.get("Sid") != label]
    if len(kept) == len(statements):
        raise missing
    if not kept:
        return None
    document["Statement"] = kept
    return _dumps(document)
