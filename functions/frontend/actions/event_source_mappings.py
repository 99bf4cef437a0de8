"""Event-source mappings (push delivery, docs/design/push-delivery.md): Create, Get, List, Update and Delete,
with Lambda's parameters, answers and errors.

A mapping belongs to the caller's account; making one needs ReceiveMessage on its queue, as the queue's policy
decides for that action. Every rule is checked before the one conditional write, so bad input changes nothing.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import datetime
import socket
from collections.abc import Callable
from typing import Any, TypeVar

from ferrymq.bulkhead import off_loop
from ferrymq.errors import ResourceNotFound, SenderError, ServiceUnavailable
from ferrymq.frontend.context import RequestContext
from ferrymq.metadata.catalog import is_fifo
from ferrymq.metadata.event_source_mappings import Changed, Mapping, MappingStore, TargetTaken
from ferrymq.push import destinations
from ferrymq.push import mapping as rules
from ferrymq.push.errors import MappingConflict, MappingParameterInvalid, MappingValidationError

T = TypeVar("T")

DEFAULT_LIST_ITEMS = 100
MAX_LIST_ITEMS = 10_000
# How long a create or update waits for a Destination's host to resolve; past it the host counts as not resolving.
RESOLVE_SECONDS = 2.0


def _store(ctx: RequestContext) -> MappingStore:
    if ctx.services.mappings is None:
        raise ServiceUnavailable(f"{ctx.action} is not served by this front end.")
    return ctx.services.mappings


async def _io(ctx: RequestContext, call: Callable[[MappingStore], T]) -> T:
    return await off_loop(ctx.services.metadata, call, _store(ctx))


def _not_found() -> ResourceNotFound:
    return ResourceNotFound("The resource you requested does not exist.")


def _iso(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def configuration(m: Mapping, *, state: str | None = None, secret: str | None = None) -> dict[str, Any]:
    """A mapping as Lambda's EventSourceMappingConfiguration shows it (the secret only when given)."""
    c = m.config
    answer: dict[str, Any] = {
        "UUID": m.uuid,
        "BatchSize": c.batch_size,
        "MaximumBatchingWindowInSeconds": c.window_seconds,
        "EventSourceArn": c.queue_arn,
        "FunctionArn": c.function_arn,
        "Destination": {"Url": c.url} if c.url else None,
        "FilterCriteria": {"Filters": [{"Pattern": p} for p in c.filters]} if c.filters else None,
        "FunctionResponseTypes": [rules.REPORT_FAILURES] if c.report_failures else [],
        "ScalingConfig": {"MaximumConcurrency": c.max_concurrency} if c.max_concurrency else None,
        "LastModified": _iso(m.last_modified),
        "LastProcessingResult": m.last_result,
        "State": state or ("Enabled" if c.enabled else "Disabled"),
        "StateTransitionReason": "USER_INITIATED",
        "SigningSecret": secret,
    }
    return {k: v for k, v in answer.items() if v is not None}


async def _readable_queue_is_fifo(ctx: RequestContext, queue_arn: str) -> bool:
    """Whether the queue ``queue_arn`` names is FIFO, if the caller may receive from it; Lambda's wording of
    SQS's error otherwise (another account's queue, missing or closed, reads the same)."""
    region, account, name = rules.queue_of(queue_arn)
    receiving = dataclasses.replace(ctx, action="ReceiveMessage")
    try:
        queue = await ctx.services.catalog.get(account, name, region)
        allowed = receiving.permitted(queue)
    except ServiceUnavailable:
        raise
    except SenderError:
        allowed = False
    if not allowed:
        raise MappingParameterInvalid(
            "Error occurred while ReceiveMessage. SQS Error Code: AWS.SimpleQueueService.NonExistentQueue. SQS Error "
            "Message: The specified queue does not exist or you do not have access to it.")
    return is_fifo(name)


async def _check_destination(ctx: RequestContext, url: str) -> None:
    """Refuse a Destination whose host is, or resolves to, an address the push policy forbids. A host that does
    not resolve now is taken: DNS may not know it yet, and every delivery checks it again before connecting."""
    policy = destinations.DestinationPolicy.of(ctx.services.settings.push_allowed_networks)
    where = destinations.parse(url)
    address = destinations.literal(where.host)
    if address is not None:
        found = [address]
    else:
        try:
            answers = await asyncio.wait_for(asyncio.get_running_loop().getaddrinfo(
                where.host, where.port, type=socket.SOCK_STREAM), RESOLVE_SECONDS)
        except (OSError, UnicodeError, TimeoutError):
            return
        found = destinations.addresses_of(answers)
    try:
        policy.check(where.host, found)
    except destinations.DestinationRefused as exc:
        raise MappingParameterInvalid(str(exc)) from None


