"""The gateway process's transport limits, probed over raw sockets: every refusal is an SQS error, never a 500.

One gateway with small limits serves the module (header timeout 1 s, body timeout 2 s, 256 KiB bodies, a
256 KiB budget for unverified bodies beyond each one's free 64 KiB, 8 connections per client).
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime
from urllib.parse import urlsplit

import orjson
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from ferrymq.infra.gateway import READY_PREFIX
from ferrymq.infra.local_stack import seed_dev_credential
from ferrymq.settings import Settings
from tests.integration.infra.processes import Started, child_env, python_module, running
from tests.support.split_send import send_request
from tests.support.sqs_clients import sqs_client

MAX_BODY = 256 * 1024
BUDGET = 256 * 1024
PER_CLIENT = 8
HEADER_TIMEOUT = 1.0
BODY_TIMEOUT = 2.0
JSON_HEADERS = "Content-Type: application/x-amz-json-1.0\r\nX-Amz-Target: AmazonSQS.{action}\r\n"
QUERY_HEADERS = "Content-Type: application/x-www-form-urlencoded; charset=utf-8\r\n"


@pytest.fixture(scope="module")
def gateway(aws_settings: Settings) -> Iterator[Started]:
    seed_dev_credential(aws_settings)
    env = child_env(
        AWS_ENDPOINT_URL=str(aws_settings.aws_endpoint_url), FERRYMQ_TABLE_PREFIX=aws_settings.table_prefix,
        FERRYMQ_HEADER_TIMEOUT_SECONDS=str(HEADER_TIMEOUT), FERRYMQ_BODY_TIMEOUT_SECONDS=str(BODY_TIMEOUT),
        FERRYMQ_MAX_REQUEST_BYTES=str(MAX_BODY), FERRYMQ_UNAUTHENTICATED_BUFFER_BYTES=str(BUDGET),
        FERRYMQ_MAX_CONNECTIONS_PER_CLIENT=str(PER_CLIENT), FERRYMQ_USAGE_ENABLED="0",
    )
    argv = python_module("ferrymq.infra.gateway", "--host", "127.0.0.1", "--port", "0")
    with running(argv, READY_PREFIX, env) as started:
        yield started


def _connect(gateway: Started) -> socket.socket:
    address = urlsplit(gateway.url)
    sock = socket.create_connection((address.hostname or "", address.port or 0), timeout=10)
    return sock


def _read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One response (status, lower-case headers, body), or status 0 if the gateway closed without one."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return 0, {}, data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    while len(body) < int(headers.get("content-length", "0")):
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(lines[0].split()[1]), headers, body


def _ask(gateway: Started, head: str, body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    """Send ``head`` (request line and headers, CRLF-separated, without the blank line) and ``body``."""
    with closing(_connect(gateway)) as sock:
        sock.sendall(head.encode("latin-1") + b"\r\n" + body)
        return _read_response(sock)


def _signed_by(key: str, signed: str = "content-type;host;x-amz-date") -> str:
    """Date and Authorization headers by ``key`` whose signature is wrong: only the body's hash can tell."""
    now = datetime.now(UTC)
    return (
        f"X-Amz-Date: {now:%Y%m%dT%H%M%SZ}\r\nAuthorization: AWS4-HMAC-SHA256 "
        f"Credential={key}/{now:%Y%m%d}/us-east-1/sqs/aws4_request, SignedHeaders={signed}, "
        f"Signature={'0' * 64}\r\n"
    )


def _signed_by_dev_key() -> str:
    """Signed by the existing key ``test``, so the body must be read before the signature can be judged."""
    return _signed_by("test")


def _query_error(body: bytes) -> str:
    text = body.decode()
    return text.split("<Code>", 1)[1].split("</Code>", 1)[0]


