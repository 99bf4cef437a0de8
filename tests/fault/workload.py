"""Continuous send, receive and delete load through the front end with boto3, recorded in a QueueHistory.

Clients make one attempt per call (no SDK retries), so each attempt's outcome is known: success is
acknowledged, a 5xx or a timeout unknown. Each FIFO group has one sending thread, so the order of its sends
is the order they were attempted in.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from tests.support.queue_checker import QueueHistory

VISIBILITY_SECONDS = 4


def fault_client(endpoint: str) -> Any:
    return boto3.client(
        "sqs",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(retries={"total_max_attempts": 1, "mode": "standard"}, connect_timeout=5, read_timeout=15),
    )


def _server_side(exc: Exception) -> bool:
    """A 5xx, a lost connection or a timeout: the outcome is unknown. Anything else is the test's bug."""
    if isinstance(exc, ClientError):
        return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)) >= 500
    return isinstance(exc, BotoCoreError)


class Workload:
    def __init__(
        self, endpoint: str, url: str, history: QueueHistory, tag: str, *, senders: int = 2, receivers: int = 1
    ) -> None:
        self.endpoint = endpoint
        self.url = url
        self.history = history
        self.tag = tag
        self.senders = senders
        self.receivers = receivers
        self.errors: list[str] = []
        self._sending = threading.Event()
        self._receiving = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        self._sending.set()
        self._receiving.set()
        for n in range(self.senders):
            self._spawn(self._send_loop, n)
        for n in range(self.receivers):
            self._spawn(self._receive_loop, n)

    def _spawn(self, target: Any, n: int) -> None:
        thread = threading.Thread(target=target, args=(n,), daemon=True)
        thread.start()
        self._threads.append(thread)

    def _send_loop(self, n: int) -> None:
        client = fault_client(self.endpoint)
        i = 0
        while self._sending.is_set():
            body = f"{self.tag}-{n}-{i}"
            kwargs: dict[str, Any] = {"QueueUrl": self.url, "MessageBody": body}
            group = None
            if self.history.fifo:
                group = f"{self.tag}-{n}-g{i % 2}"
                kwargs.update(MessageGroupId=group, MessageDeduplicationId=body)
            self.history.attempt(body, group)
            try:
                client.send_message(**kwargs)
            except Exception as exc:
                if not _server_side(exc):
                    self.errors.append(f"send {body}: {exc}")
            else:
                self.history.acknowledged(body)
            i += 1
            time.sleep(0.004)

    def _receive_loop(self, n: int) -> None:
        client = fault_client(self.endpoint)
        while self._receiving.is_set():
            try:
                got = client.receive_message(
                    QueueUrl=self.url, MaxNumberOfMessages=10, WaitTimeSeconds=1, VisibilityTimeout=VISIBILITY_SECONDS,
                    AttributeNames=["ApproximateReceiveCount"],
                ).get("Messages", [])
            except Exception as exc:
                if not _server_side(exc):
                    self.errors.append(f"receive: {exc}")
                self.history.receive_unknown()
                time.sleep(0.1)
                continue
            if not got:
                self.last_empty = time.monotonic()
                continue
            self.last_full = time.monotonic()
            for m in got:
                self.history.received(
                    m["Body"], f"{m['MessageId']} count {m['Attributes']['ApproximateReceiveCount']}"
                )
            entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)]
            try:
                result = client.delete_message_batch(QueueUrl=self.url, Entries=entries)
            except Exception as exc:
                if not _server_side(exc):
                    self.errors.append(f"delete: {exc}")
                continue
            for ok in result.get("Successful", []):
                self.history.delete_acknowledged(got[int(ok["Id"])]["Body"])

    last_empty: float = 0.0
    last_full: float = 0.0

    def _holds_nothing(self, client: Any) -> bool:
        try:
            counts = client.get_queue_attributes(QueueUrl=self.url, AttributeNames=[
                "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed"])["Attributes"]
        except Exception:
            return False
        return all(int(value) == 0 for value in counts.values())

    def stop_sending(self) -> None:
        self._sending.clear()
        for thread in self._threads[: self.senders]:
            thread.join(30)
        self.history.sending_stopped()

    def drain(self, timeout: float = 60.0) -> None:
        """Receive until a receive comes back empty and the queue holds nothing, visible, in flight or delayed
        (or, should its counts never say so, until it stays empty for longer than a visibility timeout), then
        stop. Counts that said empty too early could only end the drain before a message came back, which the
        checker reports as lost: they cannot hide one."""
        deadline = time.monotonic() + timeout
        quiet = VISIBILITY_SECONDS + 2
        client = fault_client(self.endpoint)
        while time.monotonic() < deadline:
            time.sleep(0.5)
            if self.last_empty <= self.last_full:
                continue
            if time.monotonic() - self.last_full > quiet or self._holds_nothing(client):
                break
        self._receiving.clear()
        for thread in self._threads[self.senders :]:
            thread.join(30)
