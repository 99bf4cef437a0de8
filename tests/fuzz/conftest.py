"""Fixtures for the fuzz tests over HTTP: the session's stack (``ferrymq up``, as in tests/e2e), a client that
signs whatever it is given with SigV4 as botocore signs, and real queues for the generated requests to name."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.httpsession import URLLib3Session

from tests.fuzz.strategies import Known
from tests.support.sqs_clients import sqs_client
from tests.support.stack import Stack

JSON_CONTENT_TYPE = "application/x-amz-json-1.0"
FORM_CONTENT_TYPE = "application/x-www-form-urlencoded; charset=utf-8"


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes


class SignedClient:
    """Sends any request, signed with SigV4 for SQS exactly as botocore signs it."""

    def __init__(self, endpoint: str, region: str, access_key: str, secret_key: str) -> None:
        self._endpoint = endpoint.rstrip("/")
        self._signer = SigV4Auth(Credentials(access_key, secret_key), "sqs", region)
        self._http = URLLib3Session(timeout=30)

    def send(self, method: str, path: str, headers: dict[str, str], body: bytes = b"", query: str = "",
             unsigned_headers: dict[str, str] | None = None) -> Answer:
        """``unsigned_headers`` are added after signing, as a proxy or a browser would add them."""
        url = f"{self._endpoint}{path}" + (f"?{query}" if query else "")
        request = AWSRequest(method=method, url=url, data=body, headers=headers)
        self._signer.add_auth(request)
        for name, value in (unsigned_headers or {}).items():
            request.headers[name] = value
        response = self._http.send(request.prepare())
        return Answer(response.status_code, {k.lower(): v for k, v in response.headers.items()}, response.content)

    def json(self, action: str, body: bytes) -> Answer:
        return self.send("POST", "/", {"Content-Type": JSON_CONTENT_TYPE, "X-Amz-Target": f"AmazonSQS.{action}"},
                         body)

    def form(self, body: bytes, path: str = "/") -> Answer:
        return self.send("POST", path, {"Content-Type": FORM_CONTENT_TYPE}, body)

    def close(self) -> None:
        self._http.close()


@pytest.fixture(scope="module")
def signed(stack: Stack) -> Iterator[SignedClient]:
    client = SignedClient(stack.endpoint, stack.region, stack.access_key, stack.secret_key)
    try:
        yield client
    finally:
        client.close()


@dataclass(frozen=True)
class FuzzQueues:
    standard: str
    fifo: str
    dead_letter: str
    dead_letter_arn: str
    source: str
    known: Known


@pytest.fixture(scope="module")
def fuzz_queues(stack: Stack) -> FuzzQueues:
    """Queues the generated requests name: a standard queue holding a message in flight, a FIFO queue, and a
    dead-letter queue with a source queue redriving to it."""
    sqs: Any = sqs_client(stack.endpoint, "json", access_key=stack.access_key, secret_key=stack.secret_key,
                          region=stack.region)
    standard = sqs.create_queue(QueueName="fuzz-standard")["QueueUrl"]
    fifo = sqs.create_queue(QueueName="fuzz-fifo.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    dead_letter = sqs.create_queue(QueueName="fuzz-dlq")["QueueUrl"]
    dead_letter_arn = sqs.get_queue_attributes(QueueUrl=dead_letter, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    redrive = f'{{"deadLetterTargetArn":"{dead_letter_arn}","maxReceiveCount":"3"}}'
    source = sqs.create_queue(QueueName="fuzz-source", Attributes={"RedrivePolicy": redrive})["QueueUrl"]
    sqs.send_message(QueueUrl=standard, MessageBody="fuzz")
    received = sqs.receive_message(QueueUrl=standard, VisibilityTimeout=600, WaitTimeSeconds=1)["Messages"]
    urls = (standard, fifo, dead_letter, source)
    arns = tuple(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
                 for url in urls)
    known = Known(queue_urls=urls, queue_arns=arns, receipt_handles=(received[0]["ReceiptHandle"],),
                  protected_urls=frozenset(urls))
    return FuzzQueues(standard, fifo, dead_letter, dead_letter_arn, source, known)
