"""DeleteQueue and the messages of the deleted queue: with its worker down, the delete succeeds and the worker
drops the messages when it sweeps its pending drops later; with its worker up, the messages go at once and no
pending drop is left behind.

The first test runs the sweeper beside an in-process :class:`~ferrymq.storage.server.StorageWorker` (a worker
process starts one once it has registered), with the real front end over tables of the test's own, so that the
partition map names no worker but the one the test put there.  The others run a worker process.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ferrymq.aws import session
from ferrymq.aws.credentials import Credential
from ferrymq.aws.queue_store import QueueRecord, QueueStore
from ferrymq.clock import SystemClock
from ferrymq.errors import QueueDoesNotExist
from ferrymq.frontend.actions.messages import send_message
from ferrymq.frontend.actions.queues import create_queue, delete_queue, get_queue_url
from ferrymq.frontend.context import RequestContext
from ferrymq.frontend.wiring import build_frontend
from ferrymq.infra import template as cfn
from ferrymq.infra.bootstrap import ensure_table, template_names
from ferrymq.rpc.client import WorkerClient
from ferrymq.settings import Settings
from ferrymq.storage.drops import PendingDropSweeper
from tests.functional.storage_workers.in_process import worker
from tests.integration.conftest import WorkerProcess
from tests.support.engine_requests import RETENTION
from tests.support.partition_items import address_item

ACCOUNT = "123456789012"
NO_MESSAGES = {"visible": 0, "in_flight": 0, "delayed": 0}


@pytest.fixture
def own_tables(aws_settings: Settings) -> Iterator[Settings]:
    """Settings naming a fresh set of FerryMQ's tables in the test endpoint, deleted afterwards."""
    settings = dataclasses.replace(aws_settings, table_prefix=f"ferrymq-drops-{uuid.uuid4().hex[:8]}-")
    dynamodb = session.client("dynamodb", settings)
    template, names = cfn.load(), template_names(settings)
    declared = cfn.resources_of_type(template, "AWS::DynamoDB::Table").values()
    tables = [cfn.resolve(t["Properties"], names) for t in declared]
    try:
        for table in tables:
            ensure_table(dynamodb, table)
        yield settings
    finally:
        for table in tables:
            with contextlib.suppress(dynamodb.exceptions.ResourceNotFoundException):
                dynamodb.delete_table(TableName=table["TableName"])


def test_a_queue_deleted_while_its_worker_is_down_is_dropped_by_the_worker_later(
    own_tables: Settings, tmp_path: Path
) -> None:
    data_dir = tmp_path / "worker"
    store = QueueStore(session.client("dynamodb", own_tables), own_tables.queues_table)
    dynamodb = session.client("dynamodb", own_tables)

    async def delete_while_the_worker_is_down() -> QueueRecord:
        frontend = build_frontend(own_tables, SystemClock())
        caller = RequestContext(frontend.services, Credential("AKIATESTDROPS", "secret", ACCOUNT, "dev"),
                                "http://127.0.0.1")
        try:
            # given a queue with two messages in the worker leading its partition (0: the only one)
            async with worker(data_dir, partition=0) as (_, client):
                table = own_tables.partitions_table
                await asyncio.to_thread(address_item, dynamodb, table, 0, "worker-in-test", client.host, client.port, 1)
                url = (await create_queue(caller, {"QueueName": "doomed"}))["QueueUrl"]
                for body in ("one", "two"):
                    await send_message(caller, {"QueueUrl": url, "MessageBody": body})
                queue = await frontend.services.catalog.get(ACCOUNT, "doomed")
            # and that worker is down now: the partition map still names it, but nothing listens there
            # when the queue is deleted
            answer = await delete_queue(caller, {"QueueUrl": url})
            # then DeleteQueue succeeds and the queue is gone for callers
            assert answer == {}
            with pytest.raises(QueueDoesNotExist):
                await get_queue_url(caller, {"QueueName": "doomed"})
            return queue
        finally:
            await frontend.services.dispatcher.close()

    queue = asyncio.run(delete_while_the_worker_is_down())
    # and a pending drop of its id waits in the partition
    assert [d.queue_id for d in store.pending_drops(queue.partition)] == [queue.queue_id]

    async def worker_starts_and_sweeps() -> tuple[int, dict, dict]:
        async with worker(data_dir, partition=0) as (server, client):
            before = await client.stats(queue.partition, queue.queue_id, retention_seconds=RETENTION)
            replica = server.replicas[queue.partition]
            assert replica.log is not None
            sweeper = PendingDropSweeper(queue.partition, store, replica.engine.drop_queue, replica.log.flush)
            carried_out = await sweeper.sweep_once()
            after = await client.stats(queue.partition, queue.queue_id, retention_seconds=RETENTION)
            return carried_out, before, after

    # when a worker starts on the partition's log again and sweeps its pending drops
    carried_out, before, after = asyncio.run(worker_starts_and_sweeps())
    # then it dropped the queue's messages, which it had recovered
    assert before["visible"] == 2
    assert carried_out == 1
    assert after == NO_MESSAGES
    # and cleared the pending drop
    assert store.pending_drops(queue.partition) == []

    async def worker_restarts() -> dict:
        async with worker(data_dir, partition=0) as (_, client):
            return await client.stats(queue.partition, queue.queue_id, retention_seconds=RETENTION)

    # and the drop is in the log: a worker recovering from it once more has none of the messages
    assert asyncio.run(worker_restarts()) == NO_MESSAGES


