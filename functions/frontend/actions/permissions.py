"""Queue permission actions: AddPermission and RemovePermission (owner only), which edit the queue's Policy."""

from __future__ import annotations

import re
from typing import Any

from ferrymq.errors import InvalidParameterValue, MissingParameter, OverLimit
from ferrymq.frontend.context import RequestContext
from ferrymq.frontend.message_checks import require
from ferrymq.metadata import policy

_LABEL = re.compile(r"^[A-Za-z0-9_-]{1,80}$")
_ACCOUNT = re.compile(r"^[0-9]{12}$")


def _label(params: dict[str, Any]) -> str:
    label = require(params, "Label")
    if not _LABEL.match(label):
        raise InvalidParameterValue(
            f"Value {label} for parameter Label is invalid. Reason: Can only include alphanumeric characters, "
            "hyphens, or underscores. 1 to 80 in length."
        )
    return str(label)


def _actions(params: dict[str, Any]) -> list[str]:
    actions = params.get("Actions")
    if not actions:
        raise MissingParameter("The request must contain the parameter Actions.")
    for action in actions:
        if action in policy.OWNER_ONLY_ACTIONS:
            raise InvalidParameterValue(
                f"Value SQS:{action} for parameter ActionName is invalid. Reason: Only the queue owner is allowed "
                "to invoke this action."
            )
        if action not in policy.GRANTABLE_ACTIONS:
            raise InvalidParameterValue(
                f"Value SQS:{action} for parameter ActionName is invalid. Reason: Please refer to the appropriate "
                "WSDL for a list of valid actions."
            )
    if len(actions) > policy.MAX_ACTIONS_PER_STATEMENT:
        raise OverLimit(f"{len(actions)} Actions were found, maximum allowed is {policy.MAX_ACTIONS_PER_STATEMENT}.")
    return list(actions)


def _accounts(params: dict[str, Any]) -> list[str]:
    accounts = params.get("AWSAccountIds")
    if accounts is None:
        raise MissingParameter("The request must contain the parameter AWSAccountIds.")
    if not accounts or not all(_ACCOUNT.match(a) for a in accounts):
        raise InvalidParameterValue(
            f"Value [{', '.join(accounts)}] for parameter PrincipalId is invalid. Reason: Unable to verify."
        )
    return list(accounts)


async def add_permission(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    queue = await ctx.queue(params)
    label = _label(params)
    actions = _actions(params)
    accounts = _accounts(params)
    await ctx.services.catalog.add_permission(queue.account, queue.name, label=label, accounts=accounts,
                                              actions=actions, region=queue.region)
    return {}


async def remove_permission(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    queue = await ctx.queue(params)
    await ctx.services.catalog.remove_permission(queue.account, queue.name, str(require(params, "Label")),
                                                 queue.region)
    return {}