def test_an_oversized_body_gets_sqs_413_in_the_json_protocol_before_it_is_sent(gateway: Started) -> None:
    # given a JSON SendMessage that declares a body over the limit, and sends none of it
    head = (f"POST / HTTP/1.1\r\nHost: x\r\n{JSON_HEADERS.format(action='SendMessage')}"
            f"Content-Length: {MAX_BODY + 1}\r\n")
    # when it is asked
    status, headers, body = _ask(gateway, head)
    # then the answer is SQS's JSON error shape with HTTP 413, and the connection is closed
    assert status == 413
    assert headers["content-type"] == "application/x-amz-json-1.0"
    assert headers["x-amzn-query-error"] == "RequestEntityTooLarge;Sender"
    assert orjson.loads(body) == {"__type": "com.amazon.coral.service#RequestEntityTooLarge",
                                  "message": f"HTTP content length exceeded {MAX_BODY} bytes."}
    assert headers["connection"] == "close"


def test_an_oversized_body_gets_sqs_413_in_the_query_protocol(gateway: Started) -> None:
    head = f"POST / HTTP/1.1\r\nHost: x\r\n{QUERY_HEADERS}Content-Length: {MAX_BODY + 1}\r\n"
    status, headers, body = _ask(gateway, head)
    assert status == 413
    assert headers["content-type"].startswith("text/xml")
    assert _query_error(body) == "RequestEntityTooLarge"
    assert b"<Type>Sender</Type>" in body


def test_an_oversized_batch_gets_batch_request_too_long(gateway: Started) -> None:
    head = (f"POST / HTTP/1.1\r\nHost: x\r\n{JSON_HEADERS.format(action='SendMessageBatch')}"
            f"Content-Length: {MAX_BODY + 1}\r\n")
    status, _, body = _ask(gateway, head)
    assert status == 400
    assert orjson.loads(body)["__type"] == "com.amazonaws.sqs#BatchRequestTooLong"
    status, _, body = _ask(gateway, f"POST /?Action=SendMessageBatch HTTP/1.1\r\nHost: x\r\n{QUERY_HEADERS}"
                                    f"Content-Length: {MAX_BODY + 1}\r\n")
    assert status == 400
    assert _query_error(body) == "AWS.SimpleQueueService.BatchRequestTooLong"