def _conflict(config: rules.MappingConfig, taken: TargetTaken) -> MappingConflict:
    what = f'function ("{config.function_arn}")' if config.function_arn else f'destination ("{config.url}")'
    return MappingConflict(f'An event source mapping with SQS arn (" {config.queue_arn} ") and {what} already '
                           f"exists. Please update or delete the existing mapping with UUID {taken.uuid}")


async def create_event_source_mapping(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    queue_arn = params.get("EventSourceArn")
    if queue_arn is None:
        raise MappingParameterInvalid("EventSourceArn is required for SQS event-source mappings.")
    rules.queue_of(queue_arn)
    changes = rules.read_changes(params, ctx.region, ctx.account)
    if "url" in changes:
        await _check_destination(ctx, changes["url"])
    fifo = await _readable_queue_is_fifo(ctx, queue_arn)
    config = rules.configure(None, queue_arn, changes, fifo=fifo)
    try:
        created, secret = await _io(ctx, lambda store: store.create(ctx.account, config))
    except TargetTaken as taken:
        raise _conflict(config, taken) from None
    return configuration(created, secret=secret)


async def _existing(ctx: RequestContext, params: dict[str, Any]) -> Mapping:
    wanted = params.get("UUID")
    if not rules.is_uuid(wanted):
        raise _not_found()
    found = await _io(ctx, lambda store: store.get(ctx.account, wanted))
    if found is None:
        raise _not_found()
    return found


async def get_event_source_mapping(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    return configuration(await _existing(ctx, params))


async def update_event_source_mapping(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    changes = rules.read_changes(params, ctx.region, ctx.account)
    old = await _existing(ctx, params)
    if "url" in changes:
        await _check_destination(ctx, changes["url"])
    fifo = await _readable_queue_is_fifo(ctx, old.config.queue_arn)
    config = rules.configure(old.config, old.config.queue_arn, changes, fifo=fifo)
    try:
        updated = await _io(ctx, lambda store: store.update(old, config))
    except TargetTaken as taken:
        raise _conflict(config, taken) from None
    except Changed:
        raise MappingConflict("The event source mapping was changed by another request; read it and try again.") \
            from None
    return configuration(updated)


async def delete_event_source_mapping(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    old = await _existing(ctx, params)
    try:
        await _io(ctx, lambda store: store.delete(old))
    except Changed:
        raise MappingConflict("The event source mapping was changed by another request; read it and try again.") \
            from None
    return configuration(old, state="Deleting")


async def rotate_event_source_mapping_secret(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    old = await _existing(ctx, params)
    if old.config.url is None:
        raise MappingParameterInvalid("Only a mapping with a Destination has a signing secret.")
    try:
        rotated, secret = await _io(ctx, lambda store: store.rotate_secret(old))
    except Changed:
        raise MappingConflict("The event source mapping was changed by another request; read it and try again.") \
            from None
    return configuration(rotated, secret=secret)


async def list_event_source_mappings(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    limit = params.get("MaxItems")
    if limit is not None and not 1 <= limit <= MAX_LIST_ITEMS:
        bound = ("greater than or equal to 1" if limit < 1 else f"less than or equal to {MAX_LIST_ITEMS}")
        raise MappingValidationError.at(limit, "maxItems", f"Member must have value {bound}")
    queue_arn = params.get("EventSourceArn")
    if queue_arn is not None:
        rules.queue_of(queue_arn)
    function = params.get("FunctionName")
    function_arn = rules.function_arn(function, ctx.region, ctx.account) if function is not None else None
    after = _marker(params["Marker"]) if params.get("Marker") is not None else None
    found = [m for m in await _io(ctx, lambda store: store.list(ctx.account))
             if (queue_arn is None or m.config.queue_arn == queue_arn)
             and (function_arn is None or m.config.function_arn == function_arn)
             and (after is None or m.uuid > after)]
    limit = limit or DEFAULT_LIST_ITEMS
    answer: dict[str, Any] = {"EventSourceMappings": [configuration(m) for m in found[:limit]]}
    if len(found) > limit:
        answer["NextMarker"] = base64.urlsafe_b64encode(found[limit - 1].uuid.encode()).decode()
    return answer


def _marker(text: str) -> str:
    try:
        after = base64.urlsafe_b64decode(text.encode("ascii")).decode("ascii")
    except (ValueError, binascii.Error, UnicodeError):
        after = ""
    if not rules.is_uuid(after):
        raise MappingParameterInvalid("Invalid Marker.")
    return after


ACTIONS = {
    "CreateEventSourceMapping": create_event_source_mapping,
    "GetEventSourceMapping": get_event_source_mapping,
    "ListEventSourceMappings": list_event_source_mappings,
    "UpdateEventSourceMapping": update_event_source_mapping,
    "DeleteEventSourceMapping": delete_event_source_mapping,
    "RotateEventSourceMappingSecret": rotate_event_source_mapping_secret,
}
