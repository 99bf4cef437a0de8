"""The Lambda entry (the Chalice app behind API Gateway) serving signed SQS requests.

Chalice's local gateway builds the same proxy events API Gateway sends; the app handles them with the
shared pipeline against DynamoDB's API (moto's server) and a real storage worker process.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from chalice.test import Client

from ferrymq.aws.credentials import Credential, CredentialStore
from ferrymq.frontend import app as lambda_entry
from ferrymq.settings import Settings
from tests.integration.conftest import WorkerProcess


@pytest.fixture
def lambda_app(aws_settings: Settings, start_worker: Callable[..., WorkerProcess], tmp_path: Path,
               monkeypatch: pytest.MonkeyPatch) -> Iterator[Client]:
    CredentialStore.from_settings(aws_settings).put(Credential("test", "test", "000000000000", "dev"))
    start_worker(tmp_path / "worker")
    monkeypatch.setenv("FERRYMQ_TABLE_PREFIX", aws_settings.table_prefix)
    monkeypatch.setattr(lambda_entry, "_frontend", None)
    with Client(lambda_entry.app) as client:
        yield client


def _signed(method: str, path: str, headers: dict[str, str], body: bytes = b"", query: str = "") -> dict[str, Any]:
    url = f"http://localhost{path}" + (f"?{query}" if query else "")
    request = AWSRequest(method=method, url=url, data=body, headers=headers)
    SigV4Auth(Credentials("test", "test"), "sqs", "us-east-1").add_auth(request)
    return {"headers": {**dict(request.headers), "Host": "localhost"}, "body": body}


def _json_call(client: Client, action: str, payload: dict[str, Any]) -> Any:
    body = json.dumps(payload).encode()
    headers = {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": f"AmazonSQS.{action}"}
    return client.http.post("/", **_signed("POST", "/", headers, body))


def test_json_protocol_through_the_lambda_entry(lambda_app: Client) -> None:
    # given a queue created through the Lambda entry
    created = _json_call(lambda_app, "CreateQueue", {"QueueName": "via-lambda"})
    assert created.status_code == 200, created.body
    url = json.loads(created.body)["QueueUrl"]
    assert url.endswith("/000000000000/via-lambda")
    # when a message is sent and received through it
    assert _json_call(lambda_app, "SendMessage", {"QueueUrl": url, "MessageBody": "hi"}).status_code == 200
    got = json.loads(_json_call(lambda_app, "ReceiveMessage", {"QueueUrl": url}).body)
    # then it is the message sent
    assert got["Messages"][0]["Body"] == "hi"


def test_query_protocol_and_errors_through_the_lambda_entry(lambda_app: Client) -> None:
    form = urlencode({"Action": "CreateQueue", "QueueName": "via-lambda-query", "Version": "2012-11-05"}).encode()
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    created = lambda_app.http.post("/", **_signed("POST", "/", headers, form))
    assert created.status_code == 200 and b"<CreateQueueResponse" in created.body
    missing = _json_call(lambda_app, "GetQueueUrl", {"QueueName": "no-such-queue"})
    assert missing.status_code == 400
    assert missing.headers["x-amzn-query-error"] == "AWS.SimpleQueueService.NonExistentQueue;Sender"
    unsigned = lambda_app.http.post("/", headers=headers, body=form)
    assert unsigned.status_code == 403
