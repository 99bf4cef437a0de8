"""Message actions: send, receive, delete and change visibility, single and batched."""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from ferrymq import ids
from ferrymq.aws.dedup_store import dedup_key
from ferrymq.aws.queue_store import QueueRecord
from ferrymq.bulkhead import off_loop
from ferrymq.destinations import is_fifo, redrive_option, retention_seconds, target_of
from ferrymq.errors import (
    BatchRequestTooLong,
    InvalidParameterValue,
    MissingParameter,
    QueueDoesNotExist,
    SqsError,
    error_for_code,
)
from ferrymq.frontend import sharded
from ferrymq.frontend.context import RequestContext
from ferrymq.frontend.encryption import start_metering
from ferrymq.frontend.message_checks import (
    check_batch_entries,
    check_body,
    check_message_attributes,
    optional_int,
    require,
)
from ferrymq.frontend.metrics.recorder import sizes_of
from ferrymq.frontend.priorities import level_of, priority_levels
from ferrymq.limits import (
    MAX_BATCH_BYTES,
    MAX_DELAY_SECONDS,
    MAX_MESSAGES_PER_RECEIVE,
    MAX_VISIBILITY_TIMEOUT_SECONDS,
    MAX_WAIT_TIME_SECONDS,
)
from ferrymq.message_fields import sequence_number
from ferrymq.message_size import message_bytes
from ferrymq.metadata import queue_attributes, redrive
from ferrymq.priorities import SYSTEM_KEY as PRIORITY_KEY
from ferrymq.protocol.md5 import md5_of_attributes, md5_of_body
from ferrymq.rpc.client import WorkerClient
from ferrymq.rpc.messages import sent_message

SYSTEM_ATTRIBUTE_NAMES = frozenset(
    {
        "SenderId",
        "SentTimestamp",
        "ApproximateReceiveCount",
        "ApproximateFirstReceiveTimestamp",
        "SequenceNumber",
        "MessageDeduplicationId",
        "MessageGroupId",
        "AWSTraceHeader",
        "DeadLetterQueueSourceArn",
    }
)
T = TypeVar("T")
# MessageGroupId, MessageDeduplicationId and ReceiveRequestAttemptId: alphanumerics and punctuation.
_FIFO_TOKEN = re.compile(r"^[!-~]{1,128}$")


def _check_token(name: str, value: Any) -> str:
    if not isinstance(value, str) or not _FIFO_TOKEN.match(value):
        raise InvalidParameterValue(
            f"Value {value} for parameter {name} is invalid. Reason: {name} can only include alphanumeric and "
            "punctuation characters. 1 to 128 in length."
        )
    return value


# --- send --------------------------------------------------------------------------------------------


class _WholeRequestError(Exception):
    """A problem with one entry of SendMessageBatch that AWS answers by failing the whole request (a FIFO entry
    without its group id, or without a deduplication id the queue cannot compute), not under ``Failed``."""

    def __init__(self, error: SqsError) -> None:
        super().__init__(error.message)
        self.error = error


_DELAY_REASON = f"DelaySeconds must be >= 0 and <= {MAX_DELAY_SECONDS}."


class _SendRules(NamedTuple):
    """What a queue's attributes and the request say of every message it sends: read once per request, not once
    per batch entry."""

    fifo: bool
    max_size: int
    levels: int
    delay: int
    content_dedup: bool
    sender: str
    """The SenderId of every message the request sends."""

    @classmethod
    def of(cls, ctx: RequestContext, queue: QueueRecord) -> _SendRules:
        attributes = queue.attributes
        return cls(
            is_fifo(queue.name),
            queue_attributes.int_value(attributes, "MaximumMessageSize"),
            priority_levels(attributes),
            queue_attributes.int_value(attributes, "DelaySeconds"),
            attributes.get("ContentBasedDeduplication") == "true",
            ctx.credential.principal_id,
        )


