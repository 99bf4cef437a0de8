"""The consumer helper (ferrymq.consumer) against a running stack: concurrency and batched deletes, visibility
extension for slow handlers, failures left to the redrive policy, FIFO group order, and a graceful stop on
SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from botocore.exceptions import ClientError

import ferrymq
from ferrymq.consumer import Consumer, ConsumerError, ConsumerStats
from tests.e2e.conftest import Stack, new_queue
from tests.support.processes import terminate_group

# Every test stops its consumer itself; this only bounds a test that went wrong.
SAFETY_SECONDS = 30.0




def _arn(sqs: Any, url: str) -> str:
    return str(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"])


def _send(sqs: Any, url: str, bodies: list[str], **fields: Any) -> None:
    for start in range(0, len(bodies), 10):
        entries = [{"Id": str(i), "MessageBody": b, **fields} for i, b in enumerate(bodies[start:start + 10])]
        assert not sqs.send_message_batch(QueueUrl=url, Entries=entries).get("Failed")


def _counts(sqs: Any, url: str) -> tuple[int, int]:
    attributes = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]), int(attributes["ApproximateNumberOfMessagesNotVisible"])


def _record_calls(sqs: Any, operation: str) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    sqs.meta.events.register(f"provide-client-params.sqs.{operation}",
                             lambda params, **_: calls.append(params))
    return calls


@contextmanager
def _running(consumer: Consumer) -> Iterator[list[ConsumerStats]]:
    """``consumer.run()`` on a thread of its own, stopped and joined on leaving the block."""
    result: list[ConsumerStats] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            result.append(consumer.run())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield result
    finally:
        consumer.stop()
        thread.join(SAFETY_SECONDS)
    assert not thread.is_alive(), "the consumer did not stop"
    if errors:
        raise errors[0]


def _wait_until(condition: Callable[[], bool], timeout: float = SAFETY_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def test_every_message_is_handled_within_the_concurrency_limit_and_deleted_in_batches(sqs: Any) -> None:
    # given 30 messages
    url = new_queue(sqs, "sdk-consume")
    bodies = [f"job-{i}" for i in range(30)]
    _send(sqs, url, bodies)
    deletes = _record_calls(sqs, "DeleteMessageBatch")
    seen: list[str] = []
    active = [0, 0]  # now, most at once
    lock = threading.Lock()

    def handler(message: dict[str, Any]) -> None:
        with lock:
            active[0] += 1
            active[1] = max(active)
        time.sleep(0.05)
        with lock:
            active[0] -= 1
            seen.append(message["Body"])
            if len(seen) == len(bodies):
                consumer.stop()

    # when a consumer with four handler threads runs on the main thread until its handler stops it
    consumer = Consumer(url, handler, client=sqs, concurrency=4, wait_time_seconds=1)
    timer = threading.Timer(SAFETY_SECONDS, consumer.stop)
    timer.start()
    try:
        stats = consumer.run()
    finally:
        timer.cancel()
    # then each was handled once, never more than four at a time, and all were deleted in batches
    assert sorted(seen) == sorted(bodies)
    assert 2 <= active[1] <= 4
    assert stats.succeeded == stats.deleted == 30 and stats.failed == 0
    assert sum(len(call["Entries"]) for call in deletes) == 30
    assert len(deletes) < 30
    assert _counts(sqs, url) == (0, 0)


def test_a_handler_slower_than_the_visibility_timeout_keeps_its_message_hidden(sdk: Any, stack: Stack) -> None:
    # given a queue with a 2 s visibility timeout and a handler that takes 5 s
    url = new_queue(sdk, "sdk-slow", VisibilityTimeout="2")
    _send(sdk, url, ["slow"])
    extensions = _record_calls(sdk, "ChangeMessageVisibilityBatch")
    handled: list[str] = []
    started, done = threading.Event(), threading.Event()

    def handler(message: dict[str, Any]) -> None:
        started.set()
        time.sleep(5)
        handled.append(message["MessageId"])
        done.set()

    rival = ferrymq.client("sqs", endpoint_url=stack.endpoint, region_name=stack.region,
                           aws_access_key_id=stack.access_key, aws_secret_access_key=stack.secret_key)
    stolen: list[dict[str, Any]] = []
    with _running(Consumer(url, handler, client=sdk, wait_time_seconds=1, handle_signals=False)):
        # when, once the handler has the message, another consumer polls the queue all the while
        assert started.wait(SAFETY_SECONDS)
        while not done.is_set():
            stolen += rival.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages", [])
    # then it never got the message, which was handled once and deleted
    assert stolen == []
    assert len(handled) == 1
    assert len(extensions) >= 3
    assert all(e["VisibilityTimeout"] == 2 for call in extensions for e in call["Entries"])
    assert _counts(sdk, url) == (0, 0)


def test_a_failing_message_is_redelivered_then_moved_to_the_dead_letter_queue(sdk: Any) -> None:
    # given a queue whose redrive policy allows two receives
    dlq = new_queue(sdk, "sdk-dlq")
    source = new_queue(sdk, "sdk-poison", VisibilityTimeout="1",
                    RedrivePolicy=json.dumps({"deadLetterTargetArn": _arn(sdk, dlq), "maxReceiveCount": 2}))
    _send(sdk, source, ["poison"])
    receive_counts: list[str] = []

    def handler(message: dict[str, Any]) -> None:
        receive_counts.append(message["Attributes"]["ApproximateReceiveCount"])
        raise RuntimeError("cannot handle this")

    # when a consumer's handler fails on it every time
    consumer = Consumer(source, handler, client=sdk, wait_time_seconds=1, handle_signals=False)
    with _running(consumer):
        _wait_until(lambda: _counts(sdk, dlq)[0] == 1)
    # then it was handled once per receive, never deleted, and the redrive policy moved it
    assert receive_counts == ["1", "2"]
    assert consumer.stats.failed == 2 and consumer.stats.deleted == 0
    moved = sdk.receive_message(QueueUrl=dlq, WaitTimeSeconds=1)["Messages"]
    assert [m["Body"] for m in moved] == ["poison"]
    assert _counts(sdk, source) == (0, 0)


def test_retry_visibility_brings_a_failed_message_back_before_its_timeout(sdk: Any) -> None:
    # given a 30 s visibility timeout and a handler that fails the first time only
    url = new_queue(sdk, "sdk-retry-soon", VisibilityTimeout="30")
    _send(sdk, url, ["flaky"])
    attempts: list[float] = []

    def handler(message: dict[str, Any]) -> None:
        attempts.append(time.monotonic())
        if len(attempts) == 1:
            raise RuntimeError("transient")

    consumer = Consumer(url, handler, client=sdk, wait_time_seconds=1, retry_visibility_seconds=0,
                        handle_signals=False)
    with _running(consumer):
        _wait_until(lambda: consumer.stats.deleted == 1, timeout=10)
    # then the second attempt came long before the 30 s were up, and succeeded
    assert len(attempts) == 2 and attempts[1] - attempts[0] < 10
    assert _counts(sdk, url) == (0, 0)


def test_fifo_messages_of_a_group_are_handled_one_at_a_time_in_order(sdk: Any) -> None:
    # given three groups of six messages each
    url = new_queue(sdk, "sdk-fifo", fifo=True, ContentBasedDeduplication="true")
    groups = ["red", "green", "blue"]
    for group in groups:
        _send(sdk, url, [f"{group}-{i}" for i in range(6)], MessageGroupId=group)
    order: dict[str, list[int]] = defaultdict(list)
    running: dict[str, int] = defaultdict(int)
    overlaps: list[str] = []
    active = [0, 0]
    lock = threading.Lock()

    def handler(message: dict[str, Any]) -> None:
        group, index = message["Body"].rsplit("-", 1)
        with lock:
            running[group] += 1
            active[0] += 1
            active[1] = max(active)
            if running[group] > 1:
                overlaps.append(group)
        time.sleep(0.05)
        with lock:
            running[group] -= 1
            active[0] -= 1
            order[group].append(int(index))

    # when a consumer with three handler threads takes them
    consumer = Consumer(url, handler, client=sdk, concurrency=3, wait_time_seconds=1, handle_signals=False)
    with _running(consumer):
        _wait_until(lambda: consumer.stats.deleted == 18)
    # then each group was handled in order and never two of a group at once, while groups ran side by side
    assert dict(order) == {group: list(range(6)) for group in groups}
    assert overlaps == []
    assert active[1] >= 2
    assert _counts(sdk, url) == (0, 0)


def test_a_queue_that_does_not_exist_stops_the_consumer_with_its_error(sdk: Any) -> None:
    url = new_queue(sdk, "sdk-gone")
    consumer = Consumer(url, lambda message: None, client=sdk, wait_time_seconds=1, handle_signals=False)
    sdk.delete_queue(QueueUrl=url)
    with pytest.raises(ClientError) as caught:
        consumer.run()
    assert caught.value.response["Error"]["Code"] == "AWS.SimpleQueueService.NonExistentQueue"


def test_a_queue_deleted_while_consuming_ends_run_with_consumer_error(sdk: Any) -> None:
    url = new_queue(sdk, "sdk-vanish")
    consumer = Consumer(url, lambda message: None, client=sdk, wait_time_seconds=1, handle_signals=False)
    with pytest.raises(ConsumerError, match="NonExistentQueue"), _running(consumer):
        time.sleep(0.5)
        sdk.delete_queue(QueueUrl=url)
        _wait_until(lambda: consumer.stopping, timeout=15)


_CONSUMER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    from ferrymq.consumer import Consumer

    def say(line):
        # One write per line: handlers print from several threads, and print() writes its parts apart.
        sys.stdout.write(line + "\\n")
        sys.stdout.flush()

    def handler(message):
        say("start " + message["Body"])
        time.sleep(2)
        say("done " + message["Body"])

    stats = Consumer(sys.argv[1], handler, concurrency=int(sys.argv[2])).run()
    print("stats", stats.succeeded, stats.deleted, stats.released, flush=True)
    """
)


