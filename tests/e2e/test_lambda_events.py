"""The front-end function behind API Gateway and function URLs answers as ``ferrymq up`` does.

Each recorded event document (tests/events/) carries a request signed with botocore for the session stack's
URL (under the document's stage, where it has one); the same signed request goes to the stack's gateway as
HTTP.  The function's handler runs in an interpreter of its own, wired to the same stack (its DynamoDB, its
workers, its cluster secret), as a Lambda execution environment would be.  Its answers equal the gateway's
byte for byte, but for the request id, which is new for every request.
"""

from __future__ import annotations

import base64
import http.client
import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from ferrymq.infra import aws_target
from ferrymq.infra.cluster_secret import SECRET_FILE, SECRET_FILE_ENV
from ferrymq.infra.standin.access_keys import read_key_pair
from ferrymq.infra.standin.layout import ENDPOINT_FILE
from tests.e2e.conftest import Stack, new_queue
from tests.support.lambda_events import base_path, load, signed_event
from tests.support.lambda_invoke import LambdaProcess

_REQUEST_ID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.fixture(scope="module")
def function(stack: Stack) -> Iterator[LambdaProcess]:
    standin = stack.data_dir / "aws"
    key_pair = read_key_pair(standin)
    assert key_pair is not None
    env = {
        **stack.env,
        **aws_target.standin_environment((standin / ENDPOINT_FILE).read_text().strip(), stack.region, key_pair),
        SECRET_FILE_ENV: str(stack.data_dir / SECRET_FILE),
    }
    process = LambdaProcess(env)
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def queue(stack: Stack) -> str:
    """A queue the compared requests read (nothing changes it meanwhile, so its answers are stable)."""
    from tests.support.sqs_clients import sqs_client

    sqs = sqs_client(stack.endpoint, "json", region=stack.region)
    return new_queue(sqs, "via-api-gateway")


def _sign(method: str, url: str, *, body: bytes = b"", headers: dict[str, str] | None = None,
          secret: str = "test") -> AWSRequest:
    request = AWSRequest(method=method, url=url, data=body, headers=headers or {})
    SigV4Auth(Credentials("test", secret), "sqs", "us-east-1").add_auth(request)
    return request


def _json_request(stack: Stack, prefix: str, action: str, payload: dict[str, Any], **kw: Any) -> AWSRequest:
    return _sign("POST", f"{stack.endpoint}{prefix}/", body=json.dumps(payload).encode(), headers={
        "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": f"AmazonSQS.{action}"}, **kw)


def _over_http(request: AWSRequest) -> tuple[int, dict[str, str], bytes]:
    """The signed request, exactly as signed, to the stack's gateway."""
    url = urlsplit(request.url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        target = url.path + (f"?{url.query}" if url.query else "")
        connection.request(request.method, target, body=request.body or None, headers=dict(request.headers.items()))
        answer = connection.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        connection.close()


def _through_function(function: LambdaProcess, document: str, request: AWSRequest) -> tuple[int, dict[str, str],
                                                                                              bytes]:
    scheme = urlsplit(request.url).scheme
    result = function.invoke(signed_event(load(document), request, forwarded_proto=scheme))
    body = str(result["body"])
    raw = base64.b64decode(body) if result["isBase64Encoded"] else body.encode()
    headers = result["headers"]
    assert isinstance(headers, dict)
    return int(str(result["statusCode"])), {k.lower(): str(v) for k, v in headers.items()}, raw


def _same_answer(function: LambdaProcess, document: str, request: AWSRequest) -> tuple[int, bytes]:
    """Asserts the function's answer equals the gateway's, request ids aside; returns the status and body."""
    status, headers, body = _through_function(function, document, request)
    expected_status, expected_headers, expected_body = _over_http(request)
    assert status == expected_status
    assert _REQUEST_ID.sub(b"<id>", body) == _REQUEST_ID.sub(b"<id>", expected_body)
    for name, value in headers.items():
        assert _REQUEST_ID.sub(b"<id>", expected_headers[name].encode()) == _REQUEST_ID.sub(b"<id>", value.encode())
    return status, body


def test_a_rest_api_event_under_a_stage_answers_as_the_gateway(stack: Stack, function: LambdaProcess,
                                                               queue: str) -> None:
    # given a JSON request signed for the API's stage URL, delivered as a REST API proxy event
    prefix = base_path(load("rest-v1-proxy"))
    assert prefix == "/Prod"
    request = _json_request(stack, prefix, "GetQueueAttributes", {"QueueUrl": queue, "AttributeNames": ["All"]})
    # then its signature verifies and the answer is the gateway's, byte for byte
    status, body = _same_answer(function, "rest-v1-proxy", request)
    assert status == 200 and b"QueueArn" in body


def test_a_query_get_on_a_queue_path_through_a_custom_domain_answers_as_the_gateway(
        stack: Stack, function: LambdaProcess, queue: str) -> None:
    # given a query-protocol GET on the queue's own path, with a parameter API Gateway hands over as a list
    path = urlsplit(queue).path
    query = urlencode([("Action", "GetQueueAttributes"), ("AttributeName.1", "All"),
                       ("AttributeName.2", "QueueArn"), ("Version", "2012-11-05")])
    request = _sign("GET", f"{stack.endpoint}{path}?{query}")
    status, body = _same_answer(function, "rest-v1-query-custom-domain", request)
    assert status == 200 and b"<GetQueueAttributesResponse" in body


def test_a_base64_form_body_through_an_http_api_stage_answers_as_the_gateway(
        stack: Stack, function: LambdaProcess, queue: str) -> None:
    form = urlencode({"Action": "GetQueueAttributes", "QueueUrl": queue, "AttributeName.1": "All",
                      "Version": "2012-11-05"}).encode()
    request = _sign("POST", f"{stack.endpoint}/Prod/", body=form,
                    headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})
    assert base_path(load("http-v2-stage")) == "/Prod"
    status, body = _same_answer(function, "http-v2-stage", request)
    assert status == 200 and b"QueueArn" in body


