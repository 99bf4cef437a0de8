"""Message move tasks: moving messages out of a dead-letter queue, back to their sources or elsewhere.

A task runs on the storage worker that holds the dead-letter queue, which keeps it in its log so it survives
restarts. The task handle names the source queue, so a later cancel finds that worker again.
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from collections.abc import Awaitable
from typing import Any

from ferrymq.arn import parse_queue_arn
from ferrymq.aws.queue_store import QueueRecord
from ferrymq.destinations import target_of
from ferrymq.errors import AccessDenied, InvalidParameterValue, QueueDoesNotExist, ResourceNotFound
from ferrymq.frontend.context import RequestContext
from ferrymq.frontend.message_checks import optional_int, require
from ferrymq.frontend.queue_urls import split_queue_arn
from ferrymq.limits import MAX_LISTED_MOVE_TASKS, MAX_MOVE_TASK_MESSAGES_PER_SECOND
from ferrymq.protocol.decoding import DocumentError, decode_base64, load_document


def _task_handle(task_id: str, source_arn: str) -> str:
    document = json.dumps({"taskId": task_id, "sourceArn": source_arn}, separators=(",", ":"))
    return base64.b64encode(document.encode()).decode()


# A handle we issue is about 200 characters; anything much longer is not one of ours.
_MAX_TASK_HANDLE_LENGTH = 2_048


def _read_task_handle(handle: str) -> tuple[str, str]:
    invalid = InvalidParameterValue("Value for parameter TaskHandle is invalid.")
    if len(handle) > _MAX_TASK_HANDLE_LENGTH:
        raise invalid
    decoded = decode_base64(handle)
    if decoded is None:
        raise invalid
    try:
        document = load_document(decoded)
    except DocumentError:
        raise invalid from None
    if not isinstance(document, dict):
        raise invalid
    task_id, source_arn = document.get("taskId"), document.get("sourceArn")
    if not isinstance(task_id, str) or not isinstance(source_arn, str):
        raise invalid
    return task_id, source_arn


def _not_found(parameter: str) -> ResourceNotFound:
    return ResourceNotFound(f"The resource that you specified for the {parameter} parameter doesn't exist.")


def _region_of_arn(arn: str) -> str | None:
    parsed = parse_queue_arn(arn)
    return parsed.region if parsed is not None else None


async def _queue_by_arn(ctx: RequestContext, arn: str, parameter: str) -> QueueRecord:
    account, name = split_queue_arn(arn)
    if account != ctx.account:
        raise _not_found(parameter)
    try:
        queue = await ctx.services.catalog.get(account, name, _region_of_arn(arn))
    except QueueDoesNotExist:
        raise _not_found(parameter) from None
    # An explicit Deny in the queue's own policy binds its owner here too, as for every queue action.
    if not ctx.permitted(queue):
        raise AccessDenied(f"Access to the resource {arn} is denied.")
    return queue


async def start_message_move_task(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    source_arn = require(params, "SourceArn")
    source = await _queue_by_arn(ctx, source_arn, "SourceArn")
    if not await ctx.services.catalog.dead_letter_sources(source.account, source.name, 1, None, source.region):
        raise InvalidParameterValue("Source queue must be configured as a Dead Letter Queue.")
    destination = None
    if params.get("DestinationArn"):
        queue = await _queue_by_arn(ctx, params["DestinationArn"], "DestinationArn")
        destination = target_of(queue, ctx.services.catalog.arn_of(queue)).as_wire()
    rate = optional_int(params, "MaxNumberOfMessagesPerSecond", 1, MAX_MOVE_TASK_MESSAGES_PER_SECOND)
    task_id = str(uuid.uuid4())
    handle = _task_handle(task_id, source_arn)
    task = {
        "task_handle": handle,
        "source_arn": source_arn,
        "destination": destination,
        "max_per_second": rate,
        "started_ts": int(ctx.services.clock.now() * 1000),
    }

    def on(index: int) -> Awaitable[dict]:
        return ctx.services.dispatcher.on_shard(
            source, index, lambda w, partition, queue_id: w.start_move_task(partition, queue_id, task),
            idempotent=False,
        )

    # A sharded source runs one task per shard under the one handle. The first shard's worker refuses a second
    # task while one runs, before any other shard starts.
    await on(0)
    await asyncio.gather(*(on(index) for index in range(1, len(source.shards))))
    return {"TaskHandle": handle}


async def list_message_move_tasks(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    source_arn = require(params, "SourceArn")
    limit = optional_int(params, "MaxResults", 1, MAX_LISTED_MOVE_TASKS) or 1
    source = await _queue_by_arn(ctx, source_arn, "SourceArn")
    per_shard = await ctx.services.dispatcher.on_every_shard(
        source, lambda w, partition, queue_id: w.list_move_tasks(partition, queue_id), idempotent=True
    )
    return {"Results": [_rendered(task) for task in _merged(per_shard)[:limit]]}


_STATUS_RANK = {"RUNNING": 0, "FAILED": 1, "CANCELLING": 2, "CANCELLED": 3, "COMPLETED": 4}


def _merged(per_shard: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One task per handle over a sharded source's shards, newest first: counts summed, the status the most
    telling of the shards' (running while any runs, failed if any failed)."""
    if len(per_shard) == 1:
        return per_shard[0]
    tasks: dict[str, dict[str, Any]] = {}
    for listed in per_shard:
        for task in listed:
            seen = tasks.get(task["task_handle"])
            if seen is None:
                tasks[task["task_handle"]] = dict(task)
                continue
            seen["moved"] += task["moved"]
            seen["to_move"] += task["to_move"]
            if _STATUS_RANK.get(task["status"], 9) < _STATUS_RANK.get(seen["status"], 9):
                seen["status"], seen["failure_reason"] = task["status"], task.get("failure_reason")
    return sorted(tasks.values(), key=lambda t: t["started_ts"], reverse=True)


def _rendered(task: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "Status": task["status"],
        "SourceArn": task["source_arn"],
        "ApproximateNumberOfMessagesMoved": task["moved"],
        "ApproximateNumberOfMessagesToMove": task["to_move"],
        "StartedTimestamp": task["started_ts"],
    }
    if task["status"] == "RUNNING":
        out["TaskHandle"] = task["task_handle"]
    if task.get("destination_arn"):
        out["DestinationArn"] = task["destination_arn"]
    if task.get("max_per_second"):
        out["MaxNumberOfMessagesPerSecond"] = task["max_per_second"]
    if task.get("failure_reason"):
        out["FailureReason"] = task["failure_reason"]
    return out


async def cancel_message_move_task(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    handle = require(params, "TaskHandle")
    _, source_arn = _read_task_handle(handle)
    account, name = split_queue_arn(source_arn)
    try:
        if account != ctx.account:
            raise QueueDoesNotExist()
        source = await ctx.services.catalog.get(account, name, _region_of_arn(source_arn))
    except QueueDoesNotExist:
        raise _not_found("SourceArn") from None
    answers = await asyncio.gather(
        *(
            ctx.services.dispatcher.on_shard(
                source, index, lambda w, partition, queue_id: w.cancel_move_task(partition, queue_id, handle),
                idempotent=True,
            )
            for index in range(len(source.shards))
        ),
        return_exceptions=True,
    )
    cancelled = [a for a in answers if not isinstance(a, BaseException)]
    if not cancelled:
        # Not running on any shard: the first shard's refusal is the answer.
        raise answers[0]
    # A shard whose part of the task had already finished refuses; the rest were cancelled.
    return {"ApproximateNumberOfMessagesMoved": sum(c["moved"] for c in cancelled)}