@pytest.mark.parametrize("fifo", [False, True], ids=["standard", "fifo"])
def test_sigterm_lets_running_handlers_finish_and_deletes_their_messages(sdk: Any, stack: Stack,
                                                                         fifo: bool) -> None:
    # given five messages (FIFO: all of one group) and a consumer process whose handler takes 2 s
    url = new_queue(sdk, "sdk-sigterm", fifo=fifo, **({"ContentBasedDeduplication": "true"} if fifo else {}))
    bodies = [f"t{i}" for i in range(5)]
    _send(sdk, url, bodies, **({"MessageGroupId": "g"} if fifo else {}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "FERRYMQ_"))}
    env.update({"FERRYMQ_ENDPOINT_URL": stack.endpoint, "FERRYMQ_REGION": stack.region,
                "AWS_EC2_METADATA_DISABLED": "true", "PYTHONUNBUFFERED": "1"})
    process = subprocess.Popen([sys.executable, "-c", _CONSUMER_SCRIPT, url, "2" if not fifo else "5"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert process.stdout is not None
        started = []
        # standard: two handlers run at once; FIFO: one at a time, the group's others wait their turn
        while len(started) < (1 if fifo else 2):
            line = process.stdout.readline()
            assert line, process.stderr.read() if process.stderr else ""
            if line.startswith("start"):
                started.append(line.split()[1])
        # when it gets SIGTERM in the middle of them
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=SAFETY_SECONDS)
        stopped_after = time.monotonic() - signalled
    finally:
        terminate_group(process, 5)
    # then it exits cleanly once the running handlers are done, without waiting out a long poll
    assert process.returncode == 0, err
    lines = out.splitlines()
    assert sorted(line.split()[1] for line in lines if line.startswith("done")) == sorted(started)
    assert not [line for line in lines if line.startswith("start")]
    assert lines[-1].split()[:3] == ["stats", str(len(started)), str(len(started))]
    assert stopped_after < 10
    # and the handled messages are deleted, the others visible again at once
    assert _counts(sdk, url) == (len(bodies) - len(started), 0)
    rest = sdk.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1)["Messages"]
    remaining = sorted(set(bodies) - set(started))
    if fifo:
        assert [m["Body"] for m in rest] == remaining
    else:
        assert sorted(m["Body"] for m in rest) == remaining
