"""Queue management actions: create, find, list, inspect, change, purge and delete queues; find dead-letter sources."""

from __future__ import annotations

import asyncio
import base64
import logging
from typing import Any

from ferrymq.aws.queue_store import QueueRecord
from ferrymq.errors import AccessDenied, InvalidAttributeName, InvalidParameterValue, QueueDoesNotExist, SqsError
from ferrymq.frontend.context import RequestContext
from ferrymq.frontend.message_checks import optional_int, require
from ferrymq.metadata import queue_attributes
from ferrymq.metadata.catalog import QUEUE_NAME, is_fifo

log = logging.getLogger(__name__)

_COUNTERS = {
    "ApproximateNumberOfMessages": "visible",
    "ApproximateNumberOfMessagesNotVisible": "in_flight",
    "ApproximateNumberOfMessagesDelayed": "delayed",
}


def _string_map(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise InvalidParameterValue(f"The {what} map is malformed.")
    return value


async def create_queue(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    name = require(params, "QueueName")
    attributes = _string_map(params.get("Attributes"), "Attributes")
    tags = _string_map(params.get("tags"), "tags")
    queue = await ctx.services.catalog.create(ctx.account, name, attributes, tags, ctx.region)
    return {"QueueUrl": ctx.url_of(queue)}


async def get_queue_url(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    name = require(params, "QueueName")
    owner = params.get("QueueOwnerAWSAccountId") or ctx.account
    if not QUEUE_NAME.match(name.removesuffix(".fifo")):
        raise QueueDoesNotExist()
    queue = await ctx.services.catalog.get(owner, name, ctx.region)
    if not ctx.permitted(queue):
        if queue.account == ctx.account:
            # The owner knows its queue exists: only an explicit Deny in its policy refuses it.
            raise AccessDenied(f"Access to the resource {ctx.url_of(queue)} is denied.")
        # Another account's queue is visible only to those its policy lets call GetQueueUrl.
        raise QueueDoesNotExist()
    return {"QueueUrl": ctx.url_of(queue)}


async def list_queues(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    prefix = params.get("QueueNamePrefix") or ""
    max_results = optional_int(params, "MaxResults", 1, 1000, "Value must be between 1 and 1000.")
    start_after = _decode_token(params.get("NextToken")) if params.get("NextToken") else None
    limit = max_results if max_results is not None else 1000
    # One more than asked for tells whether a next page exists.
    queues = await ctx.services.catalog.list(ctx.account, prefix, limit + 1, start_after, ctx.region)
    result: dict[str, Any] = {}
    if queues[:limit]:
        result["QueueUrls"] = [ctx.url_of(q) for q in queues[:limit]]
    if max_results is not None and len(queues) > limit:
        result["NextToken"] = _encode_token(queues[limit - 1].name)
    return result


async def list_dead_letter_source_queues(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    queue = await ctx.queue(params)
    max_results = optional_int(params, "MaxResults", 1, 1000, "Value must be between 1 and 1000.")
    start_after = _decode_token(params.get("NextToken")) if params.get("NextToken") else None
    limit = max_results if max_results is not None else 1000
    sources = await ctx.services.catalog.dead_letter_sources(queue.account, queue.name, limit + 1, start_after,
                                                             queue.region)
    result: dict[str, Any] = {"queueUrls": [ctx.url_of(q) for q in sources[:limit]]}
    if max_results is not None and len(sources) > limit:
        result["NextToken"] = _encode_token(sources[limit - 1].name)
    return result


def _encode_token(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode()).decode()


def _decode_token(token: str) -> str:
    try:
        return base64.urlsafe_b64decode(token.encode()).decode()
    except (ValueError, UnicodeDecodeError):
        raise InvalidParameterValue("Invalid NextToken value.") from None


async def delete_queue(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    queue = await ctx.queue(params)
    deleted = await ctx.services.catalog.delete(queue.account, queue.name, queue.region)
    await asyncio.gather(*(_drop_shard(ctx, deleted, index) for index in range(len(deleted.shards))))
    return {}


async def _drop_shard(ctx: RequestContext, deleted: QueueRecord, index: int) -> None:
    try:
        await ctx.services.dispatcher.on_shard(
            deleted, index, lambda w, partition, queue_id: w.drop_queue(partition, queue_id), idempotent=True
        )
    except SqsError:
        # The delete stands: the pending drop written with the tombstone makes the partition's worker drop
        # the id at its next sweep.
        log.warning("could not drop messages of deleted queue %s (shard %d) now; its worker will",
                    deleted.queue_id, index, exc_info=True)
        return
    try:
        await ctx.services.catalog.clear_pending_drop(deleted, index)
    except Exception:
        # The queue is deleted and its messages dropped, so no failure here may turn into an error for the
        # caller; the worker's sweep finds the id dropped already and clears the item itself.
        log.warning("pending drop of queue %s left for its worker to clear", deleted.queue_id, exc_info=True)


async def purge_queue(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    queue = await ctx.queue(params)
    purged = await ctx.services.catalog.mark_purged(queue.account, queue.name, queue.region)
    await ctx.services.dispatcher.on_every_shard(
        purged, lambda w, partition, queue_id: w.purge(partition, queue_id), idempotent=True
    )
    return {}


async def set_queue_attributes(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    queue = await ctx.queue(params)
    attributes = _string_map(require(params, "Attributes"), "Attributes")
    await ctx.services.catalog.set_attributes(queue.account, queue.name, attributes, queue.region)
    return {}


async def get_queue_attributes(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    queue = await ctx.queue(params)
    names = params.get("AttributeNames") or []
    applicable = queue_attributes.applicable(fifo=is_fifo(queue.name))
    wanted: set[str] = set()
    for name in names:
        if name == "All":
            wanted |= applicable
        elif name in applicable:
            wanted.add(name)
        else:
            raise InvalidAttributeName(f"Unknown Attribute {name}.")
    if not wanted:
        return {}
    values = await _attribute_values(ctx, queue, wanted)
    if queue_attributes.SHARD_COUNT in names:
        values[queue_attributes.SHARD_COUNT] = str(len(queue.shards))
    if queue_attributes.PRIORITY_LEVELS in names:
        values[queue_attributes.PRIORITY_LEVELS] = str(queue_attributes.int_value(queue.attributes,
                                                                                  queue_attributes.PRIORITY_LEVELS))
    return {"Attributes": {name: values[name] for name in sorted(wanted) if name in values}}


async def _attribute_values(ctx: RequestContext, queue: QueueRecord, wanted: set[str]) -> dict[str, str]:
    values = queue_attributes.reported(queue.attributes, fifo=is_fifo(queue.name))
    values["QueueArn"] = ctx.services.catalog.arn_of(queue)
    values["CreatedTimestamp"] = str(queue.created_at)
    values["LastModifiedTimestamp"] = str(queue.modified_at)
    if wanted & _COUNTERS.keys():
        retention = queue_attributes.int_value(queue.attributes, "MessageRetentionPeriod")

        per_shard = await ctx.services.dispatcher.on_every_shard(
            queue, lambda w, partition, queue_id: w.stats(partition, queue_id, retention_seconds=retention),
            idempotent=True,
        )
        for attribute, key in _COUNTERS.items():
            values[attribute] = str(sum(counts.get(key, 0) for counts in per_shard))
    return values