def test_a_queue_deleted_while_its_worker_is_up_leaves_no_pending_drop(
    aws_settings: Settings, start_worker: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    # given a worker process serving partition 0, where these settings' catalog puts every queue
    worker = start_worker(tmp_path / "worker", worker_id="worker-drops", partition=0)
    store = QueueStore(session.client("dynamodb", aws_settings), aws_settings.queues_table)
    account = "123456789013"

    async def scenario() -> tuple[QueueRecord, dict, dict, dict]:
        frontend = build_frontend(aws_settings, SystemClock())
        caller = RequestContext(frontend.services, Credential("AKIATESTDROPS", "secret", account, "dev"),
                                "http://127.0.0.1")
        client = WorkerClient(worker.host, worker.port, connect_timeout=5.0)
        try:
            # and a queue with a message in it
            url = (await create_queue(caller, {"QueueName": f"short-lived-{uuid.uuid4().hex[:8]}"}))["QueueUrl"]
            await send_message(caller, {"QueueUrl": url, "MessageBody": "hello"})
            queue = await frontend.services.catalog.get(account, url.rsplit("/", 1)[1])
            before = await client.stats(queue.partition, queue.queue_id, retention_seconds=RETENTION)
            # when the queue is deleted
            answer = await delete_queue(caller, {"QueueUrl": url})
            after = await client.stats(queue.partition, queue.queue_id, retention_seconds=RETENTION)
            return queue, answer, before, after
        finally:
            await client.close()
            await frontend.services.dispatcher.close()

    queue, answer, before, after = asyncio.run(scenario())
    # then the worker dropped the message at once
    assert answer == {}
    assert before["visible"] == 1
    assert after == NO_MESSAGES
    # and the front end cleared the pending drop, so the worker's sweep has nothing left to do for it
    assert queue.queue_id not in {d.queue_id for d in store.pending_drops(queue.partition)}


def test_a_front_end_that_still_caches_a_deleted_queue_cannot_send_to_it(
    aws_settings: Settings, start_worker: Callable[..., WorkerProcess], tmp_path: Path
) -> None:
    # given a worker process, and two front ends (as behind a load balancer) each with the queue in its cache
    worker = start_worker(tmp_path / "worker", worker_id="worker-late-send", partition=0)
    account = "123456789014"

    async def scenario() -> tuple[QueueRecord, dict]:
        first, second = build_frontend(aws_settings, SystemClock()), build_frontend(aws_settings, SystemClock())
        credential = Credential("AKIATESTLATE", "secret", account, "dev")
        a = RequestContext(first.services, credential, "http://127.0.0.1")
        b = RequestContext(second.services, credential, "http://127.0.0.1")
        client = WorkerClient(worker.host, worker.port, connect_timeout=5.0)
        try:
            url = (await create_queue(a, {"QueueName": f"late-{uuid.uuid4().hex[:8]}"}))["QueueUrl"]
            await send_message(a, {"QueueUrl": url, "MessageBody": "cached"})
            await send_message(b, {"QueueUrl": url, "MessageBody": "cached too"})
            queue = await first.services.catalog.get(account, url.rsplit("/", 1)[1])
            # when the second deletes the queue, and the first, still caching it, sends to it twice
            await delete_queue(b, {"QueueUrl": url})
            for _ in range(2):
                # then both sends are refused as SQS refuses sends to a deleted queue (the first by the
                # worker, which remembers the dropped id; the second by the catalog, read again)
                with pytest.raises(QueueDoesNotExist):
                    await send_message(a, {"QueueUrl": url, "MessageBody": "late"})
            return queue, await client.stats(queue.partition, queue.queue_id, retention_seconds=RETENTION)
        finally:
            await client.close()
            await first.services.dispatcher.close()
            await second.services.dispatcher.close()

    _, after = asyncio.run(scenario())
    # and nothing lives on under the deleted queue's id
    assert after == NO_MESSAGES
