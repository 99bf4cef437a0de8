"""FerryMQ's own queue-level actions: GetQueueStatistics and PeekMessages.

The queue's owner may call them, and another account as far as the queue's policy lets it (statistics as
``sqs:GetQueueAttributes``, a peek as ``sqs:ReceiveMessage``), exactly as the SQS actions are authorised; an
admin key may look at any account's queue. Neither changes anything: the statistics are the counts
GetQueueAttributes reports with the oldest message's age, and a peek is the storage workers' read-only PEEK,
which receives nothing and writes no record. A peek of an encrypted queue shows the bodies decrypted.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ferrymq.aws.queue_store import QueueRecord
from ferrymq.destinations import retention_seconds
from ferrymq.errors import MissingParameter
from ferrymq.frontend.context import RequestContext
from ferrymq.frontend.encryption import start_metering
from ferrymq.frontend.message_checks import optional_int
from ferrymq.frontend.queue_urls import parse_queue_url
from ferrymq.limits import MAX_PEEK_MESSAGES
from ferrymq.message_fields import sequence_number
from ferrymq.rpc.client import WorkerClient

DEFAULT_PEEK_MESSAGES = 10
_SHOWN_SYSTEM_ATTRIBUTES = ("SenderId", "AWSTraceHeader", "DeadLetterQueueSourceArn")


async def _queue(ctx: RequestContext, params: dict[str, Any], authorised_as: str) -> QueueRecord:
    """The queue named by QueueUrl, for the owner, an account the policy lets do ``authorised_as``, or an admin."""
    if not ctx.credential.admin:
        return await dataclasses.replace(ctx, action=authorised_as).queue(params)
    url = params.get("QueueUrl")
    if not url:
        raise MissingParameter("The request must contain the parameter QueueUrl.")
    address = parse_queue_url(url, ctx.account)
    return await ctx.services.catalog.get(address.account, address.name, address.region or ctx.region)


async def get_queue_statistics(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    queue = await _queue(ctx, params, "GetQueueAttributes")
    retention = retention_seconds(queue.attributes)

    async def depth(worker: WorkerClient, partition: int, queue_id: str) -> dict:
        return await worker.depth(partition, queue_id, retention_seconds=retention)

    per_shard = await ctx.services.dispatcher.on_every_shard(queue, depth, idempotent=True)
    shards = [
        {
            "Shard": index,
            "Partition": queue.shards[index].partition,
            "Visible": counts["visible"],
            "InFlight": counts["in_flight"],
            "Delayed": counts["delayed"],
            "OldestMessageAgeSeconds": _age_seconds(counts),
        }
        for index, counts in enumerate(per_shard)
    ]
    ages = [s["OldestMessageAgeSeconds"] for s in shards if s["OldestMessageAgeSeconds"] is not None]
    return {
        "QueueUrl": ctx.url_of(queue),
        "QueueArn": ctx.services.catalog.arn_of(queue),
        "Visible": sum(s["Visible"] for s in shards),
        "InFlight": sum(s["InFlight"] for s in shards),
        "Delayed": sum(s["Delayed"] for s in shards),
        "OldestMessageAgeSeconds": max(ages) if ages else None,
        "Shards": shards,
    }


def _age_seconds(counts: dict) -> int | None:
    """The oldest message's age in whole seconds; None when the shard holds no message."""
    if not counts["visible"] + counts["in_flight"] + counts["delayed"]:
        return None
    return int(counts["oldest_age_ms"]) // 1000


async def peek_messages(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    queue = await _queue(ctx, params, "ReceiveMessage")
    wanted = optional_int(params, "MaxNumberOfMessages", 1, MAX_PEEK_MESSAGES) or DEFAULT_PEEK_MESSAGES
    retention = retention_seconds(queue.attributes)

    async def peek(worker: WorkerClient, partition: int, queue_id: str) -> list[dict]:
        return await worker.peek(partition, queue_id, max_messages=wanted, retention_seconds=retention)

    per_shard = await ctx.services.dispatcher.on_every_shard(queue, peek, idempotent=True)
    found = [{**m, "shard": index} for index, messages in enumerate(per_shard) for m in messages]
    # Oldest first across the shards, as each shard gives its own.
    found.sort(key=lambda m: m["sent_ts"])
    found = found[:wanted]
    cipher = ctx.services.cipher
    if found and cipher is not None:
        start_metering()
        found = await cipher.open(queue.attributes, found)
    return {"Messages": [_shown(m) for m in found]}


def _shown(m: dict[str, Any]) -> dict[str, Any]:
    system = m.get("system") or {}
    attributes = {name: system[name] for name in _SHOWN_SYSTEM_ATTRIBUTES if isinstance(system.get(name), str)}
    return {
        "MessageId": m["id"],
        "Body": m["body"],
        "MD5OfBody": m["md5_body"],
        "MessageAttributes": m.get("attrs") or None,
        "MD5OfMessageAttributes": m.get("md5_attrs"),
        "Attributes": attributes or None,
        "SentTimestamp": m["sent_ts"],
        "ReceiveCount": m["receive_count"],
        "FirstReceiveTimestamp": m["first_receive_ts"] or None,
        "MessageGroupId": m.get("group") or system.get("MessageGroupId"),
        "MessageDeduplicationId": m.get("dedup_id"),
        "SequenceNumber": sequence_number(m["seq"]) if m.get("seq") is not None else None,
        "Shard": m["shard"],
    }