def test_a_chunked_body_over_the_limit_is_cut_off_with_413(gateway: Started) -> None:
    with closing(_connect(gateway)) as sock:
        sock.sendall(f"POST / HTTP/1.1\r\nHost: x\r\n{_signed_by_dev_key()}{QUERY_HEADERS}"
                     "Transfer-Encoding: chunked\r\n\r\n".encode())
        chunk = b"x" * 16384
        try:
            for _ in range(MAX_BODY // len(chunk) + 1):
                sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the gateway answered and closed while the rest was on its way
        status, _, body = _read_response(sock)
    assert status == 413
    assert _query_error(body) == "RequestEntityTooLarge"


@pytest.mark.parametrize(("key", "code", "query_code"), [
    (None, "MissingAuthenticationTokenException", "MissingAuthenticationToken"),
    ("AKIDNOSUCHKEY", "InvalidClientTokenId", "InvalidClientTokenId"),
])
def test_a_large_body_without_valid_credentials_is_refused_before_it_is_sent(
        gateway: Started, key: str | None, code: str, query_code: str) -> None:
    # given requests that declare a large body but send only their headers
    json_auth = "" if key is None else _signed_by(key, "content-type;host;x-amz-date;x-amz-target")
    query_auth = "" if key is None else _signed_by(key)
    json_head = (f"POST / HTTP/1.1\r\nHost: x\r\n{json_auth}{JSON_HEADERS.format(action='SendMessage')}"
                 f"Content-Length: {MAX_BODY - 1}\r\n")
    query_head = f"POST / HTTP/1.1\r\nHost: x\r\n{query_auth}{QUERY_HEADERS}Content-Length: {MAX_BODY - 1}\r\n"
    # when they are asked, then each is answered at once with 403 in its protocol: nothing waited for the body
    status, headers, body = _ask(gateway, json_head)
    assert (status, orjson.loads(body)["__type"].split("#")[1]) == (403, code)
    assert headers["connection"] == "close"
    status, _, body = _ask(gateway, query_head)
    assert (status, _query_error(body)) == (403, query_code)


def _send_partly(sock: socket.socket, data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        sock.sendall(data)


def test_unverified_bodies_over_the_budget_get_503_until_it_frees(gateway: Started) -> None:
    # given a request by an existing key that has sent 200 KiB of its 250 KiB body (its signature unverified),
    # which holds 136 KiB of the 256 KiB budget
    head = (f"POST / HTTP/1.1\r\nHost: x\r\n{_signed_by_dev_key()}{QUERY_HEADERS}"
            f"Content-Length: {250 * 1024}\r\n\r\n").encode()
    with closing(_connect(gateway)) as first:
        first.sendall(head + b"A" * 200 * 1024)
        time.sleep(0.3)
        # when a second such request has sent as much, the budget cannot hold both
        with closing(_connect(gateway)) as second:
            _send_partly(second, head + b"A" * 200 * 1024)
            status, headers, body = _read_response(second)
        # then it gets SQS's 503, a fault of the server that SDKs retry, and its connection is closed
        assert status == 503
        assert _query_error(body) == "ServiceUnavailable"
        assert b"<Type>Receiver</Type>" in body
        assert headers["connection"] == "close"
        # and once the first body is complete (and fails verification), the budget is free again
        first.sendall(b"A" * 50 * 1024)
        assert _read_response(first)[0] == 403
    status, _, body = _ask(gateway, head.decode().removesuffix("\r\n\r\n") + "\r\n", b"A" * 250 * 1024)
    assert (status, _query_error(body)) == (403, "SignatureDoesNotMatch")


def test_a_body_that_stops_arriving_gets_request_timeout(gateway: Started) -> None:
    head = f"POST / HTTP/1.1\r\nHost: x\r\n{_signed_by_dev_key()}{QUERY_HEADERS}Content-Length: 100\r\n\r\n"
    with closing(_connect(gateway)) as sock:
        sock.sendall(head.encode() + b"Action=ListQueues")
        started = time.monotonic()
        status, headers, body = _read_response(sock)
        waited = time.monotonic() - started
    assert status == 400
    assert _query_error(body) == "RequestTimeout"
    assert headers["connection"] == "close"
    print(f"body timeout {BODY_TIMEOUT} s: answered after {waited:.2f} s")


def test_headers_that_never_finish_are_cut_off(gateway: Started) -> None:
    # given connections that send part of a request line, and one that sends nothing at all
    socks = [_connect(gateway) for _ in range(5)]
    try:
        for sock in socks[:4]:
            sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        started = time.monotonic()
        deadline = started + HEADER_TIMEOUT * 10
        open_socks = set(range(len(socks)))
        # when they keep trickling a byte at a time
        while open_socks and time.monotonic() < deadline:
            for index in list(open_socks):
                try:
                    if index < 4:
                        socks[index].sendall(b"a")
                    # then the gateway closes every one of them, without an answer
                    assert socks[index].recv(1, socket.MSG_DONTWAIT) == b""
                    open_socks.discard(index)
                except BlockingIOError:
                    pass
                except (BrokenPipeError, ConnectionResetError):
                    open_socks.discard(index)
            time.sleep(0.1)
        assert not open_socks, f"{len(open_socks)} slow connections still open"
        print(f"header timeout {HEADER_TIMEOUT} s: slow connections closed after {time.monotonic() - started:.2f} s")
    finally:
        for sock in socks:
            sock.close()


def test_the_header_clock_restarts_for_each_request_on_a_kept_alive_connection(gateway: Started) -> None:
    body = b'{"QueueNamePrefix": "no-such-prefix"}'
    with closing(_connect(gateway)) as sock:
        # given a kept-alive connection that was served, then stayed idle past the header timeout
        sock.sendall(_signed_head(gateway, "ListQueues", body) + body)
        assert _read_response(sock)[0] == 200
        time.sleep(HEADER_TIMEOUT * 1.5)
        # when a whole request comes after that, it is served: its clock starts at its first byte
        sock.sendall(_signed_head(gateway, "ListQueues", body) + body)
        assert _read_response(sock)[0] == 200
        # and when the next request's headers trickle, the connection is cut off without an answer
        sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        deadline = time.monotonic() + HEADER_TIMEOUT * 10
        closed = False
        while not closed and time.monotonic() < deadline:
            try:
                sock.sendall(b"a")
                closed = sock.recv(1, socket.MSG_DONTWAIT) == b""
            except BlockingIOError:
                pass
            except (BrokenPipeError, ConnectionResetError):
                closed = True
            time.sleep(0.1)
        assert closed, "a kept-alive connection's slow headers were not cut off"


def test_connections_over_the_per_client_cap_get_503(gateway: Started) -> None:
    # given a client holding as many open connections as it may
    held = [_connect(gateway) for _ in range(PER_CLIENT)]
    try:
        time.sleep(0.2)
        # when it opens one more and asks on it
        list_queues = f"POST / HTTP/1.1\r\nHost: x\r\n{JSON_HEADERS.format(action='ListQueues')}Content-Length: 2\r\n"
        status, headers, body = _ask(gateway, list_queues, b"{}")
        # then it gets SQS's 503 in its protocol, and the connection is closed
        assert status == 503
        assert orjson.loads(body)["__type"] == "com.amazon.coral.service#ServiceUnavailable"
        assert headers["connection"] == "close"
    finally:
        for sock in held:
            sock.close()
    # and once it closes them, it is served again
    time.sleep(0.2)
    status, _, body = _ask(gateway, f"POST / HTTP/1.1\r\nHost: x\r\n{JSON_HEADERS.format(action='ListQueues')}"
                                    "Content-Length: 2\r\n", b"{}")
    assert (status, orjson.loads(body)["__type"].split("#")[1]) == (403, "MissingAuthenticationTokenException")


def test_a_websocket_upgrade_is_refused_like_any_unauthenticated_request(gateway: Started) -> None:
    # given a WebSocket handshake without credentials
    head = ("GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n")
    # when it is sent, then the answer is SQS's 403 as XML (not uvicorn's 500), and the connection is closed
    status, headers, body = _ask(gateway, head)
    assert status == 403
    assert _query_error(body) == "MissingAuthenticationToken"
    assert headers["connection"] == "close"


def _signed_head(gateway: Started, action: str, body: bytes, extra: str = "") -> bytes:
    """A signed JSON-protocol request's head (with ``extra`` header lines added after signing)."""
    request = AWSRequest(method="POST", url=f"{gateway.url}/", data=body, headers={
        "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": f"AmazonSQS.{action}"})
    SigV4Auth(Credentials("test", "test"), "sqs", "us-east-1").add_auth(request)
    lines = ["POST / HTTP/1.1", f"Host: {urlsplit(gateway.url).netloc}", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in request.headers.items() if k.lower() not in ("host", "content-length")]
    return ("\r\n".join(lines) + "\r\n" + extra + "\r\n").encode("latin-1")


@pytest.mark.parametrize("body_apart", [False, True])
def test_a_post_asking_for_an_upgrade_is_served_with_its_body_and_the_connection_goes_on(
    gateway: Started, body_apart: bool
) -> None:
    # given a signed ListQueues asking to upgrade, its body with its headers or in a later packet
    body = b'{"QueueNamePrefix": "no-such-prefix"}'
    head = _signed_head(gateway, "ListQueues", body, "Connection: Upgrade\r\nUpgrade: websocket\r\n")
    with closing(_connect(gateway)) as sock:
        send_request(sock, head, body, body_apart=body_apart, pause=0.1)
        # then it is answered as the plain request it also is: its body was read and its signature holds
        status, _, answer = _read_response(sock)
        assert (status, orjson.loads(answer)) == (200, {})
        # and the next request on the same connection is parsed and served too
        sock.sendall(_signed_head(gateway, "ListQueues", b"{}") + b"{}")
        status, _, answer = _read_response(sock)
        assert status == 200, answer


def test_legitimate_requests_are_served_within_the_limits(gateway: Started) -> None:
    for protocol in ("json", "query"):
        client = sqs_client(gateway.url, protocol)
        assert client.list_queues()["ResponseMetadata"]["HTTPStatusCode"] == 200