def _outgoing(ctx: RequestContext, rules: _SendRules, params: Mapping[str, Any]) -> tuple[dict[str, Any], dict]:
    """Check one message to send; returns the worker's message dict and the client's result entry."""
    body = check_body(params.get("MessageBody"))
    # The optional parts are looked at only when present: most messages have none, and each check is a call.
    attributes = check_message_attributes(params.get("MessageAttributes")) if "MessageAttributes" in params else {}
    level = level_of(attributes, rules.levels) if attributes else 0
    system_attributes = (_check_system_attributes(params.get("MessageSystemAttributes"))
                         if "MessageSystemAttributes" in params else {})
    max_size = rules.max_size
    if message_bytes(body, attributes) > max_size:
        raise InvalidParameterValue(
            f"One or more parameters are invalid. Reason: Message must be shorter than {max_size} bytes."
        )
    delay = (optional_int(params, "DelaySeconds", 0, MAX_DELAY_SECONDS, _DELAY_REASON)
             if "DelaySeconds" in params else None)
    fifo = rules.fifo
    # AWS takes DelaySeconds=0 on a FIFO queue (SDK wrappers always send it) and applies the queue's delay.
    if fifo and delay:
        raise InvalidParameterValue(
            f"Value {delay} for parameter DelaySeconds is invalid. Reason: The request include parameter that is "
            "not valid for this queue type."
        )
    if delay is None or fifo:
        delay = rules.delay
    system: dict[str, Any] = {"SenderId": rules.sender}
    if level:
        system[PRIORITY_KEY] = level
    if "AWSTraceHeader" in system_attributes:
        system["AWSTraceHeader"] = system_attributes["AWSTraceHeader"]["StringValue"]
    elif ctx.trace_header:
        system["AWSTraceHeader"] = ctx.trace_header
    group = params.get("MessageGroupId")
    dedup_id = params.get("MessageDeduplicationId")
    if fifo:
        if group is None:
            raise _WholeRequestError(MissingParameter("The request must contain the parameter MessageGroupId."))
        _check_token("MessageGroupId", group)
        if dedup_id is None:
            if not rules.content_dedup:
                raise _WholeRequestError(InvalidParameterValue(
                    "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId "
                    "provided explicitly"
                ))
            dedup_id = hashlib.sha256(body.encode()).hexdigest()
        _check_token("MessageDeduplicationId", dedup_id)
    else:
        if dedup_id is not None:
            raise InvalidParameterValue(
                f"Value {dedup_id} for parameter MessageDeduplicationId is invalid. Reason: The request include "
                "parameter that is not valid for this queue type."
            )
        if group is not None:
            # Standard queues take a group id for fair queueing; it is kept and returned, nothing more.
            system["MessageGroupId"] = _check_token("MessageGroupId", group)
    md5_body = md5_of_body(body)
    md5_attrs = md5_of_attributes(attributes) if attributes else None
    message = sent_message(
        ids.uuid4(),
        body,
        attributes,
        md5_body,
        md5_attrs,
        system,
        delay=delay,
        group=group if fifo else None,
        dedup_id=dedup_id if fifo else None,
    )
    result: dict[str, Any] = {"MessageId": message["id"], "MD5OfMessageBody": md5_body}
    if md5_attrs is not None:
        result["MD5OfMessageAttributes"] = md5_attrs
    if system_attributes:
        result["MD5OfMessageSystemAttributes"] = md5_of_attributes(system_attributes)
    return message, result


def _check_system_attributes(value: Any) -> dict[str, dict[str, Any]]:
    if not value:
        return {}
    if not isinstance(value, Mapping) or set(value) - {"AWSTraceHeader"}:
        raise InvalidParameterValue("Message system attribute name is invalid. Only AWSTraceHeader is supported.")
    trace = value["AWSTraceHeader"]
    if not isinstance(trace, Mapping) or trace.get("DataType") != "String" or not trace.get("StringValue"):
        raise InvalidParameterValue("Message system attribute 'AWSTraceHeader' must be of type 'String'.")
    return {"AWSTraceHeader": {"DataType": "String", "StringValue": trace["StringValue"]}}


