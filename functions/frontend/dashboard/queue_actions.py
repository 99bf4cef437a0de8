"""The queue actions the dashboard offers: peek at messages, send a test message, purge, delete.

Each runs the API's own handler (PeekMessages, SendMessage, PurgeQueue, DeleteQueue) with the logged-in key
as the caller, so the key decides as it would for a signed request: a plain key acts as itself, and its
queue's owner or the queue's policy allows or refuses it (another account's queue without a policy that
allows it answers AccessDenied, as SQS does); an admin key acts as the owner of the queue the URL names,
as it may on the redrive. Nothing here decides who may do what.

The page's input is checked for shape here (the handlers take the JSON protocol's types), so a number where
a string belongs is an InvalidParameterValue rather than an internal error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ferrymq.aws.credentials import Credential
from ferrymq.errors import InvalidParameterValue, MissingParameter
from ferrymq.frontend.actions import ACTIONS
from ferrymq.frontend.context import RequestContext
from ferrymq.frontend.queue_urls import parse_queue_url

ContextFor = Callable[[str, str | None], RequestContext]
"""(action, account to act as; None: the key's own) -> the handler's context."""

PATHS = {"peek": "PeekMessages", "send": "SendMessage", "purge": "PurgeQueue", "delete": "DeleteQueue"}
"""The dashboard's route under /dashboard/api/ -> the action it runs."""

_MAX_URL = 1024
# The page's names for the fields it sends -> SendMessage's.
_SEND_FIELDS = {"messageGroupId": "MessageGroupId", "messageDeduplicationId": "MessageDeduplicationId"}


async def run(route: str, document: dict[str, Any], credential: Credential, context_for: ContextFor) -> dict[str, Any]:
    """What ``route`` answers to the page's ``document``, as ``credential``'s signed request would."""
    action = PATHS[route]
    url = _string(document, "queueUrl", required=True)
    if len(url) > _MAX_URL:
        raise InvalidParameterValue(f"Value for parameter QueueUrl is invalid. Reason: longer than {_MAX_URL}.")
    acting_as = parse_queue_url(url, credential.account_id).account if credential.admin else None
    params: dict[str, Any] = {"QueueUrl": url}
    if action == "PeekMessages":
        wanted = document.get("maxNumberOfMessages")
        if wanted is not None:
            params["MaxNumberOfMessages"] = wanted
    elif action == "SendMessage":
        params["MessageBody"] = _string(document, "messageBody", required=True)
        for field, name in _SEND_FIELDS.items():
            value = _string(document, field, required=False)
            if value:
                params[name] = value
    return await ACTIONS[action](context_for(action, acting_as), params)


def _string(document: dict[str, Any], field: str, *, required: bool) -> str:
    value = document.get(field)
    if value is None or value == "":
        if required:
            raise MissingParameter(f"The request must contain the parameter {field}.")
        return ""
    if not isinstance(value, str):
        raise InvalidParameterValue(f"Value for parameter {field} is invalid. Reason: it must be a string.")
    return value
