"""Queue policies an owner may write to hurt the gateway: wildcard patterns built to make a matcher backtrack,
and documents over SQS's quotas, over both wire protocols."""

from __future__ import annotations

import json
import threading
import urllib.request
import uuid
from typing import Any

import pytest

from tests.e2e.conftest import Stack
from tests.support.errors import expect_error
from tests.support.sqs_clients import sqs_client

OTHER = "424242424242"
# Each "*a" multiplied a backtracking matcher's time by ~10 against a name of many a's: six took 7 s.
STARS = 12


@pytest.fixture(scope="module")
def other_keys(stack: Stack) -> tuple[str, str]:
    return stack.create_credentials(OTHER, "mallory")


@pytest.fixture
def other(stack: Stack, protocol: str, other_keys: tuple[str, str]) -> Any:
    """A client of another account than the ``sqs`` client's."""
    return sqs_client(stack.endpoint, protocol, access_key=other_keys[0], secret_key=other_keys[1])


class HealthProbe:
    """Polls the gateway's /health/live from a thread until stopped; each answer must come within the probe's
    timeout, so a gateway whose event loop is held fails the test instead of hanging it."""

    def __init__(self, stack: Stack) -> None:
        self._url = f"{stack.endpoint}/health/live"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.answers: list[int] = []
        self.failure: BaseException | None = None

    def _probe(self) -> int:
        with urllib.request.urlopen(self._url, timeout=30) as answer:
            return int(answer.status)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.answers.append(self._probe())
        except BaseException as failed:  # handed to the test's thread
            self.failure = failed

    def __enter__(self) -> HealthProbe:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def answered(self) -> int:
        """How many probes have answered so far; raises what stopped the probing, if anything did."""
        if self.failure is not None:
            raise AssertionError("/health/live did not answer") from self.failure
        return len(self.answers)

    def wait_for_more(self, count: int) -> None:
        """Until ``count`` more probes have answered (each within the probe's timeout)."""
        target = self.answered() + count
        while self._thread.is_alive() and self.answered() < target:
            self._thread.join(0.01)
        assert self.answered() >= target


def test_a_hostile_wildcard_policy_neither_holds_the_gateway_nor_is_decided_wrongly(
        stack: Stack, sqs: Any, other: Any) -> None:
    # given a queue named by a long run of a's and a policy whose patterns are a's between many stars: one
    # that never matches (no X in the name) on sends and receives, and one that does, on receives only
    url = sqs.create_queue(QueueName="a" * 72 + "-" + uuid.uuid4().hex[:6])["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    prefix = arn.rsplit(":", 1)[0] + ":"
    never = {"Sid": "never", "Effect": "Allow", "Principal": "*", "Action": ["sqs:SendMessage", "sqs:ReceiveMessage"],
             "Resource": prefix + "*a" * STARS + "*X"}
    receive = {"Sid": "receive", "Effect": "Allow", "Principal": {"AWS": OTHER}, "Action": "sqs:ReceiveMessage",
               "Resource": prefix + "*a" * STARS + "*"}
    sqs.set_queue_attributes(QueueUrl=url, Attributes={
        "Policy": json.dumps({"Version": "2012-10-17", "Statement": [never, receive]})})
    sent = threading.Event()
    other.meta.events.register("before-send.sqs.ReceiveMessage", lambda **_: sent.set())
    received: dict[str, Any] = {}

    def long_poll() -> None:
        received.update(other.receive_message(QueueUrl=url, WaitTimeSeconds=20, MaxNumberOfMessages=1))

    with HealthProbe(stack) as health:
        health.wait_for_more(1)
        # when the other account sends while the gateway's health is polled, then it is refused (only the
        # pattern that never matches speaks of sends) and health kept answering meanwhile
        expect_error(lambda: other.send_message(QueueUrl=url, MessageBody="x"), "AccessDenied", 403,
                     json_code="AccessDeniedException")
        health.wait_for_more(1)
        # when it long-polls (allowed by the pattern that matches, after the one that does not was tried)
        poller = threading.Thread(target=long_poll)
        poller.start()
        try:
            assert sent.wait(30)
            # then health answers while that receive is in flight
            health.wait_for_more(3)
            assert poller.is_alive()
        finally:
            # and the receive gets what the owner sends
            sqs.send_message(QueueUrl=url, MessageBody="for the other account")
            poller.join(60)
        health.wait_for_more(1)
    assert [m["Body"] for m in received["Messages"]] == ["for the other account"]
    assert set(health.answers) == {200}
    sqs.delete_queue(QueueUrl=url)


def _document(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def _statement(**extra: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Principal": "*", "Action": "sqs:SendMessage", "Resource": "*", **extra}


OVER_QUOTA = [
    (_document(*[_statement()] * 21), "21 statements were found in the submitted policy, max allowed is 20."),
    (_document(_statement(Action=[f"sqs:{name}" for name in ("SendMessage", "ReceiveMessage", "DeleteMessage",
                                                               "ChangeMessageVisibility", "GetQueueAttributes",
                                                               "GetQueueUrl", "PurgeQueue", "ListQueues")])),
     "8 Actions were found, maximum allowed is 7."),
    (_document(_statement(Principal={"AWS": [f"{i:012d}" for i in range(51)]})),
     "51 principals were found in the submitted policy, max allowed is 50."),
    (_document(_statement(Condition={"StringLike": {f"aws:Key{i}": "*" for i in range(11)}})),
     "11 conditions were found in the submitted policy, max allowed is 10."),
    (_document(_statement(Sid="x" * 8_200)), "maximum allowed is 8192"),
]


@pytest.mark.parametrize(("document", "message"), OVER_QUOTA, ids=["statements", "actions", "principals",
                                                                      "conditions", "bytes"])
def test_a_policy_over_sqs_quotas_is_refused_when_created_or_set(sqs: Any, document: str, message: str) -> None:
    # when a queue is created with a policy over a quota, then OverLimit, and no queue
    name = f"quota-{uuid.uuid4().hex[:10]}"
    expect_error(lambda: sqs.create_queue(QueueName=name, Attributes={"Policy": document}), "OverLimit", 403,
                 message=message)
    assert not sqs.list_queues(QueueNamePrefix=name).get("QueueUrls")
    # when it is set on an existing queue, then OverLimit, and the queue keeps no policy
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    expect_error(lambda: sqs.set_queue_attributes(QueueUrl=url, Attributes={"Policy": document}), "OverLimit", 403,
                 message=message)
    assert "Attributes" not in sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"])
    sqs.delete_queue(QueueUrl=url)