async def _send(ctx: RequestContext, queue: QueueRecord, messages: list[dict[str, Any]],
                results: list[dict[str, Any]]) -> None:
    """Store ``messages``; on FIFO queues first settle deduplication and fill in MessageId/SequenceNumber."""
    fifo = is_fifo(queue.name)
    metrics = ctx.services.metrics
    # Measured before sealing: what counts is the size the client sent.
    sizes = sizes_of(messages) if metrics is not None else []
    if fifo:
        await _claim_dedup_ids(ctx, queue, messages)
    cipher = ctx.services.cipher
    if cipher is not None:
        # After the claims: the envelope binds the id the message is stored under.
        start_metering()
        await cipher.seal(ctx.services.catalog.arn_of(queue), queue.attributes, messages)
    retention = retention_seconds(queue.attributes)

    async def to_shard(index: int, positions: list[int]) -> None:
        batch = [messages[p] for p in positions]

        # Each returns the worker's coroutine for the dispatcher to await: no coroutine level of its own.
        def op(worker: WorkerClient, partition: int, queue_id: str) -> Awaitable[list[dict]]:
            return worker.send(partition, queue_id, batch, retention_seconds=retention, fifo=fifo)

        def resend(worker: WorkerClient, partition: int, queue_id: str) -> Awaitable[list[dict]]:
            # The same message ids: what the first attempt stored is not stored twice.
            return worker.send(partition, queue_id, batch, retention_seconds=retention, fifo=fifo, resend=True)

        # FIFO sends are idempotent by message id at the worker; standard ones when resent as such.
        stored = await ctx.services.dispatcher.on_shard(queue, index, op, idempotent=fifo, resend=resend)
        if fifo:
            for position, outcome in zip(positions, stored, strict=True):
                results[position]["MessageId"] = messages[position]["id"]
                results[position]["SequenceNumber"] = sequence_number(outcome["seq"])

    groups = sharded.send_groups(queue, messages)
    if len(groups) == 1:
        await to_shard(*next(iter(groups.items())))
    else:
        await asyncio.gather(*(to_shard(index, positions) for index, positions in groups.items()))
    if metrics is not None:
        metrics.sent(queue, sizes)


async def _claim_dedup_ids(ctx: RequestContext, queue: QueueRecord, messages: list[dict[str, Any]]) -> None:
    """Give each message the id of whichever message first used its deduplication id within the window.

    A duplicate thus carries the original's id, and the worker, storing each id once, drops it; a retry of a
    send whose claim was written but which never reached the worker is stored under the claimed id.  Ids
    claimed before the queue's last purge are forgotten.  The key is the queue's current DeduplicationScope's:
    a change of scope applies to the next send, as AWS applies it (switching high throughput on, an id used in
    another group before the change is no duplicate).
    """
    now = ctx.services.clock.now()
    per_group = queue_attributes.dedup_scope(queue.attributes) == "messageGroup"
    dedup = ctx.services.dedup

    def settle(message: dict[str, Any]) -> str:
        key = dedup_key(queue.queue_id, message["group"] if per_group else None, message["dedup_id"])
        return dedup.claim(key, message["id"], now, purged_at=queue.purged_at)

    owners = await asyncio.gather(*(off_loop(ctx.services.metadata, settle, m) for m in messages))
    for message, owner in zip(messages, owners, strict=True):
        message["id"] = owner


