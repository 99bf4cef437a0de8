"""Talking to the gateway's dashboard as its page does: a cookie session, JSON, the CSRF header."""

from __future__ import annotations

import json
import uuid
from typing import Any

import requests

from tests.support.waiting import wait_for


class DashboardClient:
    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.http = requests.Session()
        self.csrf: str | None = None

    def url(self, path: str) -> str:
        return f"{self.endpoint}/dashboard/{path}"

    def login(self, access_key_id: str, secret_access_key: str) -> dict[str, Any]:
        answer = self.http.post(self.url("api/login"), json={"accessKeyId": access_key_id,
                                                             "secretAccessKey": secret_access_key}, timeout=30)
        assert answer.status_code == 200, answer.text
        who = answer.json()
        self.csrf = who["csrfToken"]
        return who

    def get(self, path: str, **params: str) -> requests.Response:
        return self.http.get(self.url(f"api/{path}"), params=params, timeout=30)

    def post(self, path: str, document: dict[str, Any], *, csrf: str | None = "session") -> requests.Response:
        headers = {}
        if csrf == "session" and self.csrf is not None:
            headers["X-CSRF-Token"] = self.csrf
        elif csrf not in (None, "session"):
            headers["X-CSRF-Token"] = csrf
        return self.http.post(self.url(f"api/{path}"), json=document, headers=headers, timeout=30)

    def queue(self, name: str, prefix: str | None = None) -> dict[str, Any]:
        """The queue as listed under ``prefix`` (by default its own name): the session's stack may hold more
        queues than one answer lists."""
        answer = self.get("queues", prefix=prefix if prefix is not None else name)
        assert answer.status_code == 200, answer.text
        return next(q for q in answer.json()["queues"] if q["name"] == name)


def new_queue(sqs: Any, prefix: str, **attributes: str) -> tuple[str, str, str]:
    """(name, url, arn) of a new queue of a name of its own."""
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return name, url, arn


def hold_in_flight(sqs: Any, url: str, n: int) -> None:
    """Receive exactly ``n`` messages of ``url`` for 15 minutes (long enough for any test), so they stay in flight."""
    received = 0
    for _ in range(20):
        received += len(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=n - received,
                                            VisibilityTimeout=900).get("Messages", []))
        if received == n:
            break
    assert received == n


def counts(sqs: Any, url: str) -> dict[str, int]:
    """What GetQueueAttributes says, under the dashboard's names."""
    names = {"ApproximateNumberOfMessages": "visible", "ApproximateNumberOfMessagesNotVisible": "inFlight",
             "ApproximateNumberOfMessagesDelayed": "delayed"}
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=list(names))["Attributes"]
    return {names[k]: int(v) for k, v in attributes.items()}


def unique_prefix(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def dead_lettered(sqs: Any, prefix: str, count: int) -> tuple[dict[str, str], dict[str, str]]:
    """A source queue with a dead-letter queue holding ``count`` of its messages (received once too often);
    each as {"name", "url", "arn"}, both named ``prefix`` and more."""
    dlq = dict(zip(("name", "url", "arn"), new_queue(sqs, f"{prefix}-dlq"), strict=True))
    policy = json.dumps({"deadLetterTargetArn": dlq["arn"], "maxReceiveCount": 1})
    source = dict(zip(("name", "url", "arn"), new_queue(sqs, f"{prefix}-src", RedrivePolicy=policy), strict=True))
    for i in range(count):
        sqs.send_message(QueueUrl=source["url"], MessageBody=f"m{i}")

    def moved() -> bool:
        sqs.receive_message(QueueUrl=source["url"], MaxNumberOfMessages=10, VisibilityTimeout=0)
        return counts(sqs, dlq["url"])["visible"] == count

    wait_for(moved)
    return source, dlq
