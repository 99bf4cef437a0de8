"""Requests on a queue spread over several partitions (``FerryMQShardCount``, ``docs/design/sharded-queues.md``).

A standard queue's sends go to a shard chosen at random per request (stateless front-end functions keep no
round-robin counter; over many requests it spreads the same) and its receives gather from every shard. A
FIFO queue hashes each message group to one shard, so a group's order is exactly that of one partition.

Receipt handles of a sharded queue name their shard: ``s<index>.<worker handle>``. ``.`` is not in the
workers' base64url alphabet, so a handle without a prefix is shard 0's: handles issued before a queue grew
stay valid. A queue of one shard hands out and takes the workers' handles unchanged.

Calls name a shard by its index: its partition is ``queue.shards[index].partition`` and its messages are kept
under ``queue.storage_id(index)``.
"""

from __future__ import annotations

import asyncio
import random
import zlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from ferrymq.aws.queue_store import QueueRecord
from ferrymq.clock import Clock
from ferrymq.errors import ReceiptHandleIsInvalid

T = TypeVar("T")

LONG_POLL_SLICE_SECONDS = 0.5
"""How long a gathering receive long-polls one shard before it looks at all of them again: the most a
message that arrives on another shard waits beyond its arrival."""

Outcome = tuple[str, str] | None
"""A batch entry's outcome from a worker: None for success, else (error code, message)."""


def shard_of_group(queue: QueueRecord, group: str) -> int:
    return zlib.crc32(group.encode()) % len(queue.shards)


def send_groups(queue: QueueRecord, messages: Sequence[dict[str, Any]]) -> dict[int, list[int]]:
    """The positions of ``messages`` to send to each shard index: one random shard for a standard queue's
    request, each FIFO message's group's shard."""
    count = len(queue.shards)
    if count == 1:
        return {0: list(range(len(messages)))}
    if not messages or messages[0].get("group") is None:
        return {random.randrange(count): list(range(len(messages)))}
    groups: dict[int, list[int]] = {}
    for position, message in enumerate(messages):
        groups.setdefault(shard_of_group(queue, message["group"]), []).append(position)
    return groups


def tag_handle(queue: QueueRecord, index: int, handle: str) -> str:
    return handle if len(queue.shards) == 1 else f"s{index}.{handle}"


def split_handle(queue: QueueRecord, handle: str) -> tuple[int, str]:
    """The shard index a client's receipt handle belongs to and the worker's handle; ReceiptHandleIsInvalid
    when its prefix names no shard of the queue."""
    if len(queue.shards) == 1 or "." not in handle:
        return 0, handle
    prefix, _, inner = handle.partition(".")
    digits = prefix[1:]
    if prefix[:1] != "s" or not digits.isascii() or not digits.isdigit() or int(digits) >= len(queue.shards):
        raise ReceiptHandleIsInvalid.naming(handle)
    return int(digits), inner


async def per_shard(
    queue: QueueRecord,
    items: Sequence[T],
    handle_of: Callable[[T], str],
    call: Callable[[int, list[T]], Awaitable[list[Outcome]]],
) -> list[Outcome]:
    """Run a batch of receipt-handle entries (deletes, visibility changes) as one ``call(index, entries)`` per
    shard, concurrently; the outcomes in the entries' order. An entry whose handle names no shard fails as
    ReceiptHandleIsInvalid. ``call`` gets the clients' handles: :func:`worker_handle` takes the prefix off."""
    if len(queue.shards) == 1:
        return await call(0, list(items))
    outcomes: list[Outcome] = [None] * len(items)
    groups: dict[int, list[tuple[int, T]]] = {}
    for position, item in enumerate(items):
        try:
            index, _ = split_handle(queue, handle_of(item))
        except ReceiptHandleIsInvalid as exc:
            outcomes[position] = (exc.code, exc.message)
            continue
        groups.setdefault(index, []).append((position, item))

    async def run(index: int, entries: list[tuple[int, T]]) -> None:
        answers = await call(index, [item for _, item in entries])
        for (position, _), answer in zip(entries, answers, strict=True):
            outcomes[position] = answer

    await asyncio.gather(*(run(index, entries) for index, entries in groups.items()))
    return outcomes


def worker_handle(queue: QueueRecord, handle: str) -> str:
    """The worker's handle inside a client's (valid or not: a bad prefix is checked by :func:`per_shard`)."""
    try:
        return split_handle(queue, handle)[1]
    except ReceiptHandleIsInvalid:
        return handle


async def gather(
    queue: QueueRecord,
    receive: Callable[[int, int, float], Awaitable[list[dict[str, Any]]]],
    *,
    max_messages: int,
    wait_seconds: float,
    clock: Clock,
    attempt_id: str | None = None,
) -> list[dict[str, Any]]:
    """Receive up to ``max_messages`` from the shards of ``queue``, with ``receive(index, n, wait)``.

    Each round asks every shard in turn (from a rotating start, so none starves) for what is still wanted,
    without waiting; when a round found nothing and the wait is not over, one shard (the next in turn) is
    long-polled for at most LONG_POLL_SLICE_SECONDS. Every call is a real receive, so nothing is ever
    received and then dropped: a shard that fails does not fail the messages other shards already handed
    over (they are in flight and only this answer carries their handles), so the round goes on and answers
    with what it has, as SQS answers with fewer messages than asked; the failure is raised only when no
    shard gave anything. A FIFO receive with a ReceiveRequestAttemptId starts at a shard its id hashes
    to, so a retried attempt asks the shards in the same order. Receipt handles come back tagged.
    """
    count = len(queue.shards)
    start = zlib.crc32(attempt_id.encode()) % count if attempt_id else random.randrange(count)
    deadline = clock.monotonic() + wait_seconds
    turn = 0
    while True:
        got: list[dict[str, Any]] = []
        failure: Exception | None = None
        for step in range(count):
            index = (start + step) % count
            try:
                answer = await receive(index, max_messages - len(got), 0.0)
            except Exception as exc:  # any shard's failure: raised below only if no shard answered
                failure = failure or exc
                continue
            for message in answer:
                message["receipt"] = tag_handle(queue, index, message["receipt"])
                got.append(message)
            if len(got) >= max_messages:
                break
        if got:
            return got
        if failure is not None:
            raise failure
        left = deadline - clock.monotonic()
        if left <= 0:
            return got
        index = (start + turn) % count
        turn += 1
        polled = await receive(index, max_messages, min(LONG_POLL_SLICE_SECONDS, left))
        if polled:
            for message in polled:
                message["receipt"] = tag_handle(queue, index, message["receipt"])
            return polled