async def send_message(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    queue = await ctx.queue(params)
    try:
        message, result = _outgoing(ctx, _SendRules.of(ctx, queue), params)
    except _WholeRequestError as whole:
        raise whole.error from None
    await _send(ctx, queue, [message], [result])
    return result


async def send_message_batch(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    queue = await ctx.queue(params)
    entries = check_batch_entries(params.get("Entries"), "SendMessageBatchRequestEntry")
    total = sum(message_bytes(e.get("MessageBody"), e.get("MessageAttributes")) for e in entries)
    if total > MAX_BATCH_BYTES:
        raise BatchRequestTooLong(
            f"Batch requests cannot be longer than {MAX_BATCH_BYTES} bytes. You have sent {total} bytes."
        )
    successful: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    rules = _SendRules.of(ctx, queue)
    for entry in entries:
        try:
            message, result = _outgoing(ctx, rules, entry)
        except _WholeRequestError as whole:
            if isinstance(whole.error, MissingParameter):
                # AWS words a batch entry's missing group id as SendMessage does, under another code.
                raise InvalidParameterValue(whole.error.message) from None
            raise whole.error from None
        except SqsError as exc:
            failed.append(_failure(entry["Id"], exc))
            continue
        messages.append(message)
        successful.append({"Id": entry["Id"], **result})
    if messages:
        await _send(ctx, queue, messages, successful)
    return {"Successful": successful, "Failed": failed}


def _failure(entry_id: str, exc: SqsError) -> dict[str, Any]:
    return {"Id": entry_id, "SenderFault": exc.sender, "Code": exc.query_code, "Message": exc.message}


# --- receive -----------------------------------------------------------------------------------------


async def receive_message(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    queue = await ctx.queue(params)
    max_messages = optional_int(params, "MaxNumberOfMessages", 1, MAX_MESSAGES_PER_RECEIVE) or 1
    # AWS words these two ranges differently from MaxNumberOfMessages' "between".
    visibility = optional_int(params, "VisibilityTimeout", 0, MAX_VISIBILITY_TIMEOUT_SECONDS,
                              f"Must be >= 0 and <= {MAX_VISIBILITY_TIMEOUT_SECONDS}, if provided.")
    if visibility is None:
        visibility = queue_attributes.int_value(queue.attributes, "VisibilityTimeout")
    wait = optional_int(params, "WaitTimeSeconds", 0, MAX_WAIT_TIME_SECONDS,
                        f"Must be >= 0 and <= {MAX_WAIT_TIME_SECONDS}, if provided.")
    if wait is None:
        wait = queue_attributes.int_value(queue.attributes, "ReceiveMessageWaitTimeSeconds")
    system_names = _requested_system_attributes(params)
    attribute_filter = _attribute_filter(params.get("MessageAttributeNames") or [])
    retention = retention_seconds(queue.attributes)
    fifo = is_fifo(queue.name)
    attempt = params.get("ReceiveRequestAttemptId")
    attempt_id = _check_token("ReceiveRequestAttemptId", attempt) if fifo and attempt is not None else None
    redrive = await _redrive(ctx, queue)
    settings = ctx.services.settings
    levels = priority_levels(queue.attributes)

    async def on_shard(index: int, wanted: int, wait_seconds: float) -> list[dict]:
        async def op(worker: WorkerClient, partition: int, queue_id: str) -> list[dict]:
            return await worker.receive(
                partition,
                queue_id,
                max_messages=wanted,
                visibility_timeout=visibility,
                wait_seconds=wait_seconds,
                retention_seconds=retention,
                fifo=fifo,
                attempt_id=attempt_id,
                redrive=redrive,
                max_in_flight=settings.max_in_flight_fifo if fifo else settings.max_in_flight_standard,
                priority_levels=levels,
            )

        return await ctx.services.dispatcher.on_shard(queue, index, op, idempotent=False)

    if len(queue.shards) == 1:
        received = await on_shard(0, max_messages, float(wait))
    else:
        received = await sharded.gather(queue, on_shard, max_messages=max_messages, wait_seconds=float(wait),
                                        clock=ctx.services.clock, attempt_id=attempt_id)
    if ctx.services.metrics is not None:
        ctx.services.metrics.received(queue, len(received))
    cipher = ctx.services.cipher
    if received and cipher is not None:
        start_metering()
        received = await cipher.open(queue.attributes, received)
    if not received:
        return {}
    return {"Messages": [_rendered(m, system_names, attribute_filter) for m in received]}


async def _redrive(ctx: RequestContext, queue: QueueRecord) -> dict[str, Any] | None:
    """Where messages received too often go, from the queue's RedrivePolicy; None without a live DLQ."""
    policy = redrive.stored_redrive_policy(queue.attributes)
    if policy is None:
        return None
    catalog = ctx.services.catalog
    try:
        dlq = await catalog.get(policy.target.account, policy.target.name, policy.target.region)
    except QueueDoesNotExist:
        return None
    return redrive_option(
        target_of(dlq, catalog.arn_of(dlq)),
        max_receive_count=policy.max_receive_count,
        source_arn=catalog.arn_of(queue),
    )


def _requested_system_attributes(params: Mapping[str, Any]) -> frozenset[str]:
    names = set(params.get("AttributeNames") or []) | set(params.get("MessageSystemAttributeNames") or [])
    if "All" in names:
        return SYSTEM_ATTRIBUTE_NAMES
    # Queue attribute names are accepted here by SQS and simply return nothing for a message.
    return frozenset(names & SYSTEM_ATTRIBUTE_NAMES)


class _AttributeFilter:
    def __init__(self, exact: frozenset[str], prefixes: tuple[str, ...], everything: bool) -> None:
        self.exact = exact
        self.prefixes = prefixes
        self.everything = everything

    def __call__(self, name: str) -> bool:
        return self.everything or name in self.exact or name.startswith(self.prefixes)


def _attribute_filter(names: list[str]) -> _AttributeFilter:
    """AWS's reading of MessageAttributeNames: ``All``, ``.*`` and ``*`` are every attribute, ``Hel.*`` every
    attribute whose name starts with ``Hel`` (``Hello`` and ``Help.Me`` alike), anything else one name."""
    everything = any(n in ("All", ".*", "*") for n in names)
    prefixes = tuple(n[:-2] for n in names if n.endswith(".*") and n != ".*")
    return _AttributeFilter(frozenset(names), prefixes, everything)


def _rendered(message: Mapping[str, Any], system_names: frozenset[str], wanted: _AttributeFilter) -> dict[str, Any]:
    out: dict[str, Any] = {
        "MessageId": message["id"],
        "ReceiptHandle": message["receipt"],
        "MD5OfBody": message["md5_body"],
        "Body": message["body"],
    }
    if system_names:
        system = message.get("system") or {}
        available = {
            "SenderId": system.get("SenderId"),
            "SentTimestamp": str(message["sent_ts"]),
            "ApproximateReceiveCount": str(message["receive_count"]),
            "ApproximateFirstReceiveTimestamp": str(message["first_receive_ts"]),
            "AWSTraceHeader": system.get("AWSTraceHeader"),
            "MessageGroupId": message.get("group") or system.get("MessageGroupId"),
            "MessageDeduplicationId": message.get("dedup_id"),
            "SequenceNumber": sequence_number(message["seq"]) if message.get("seq") is not None else None,
            "DeadLetterQueueSourceArn": system.get("DeadLetterQueueSourceArn"),
        }
        attributes = {k: v for k, v in available.items() if k in system_names and v is not None}
        if attributes:
            out["Attributes"] = attributes
    all_attributes: dict[str, Any] = message.get("attrs") or {}
    if all_attributes:
        chosen = {k: v for k, v in all_attributes.items() if wanted(k)}
        if chosen:
            out["MD5OfMessageAttributes"] = (
                message["md5_attrs"] if len(chosen) == len(all_attributes) else md5_of_attributes(chosen)
            )
            out["MessageAttributes"] = chosen
    return out


# --- delete and visibility -----------------------------------------------------------------------------


def _raise_entry_error(outcome: tuple[str, str] | None) -> None:
    if outcome is not None:
        code, message = outcome
        raise error_for_code(code)(message)


async def _deleted(ctx: RequestContext, queue: QueueRecord, receipts: list[str]) -> list[sharded.Outcome]:
    async def call(index: int, handles: list[str]) -> list[sharded.Outcome]:
        inner = [sharded.worker_handle(queue, h) for h in handles]
        return await ctx.services.dispatcher.on_shard(
            queue, index, lambda w, partition, queue_id: w.delete(partition, queue_id, inner), idempotent=True
        )

    outcomes = await sharded.per_shard(queue, receipts, lambda h: h, call)
    if ctx.services.metrics is not None:
        ctx.services.metrics.deleted(queue, outcomes.count(None))
    return outcomes


async def delete_message(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    queue = await ctx.queue(params)
    receipt = require(params, "ReceiptHandle")
    outcomes = await _deleted(ctx, queue, [receipt])
    _raise_entry_error(outcomes[0])
    return {}


async def delete_message_batch(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    queue = await ctx.queue(params)
    entries = check_batch_entries(params.get("Entries"), "DeleteMessageBatchRequestEntry")
    pending, receipts, failed = _checked_entries(entries, lambda e: require(e, "ReceiptHandle"))
    outcomes = await _deleted(ctx, queue, receipts) if receipts else []
    return _batch_result(pending, outcomes, failed)


def _visibility_timeout(params: Mapping[str, Any]) -> int:
    require(params, "VisibilityTimeout")
    timeout = optional_int(params, "VisibilityTimeout", 0, MAX_VISIBILITY_TIMEOUT_SECONDS)
    assert timeout is not None
    return timeout


async def _visibility_changed(
    ctx: RequestContext, queue: QueueRecord, changes: list[tuple[str, int]]
) -> list[sharded.Outcome]:
    async def call(index: int, entries: list[tuple[str, int]]) -> list[sharded.Outcome]:
        inner = [(sharded.worker_handle(queue, h), timeout) for h, timeout in entries]
        return await ctx.services.dispatcher.on_shard(
            queue, index, lambda w, partition, queue_id: w.change_visibility(partition, queue_id, inner),
            idempotent=True,
        )

    return await sharded.per_shard(queue, changes, lambda change: change[0], call)


async def change_message_visibility(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    queue = await ctx.queue(params)
    receipt = require(params, "ReceiptHandle")
    timeout = _visibility_timeout(params)
    outcomes = await _visibility_changed(ctx, queue, [(receipt, timeout)])
    _raise_entry_error(outcomes[0])
    return {}


async def change_message_visibility_batch(ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
    queue = await ctx.queue(params)
    entries = check_batch_entries(params.get("Entries"), "ChangeMessageVisibilityBatchRequestEntry")
    pending, changes, failed = _checked_entries(
        entries, lambda e: (require(e, "ReceiptHandle"), _visibility_timeout(e))
    )
    outcomes = await _visibility_changed(ctx, queue, changes) if changes else []
    return _batch_result(pending, outcomes, failed)


def _checked_entries(
    entries: Sequence[Mapping[str, Any]], check: Callable[[Mapping[str, Any]], T]
) -> tuple[list[Mapping[str, Any]], list[T], list[dict[str, Any]]]:
    """Split batch entries by ``check``: the passing entries, what ``check`` made of each, and the failures."""
    pending: list[Mapping[str, Any]] = []
    values: list[T] = []
    failed: list[dict[str, Any]] = []
    for entry in entries:
        try:
            values.append(check(entry))
        except SqsError as exc:
            failed.append(_failure(entry["Id"], exc))
            continue
        pending.append(entry)
    return pending, values, failed


def _batch_result(
    entries: list[Mapping[str, Any]], outcomes: list[tuple[str, str] | None], failed: list[dict[str, Any]]
) -> dict[str, Any]:
    successful: list[dict[str, Any]] = []
    for entry, outcome in zip(entries, outcomes, strict=True):
        if outcome is None:
            successful.append({"Id": entry["Id"]})
        else:
            code, message = outcome
            failed.append(_failure(entry["Id"], error_for_code(code)(message)))
    return {"Successful": successful, "Failed": failed}
