"""The move-task runner when things go wrong: a failure nothing foresaw ends the task FAILED (so the queue takes a
new task), an outage only makes it wait, and a log that fails while the task ends leaves it to the next start."""

from __future__ import annotations

import asyncio
import logging

import pytest

from ferrymq.clock import ManualClock
from ferrymq.destinations import QueueTarget
from ferrymq.errors import InternalError, ServiceUnavailable
from ferrymq.storage import move_tasks
from ferrymq.storage.engine import Engine
from ferrymq.storage.engine.records import TASK_STATUS, Record
from ferrymq.storage.log.writer import LogFailed
from ferrymq.storage.move_tasks import INTERNAL_FAILURE, MoveTaskRunner
from tests.support.engine_requests import RECEIPT_KEY, RETENTION, bodies, plain_message

DLQ = "000000000000/work-dlq/2"
DLQ_ARN = "arn:aws:sqs:us-east-1:000000000000:work-dlq"
SRC = "000000000000/work/1"
SRC_ARN = "arn:aws:sqs:us-east-1:000000000000:work"


class Catalog:
    """Peers of partition 0 whose queue lookups answer from ``answers`` in turn (an exception is raised, a
    target returned), and then always with ``then``; with no ``then``, a lookup too many is a test failure."""

    partition = 0

    def __init__(self, *answers: BaseException | QueueTarget, then: QueueTarget | None = None) -> None:
        self.answers = list(answers)
        self.then = then
        self.lookups = 0

    async def worker(self, partition: int) -> None:
        raise AssertionError("every queue of these tests is on this worker")

    async def forget(self, partition: int) -> None:
        return None

    async def queue(self, arn: str) -> QueueTarget | None:
        self.lookups += 1
        if self.answers:
            answer = self.answers.pop(0)
        elif self.then is not None:
            answer = self.then
        else:
            answer = AssertionError("the task looked its destination up again")
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def close(self) -> None:
        return None


def dlq_with_dead_letters(engine: Engine, n: int = 2) -> None:
    engine.send(DLQ, [plain_message(f"dead {i}", system={"DeadLetterQueueSourceArn": SRC_ARN}) for i in range(n)],
                RETENTION)


def start(engine: Engine, handle: str) -> dict:
    return engine.start_move_task(
        DLQ,
        {"task_handle": handle, "source_arn": DLQ_ARN, "destination": None, "max_per_second": None,
         "started_ts": 1_700_000_000_000},
    )


async def run_to_end(runner: MoveTaskRunner, handle: str) -> None:
    """Launch the task and wait for its coroutine to return; an exception escaping it fails the test."""
    runner.launch(DLQ, handle)
    await asyncio.gather(*(asyncio.all_tasks() - {asyncio.current_task()}))


@pytest.mark.parametrize("failure", [KeyError("partition"), InternalError()], ids=["bug", "receiver-fault"])
def test_a_task_that_fails_unforeseen_ends_failed_and_the_queue_takes_a_new_task(
    failure: BaseException, caplog: pytest.LogCaptureFixture
) -> None:
    # given dead letters, a task moving them back, and a queue catalog whose lookup fails unforeseen
    engine = Engine(ManualClock(), RECEIPT_KEY)
    dlq_with_dead_letters(engine)
    start(engine, "t-1")
    runner = MoveTaskRunner(engine, Catalog(failure), ManualClock(), hold_seconds=10)
    # when the task runs
    with caplog.at_level(logging.ERROR, logger=move_tasks.__name__):
        asyncio.run(run_to_end(runner, "t-1"))
    # then it ended FAILED with an internal reason, logged once, and moved nothing
    (listed,) = engine.list_move_tasks(DLQ)
    assert (listed["status"], listed["failure_reason"], listed["moved"]) == ("FAILED", INTERNAL_FAILURE, 0)
    assert INTERNAL_FAILURE == "AWS.SimpleQueueService.InternalError"
    assert len([r for r in caplog.records if r.levelno >= logging.ERROR]) == 1
    # and the dead letters are where they were, and a new task can start
    assert sorted(bodies(engine, DLQ, visibility=0)) == ["dead 0", "dead 1"]
    assert start(engine, "t-2")["status"] == "RUNNING"


def test_an_outage_makes_the_task_wait_and_try_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # given a queue catalog that is unreachable once, then finds the source queue on this worker
    monkeypatch.setattr(move_tasks, "RETRY_SECONDS", 0.0)
    engine = Engine(ManualClock(), RECEIPT_KEY)
    dlq_with_dead_letters(engine)
    start(engine, "t-1")
    catalog = Catalog(ServiceUnavailable("catalog down"), then=QueueTarget(SRC, 0, False, RETENTION, SRC_ARN))
    runner = MoveTaskRunner(engine, catalog, ManualClock(), hold_seconds=10)
    # when the task runs
    asyncio.run(run_to_end(runner, "t-1"))
    # then it asked again after the outage and completed, and the messages are back in their source
    (listed,) = engine.list_move_tasks(DLQ)
    assert (listed["status"], listed["moved"], listed["failure_reason"]) == ("COMPLETED", 2, None)
    assert catalog.lookups >= 2
    assert sorted(bodies(engine, SRC)) == ["dead 0", "dead 1"]


def test_a_log_failing_while_the_task_ends_leaves_it_to_the_restarted_worker(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # given a task whose lookup fails unforeseen, on a worker whose log fails when the task's end is written
    def log_record(record: Record) -> None:
        if record[0] == TASK_STATUS:
            raise LogFailed("disk gone")

    engine = Engine(ManualClock(), RECEIPT_KEY, on_record=log_record)
    dlq_with_dead_letters(engine)
    start(engine, "t-1")
    runner = MoveTaskRunner(engine, Catalog(KeyError("partition")), ManualClock(), hold_seconds=10)
    # when the task runs, then it stops without raising (run_to_end would), having logged the failure once
    with caplog.at_level(logging.ERROR, logger=move_tasks.__name__):
        asyncio.run(run_to_end(runner, "t-1"))
    assert len([r for r in caplog.records if r.levelno >= logging.ERROR]) == 1