def test_a_function_url_event_answers_as_the_gateway(stack: Stack, function: LambdaProcess, queue: str) -> None:
    name = queue.rsplit("/", 1)[1]
    request = _sign("GET", f"{stack.endpoint}/?" + urlencode({"Action": "GetQueueUrl", "QueueName": name,
                                                               "Version": "2012-11-05"}))
    status, body = _same_answer(function, "function-url", request)
    assert status == 200 and queue.encode() in body


@pytest.mark.parametrize("document", ["rest-v1-proxy", "http-v2-stage", "function-url"])
def test_a_wrong_signature_is_refused_with_the_gateways_answer(stack: Stack, function: LambdaProcess,
                                                                 queue: str, document: str) -> None:
    prefix = base_path(load(document))
    request = _json_request(stack, prefix, "GetQueueAttributes", {"QueueUrl": queue}, secret="not-the-secret")
    status, body = _same_answer(function, document, request)
    assert status == 403 and b"SignatureDoesNotMatch" in body


def test_an_unknown_queue_is_the_gateways_error(stack: Stack, function: LambdaProcess) -> None:
    request = _json_request(stack, "", "GetQueueUrl", {"QueueName": "no-such-queue-via-lambda"})
    status, _ = _same_answer(function, "function-url", request)
    assert status == 400


def test_queue_urls_from_a_stage_route_back_through_it(stack: Stack, function: LambdaProcess) -> None:
    # given a queue created through the API's stage URL
    request = _json_request(stack, "/Prod", "CreateQueue", {"QueueName": "made-through-a-stage"})
    status, _, body = _through_function(function, "rest-v1-proxy", request)
    assert status == 200
    url = json.loads(body)["QueueUrl"]
    # then its URL is under the stage, and a request on it through the stage reaches the queue
    assert urlsplit(url).path.startswith("/Prod/")
    send = _json_request(stack, "/Prod", "SendMessage", {"QueueUrl": url, "MessageBody": "through the stage"})
    assert _through_function(function, "rest-v1-proxy", send)[0] == 200
    query = urlencode({"Action": "ReceiveMessage", "Version": "2012-11-05"})
    receive = _sign("GET", f"{stack.endpoint}{urlsplit(url).path}?{query}")
    status, _, body = _through_function(function, "http-v2-stage", receive)
    assert status == 200 and b"through the stage" in body


def test_a_query_action_on_no_queue_through_a_stage_is_not_read_as_a_queue_path(
        stack: Stack, function: LambdaProcess) -> None:
    # The stage is no queue: CreateQueue posted to /Prod/ creates the queue (SQS refuses it on a queue's path).
    form = urlencode({"Action": "CreateQueue", "QueueName": "query-through-a-stage", "Version": "2012-11-05"})
    request = _sign("POST", f"{stack.endpoint}/Prod/", body=form.encode(),
                    headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})
    status, _, body = _through_function(function, "http-v2-stage", request)
    assert status == 200, body
    assert b"/Prod/queue/us-east-1/000000000000/query-through-a-stage</QueueUrl>" in body
