"""The gateway's protocol answers small requests read whole without ASGI (infra/http_protocol.py), and they get
the same answer, the same headers and the same connection handling as requests that go the ASGI way.

uvicorn runs in a thread of the test with the gateway's protocol class and a front end that answers SQS actions
as SQS would (rendered by ferrymq.protocol) and anything else with what it saw, naming the way each request came;
clients are raw sockets and boto3, over real sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import orjson
import pytest
import uvicorn
from botocore.exceptions import ClientError

from ferrymq.errors import QueueDoesNotExist, RequestTimeout, SqsError
from ferrymq.frontend.asgi import Gateway
from ferrymq.frontend.http import HttpRequest, headers_of
from ferrymq.infra.asgi_serving import bind_socket, socket_url
from ferrymq.infra.http_protocol import guarded_protocol
from ferrymq.protocol.requests import parse_request, response_protocol
from ferrymq.protocol.responses import HttpResponse, render_error, render_result
from tests.support.logging_state import restored_logging
from tests.support.split_send import send_request
from tests.support.sqs_clients import sqs_client

LIMIT = 1024
BODY_TIMEOUT = 0.5
JSON = "application/x-amz-json-1.0"


class Recorder:
    """The front end: answers JSON naming the way the request came, its path, body and some headers."""

    def __init__(self) -> None:
        self.ways: list[str] = []
        self.fail_directly = False
        # Set, a direct answer is held until ``release`` is (``entered`` says one is being made).
        self.hold = False
        self.entered = threading.Event()
        self.release = threading.Event()

    def answer(self, way: str, request: HttpRequest) -> HttpResponse:
        self.ways.append(way)
        if "authorization" in request.headers:  # an SDK's request
            parsed = parse_request(request.method, request.path, request.query_string, request.headers,
                                   request.body)
            protocol = response_protocol(parsed.protocol, request.headers)
            if parsed.action == "GetQueueUrl":
                return render_error(protocol, QueueDoesNotExist(), "r-1")
            return render_result(protocol, parsed.action, {"QueueUrls": [f"http://x/000000000000/{way}"]}, "r-2")
        seen = {"way": way, "path": request.path, "query": request.query_string, "body": request.body.decode(),
                "peer": request.peer, "scheme": request.scheme, "x-twice": request.headers.get("x-twice")}
        return HttpResponse(200, [("Content-Type", JSON), ("x-amzn-RequestId", "r-3")], orjson.dumps(seen))

    async def asgi(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        request = HttpRequest(scope["method"], scope["raw_path"].decode(), scope["query_string"].decode(),
                              headers_of(scope["headers"]), body, scope["scheme"], scope["client"][0])
        response = self.answer("asgi", request)
        headers = [(k.encode(), v.encode()) for k, v in response.headers]
        headers.append((b"content-length", str(len(response.body)).encode()))
        await send({"type": "http.response.start", "status": response.status, "headers": headers})
        await send({"type": "http.response.body", "body": response.body})

    async def answer_read(self, request: HttpRequest) -> HttpResponse:
        await asyncio.sleep(0)
        self.entered.set()
        while self.hold and not self.release.is_set():
            await asyncio.sleep(0.01)
        if self.fail_directly:
            raise RuntimeError("a bug")
        return self.answer("direct", request)


class Served:
    def __init__(self, url: str, recorder: Recorder, server: uvicorn.Server) -> None:
        self.url, self.recorder, self.server = url, recorder, server
        host, _, port = url.rpartition("/")[2].partition(":")
        self.address = (host, int(port))


def _timed_out(head: HttpRequest) -> HttpResponse:
    error: SqsError = RequestTimeout()
    return render_error("json", error, "r-timeout")


@pytest.fixture
def served() -> Iterator[Served]:
    with _serving(direct=True) as served:
        yield served


@pytest.fixture
def served_asgi() -> Iterator[Served]:
    """The same, without the direct way: every request goes through ASGI."""
    with _serving(direct=False) as served:
        yield served


@contextlib.contextmanager
def _serving(direct: bool, keep_alive: float = 5.0) -> Iterator[Served]:
    recorder = Recorder()
    app = recorder.asgi  # one bound method: the protocol answers directly only for the app uvicorn serves
    gateway = Gateway(app, recorder.answer_read, lambda path: not path.startswith("/dashboard"), LIMIT,
                      BODY_TIMEOUT, _timed_out)
    # As the gateway configures uvicorn (infra/asgi_serving.py); uvicorn's configuring of its loggers is undone after.
    protocol = guarded_protocol(10.0, 100, gateway if direct else None)
    with restored_logging():
        config = uvicorn.Config(app, loop="uvloop", http=protocol, ws="none",
                                lifespan="off", access_log=False, log_config=None, log_level="warning",
                                server_header=False, proxy_headers=False, interface="asgi3",
                                timeout_keep_alive=keep_alive)  # type: ignore[arg-type]
        server = uvicorn.Server(config)
        sock = bind_socket("127.0.0.1", 0)
        thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + 10
            while not server.started and time.monotonic() < deadline:
                time.sleep(0.01)
            assert server.started
            yield Served(socket_url(sock), recorder, server)
        finally:
            server.should_exit = True
            thread.join(10)
            sock.close()


def _request(path: str = "/", body: bytes = b'{"a": 1}', extra: str = "", version: str = "1.1",
             method: str = "POST") -> tuple[bytes, bytes]:
    head = (f"{method} {path} HTTP/{version}\r\nHost: x\r\nContent-Type: {JSON}\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n")
    return head.encode(), body


def _read_response(sock: socket.socket, buffered: bytearray) -> tuple[int, list[tuple[str, str]], bytes]:
    """One response from ``sock`` (bytes beyond it stay in ``buffered``), past any ``100 Continue``; status 0 if
    the server closed first."""
    while b"\r\n\r\n" not in buffered:
        chunk = sock.recv(65536)
        if not chunk:
            return 0, [], bytes(buffered)
        buffered += chunk
    head, _, rest = bytes(buffered).partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = [(name, value.strip()) for name, _, value in (line.partition(":") for line in lines[1:])]
    length = int(dict(headers).get("content-length", "0"))
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    buffered[:] = rest[length:]
    status = int(lines[0].split()[1])
    if status == 100:
        return _read_response(sock, buffered)
    return status, headers, rest[:length]


def _closed(sock: socket.socket) -> bool:
    sock.settimeout(5)
    with contextlib.suppress(ConnectionResetError):
        return sock.recv(1) == b""
    return True


def _connect(served: Served) -> socket.socket:
    return socket.create_connection(served.address, timeout=10)


def _exchange(served: Served, requests: list[tuple[bytes, bytes]], *, body_apart: bool = False,
              ) -> list[tuple[int, list[tuple[str, str]], bytes]]:
    """Send each request on one kept-alive connection (its body in a later packet with ``body_apart``) and read
    its answer."""
    answers = []
    with closing(_connect(served)) as sock:
        buffered = bytearray()
        for head, body in requests:
            send_request(sock, head, body, body_apart=body_apart)
            answers.append(_read_response(sock, buffered))
    return answers


@pytest.mark.parametrize("body_apart", [False, True])
def test_a_small_request_is_answered_directly_as_asgi_answers_it(served: Served, served_asgi: Served,
                                                                 body_apart: bool) -> None:
    # given small POSTs, with repeated headers and a query string, their bodies with the headers or apart
    requests = [_request("/000000000000/q?Action=X", extra="X-Twice: 1\r\nX-Twice: 2\r\n")] * 2
    # when they are sent on a kept-alive connection to the gateway, and to one that answers through ASGI only
    direct = _exchange(served, requests, body_apart=body_apart)
    asgi = _exchange(served_asgi, requests, body_apart=body_apart)
    # then the first answers them directly, and the answers are the same (the way they came aside)
    assert served.recorder.ways == ["direct", "direct"] and served_asgi.recorder.ways == ["asgi", "asgi"]
    for (status, headers, answer), (asgi_status, asgi_headers, asgi_answer) in zip(direct, asgi, strict=True):
        assert status == asgi_status == 200
        seen, asgi_seen = orjson.loads(answer), orjson.loads(asgi_answer)
        assert (seen.pop("way"), asgi_seen.pop("way")) == ("direct", "asgi")
        assert seen == asgi_seen == {"path": "/000000000000/q", "query": "Action=X", "body": '{"a": 1}',
                                     "peer": "127.0.0.1", "scheme": "http", "x-twice": "1,2"}
        # with uvicorn's headers, in its order and case: its date first, then ours lower-cased, then the length
        assert [name for name, _ in headers] == [name for name, _ in asgi_headers] == [
            "date", "content-type", "x-amzn-requestid", "content-length"]
        assert dict(headers)["content-length"] == str(len(answer))


def test_a_body_that_does_not_arrive_in_time_gets_request_timeout_and_the_connection_closes(
        served: Served) -> None:
    # given a request whose body stops half way
    head, body = _request()
    with closing(_connect(served)) as sock:
        sock.sendall(head + body[:3])
        # then after the body timeout it is answered RequestTimeout, and the connection is closed
        status, headers, answer = _read_response(sock, bytearray())
        assert status == 400
        assert orjson.loads(answer)["__type"].endswith("RequestTimeout")
        assert ("connection", "close") in headers
        assert _closed(sock)
    assert served.recorder.ways == []


@pytest.mark.parametrize("kind", ["over the limit", "dashboard", "get", "expect 100-continue", "chunked"])
def test_requests_the_direct_way_does_not_take_go_the_asgi_way(served: Served, kind: str) -> None:
    head, body = {
        "over the limit": _request(body=b"x" * (LIMIT + 1)),
        "dashboard": _request("/dashboard/login"),
        "get": _request(method="GET", body=b""),
        "expect 100-continue": _request(extra="Expect: 100-continue\r\n"),
        "chunked": (f"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: {JSON}\r\nTransfer-Encoding: chunked\r\n\r\n"
                    .encode(), b"2\r\nab\r\n0\r\n\r\n"),
    }[kind]
    with closing(_connect(served)) as sock:
        sock.sendall(head + body)
        status, _, answer = _read_response(sock, bytearray())
    assert status == 200, answer
    assert served.recorder.ways == ["asgi"]


def test_pipelined_requests_are_answered_in_order(served: Served) -> None:
    # given three requests in one packet
    requests = [_request(body=f'{{"n": {n}}}'.encode()) for n in range(3)]
    with closing(_connect(served)) as sock:
        sock.sendall(b"".join(head + body for head, body in requests))
        buffered = bytearray()
        answers = [_read_response(sock, buffered) for _ in requests]
    # then each is answered once, in order (the first directly, those queued behind it the ASGI way)
    assert [orjson.loads(answer)["body"] for _, _, answer in answers] == [f'{{"n": {n}}}' for n in range(3)]
    assert served.recorder.ways[0] == "direct" and len(served.recorder.ways) == 3


@pytest.mark.parametrize("extra, version", [("Connection: close\r\n", "1.1"), ("", "1.0")])
def test_a_connection_not_kept_alive_is_closed_after_its_answer(served: Served, extra: str, version: str) -> None:
    head, body = _request(extra=extra, version=version)
    with closing(_connect(served)) as sock:
        sock.sendall(head + body)
        status, headers, _ = _read_response(sock, bytearray())
        assert status == 200
        assert ("connection", "close") in headers
        assert _closed(sock)
    assert served.recorder.ways == ["direct"]


def test_a_front_end_that_raises_gets_uvicorn_s_500_and_the_connection_closes(served: Served) -> None:
    served.recorder.fail_directly = True
    head, body = _request()
    with closing(_connect(served)) as sock:
        sock.sendall(head + body)
        status, _, answer = _read_response(sock, bytearray())
        assert (status, answer) == (500, b"Internal Server Error")
        assert _closed(sock)


def _until(condition: Any, bound: float = 10.0) -> bool:
    """Whether ``condition()`` came true within ``bound`` seconds (a bound, not a timing)."""
    deadline = time.monotonic() + bound
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _accepts(served: Served) -> bool:
    try:
        socket.create_connection(served.address, timeout=1).close()
    except OSError:
        return False
    return True


def test_a_server_stopping_while_a_direct_answer_is_made_delivers_it_and_then_closes(served: Served) -> None:
    # given a direct answer under way on a kept-alive connection
    served.recorder.hold = True
    head, body = _request()
    with closing(_connect(served)) as sock:
        sock.sendall(head + body)
        assert served.recorder.entered.wait(10)
        # when the server is told to stop (it takes no new connection), and the answer is then made
        served.server.should_exit = True
        assert _until(lambda: not _accepts(served))
        served.recorder.release.set()
        # then the client gets it, marked as the connection's last, and the connection closes
        status, headers, _ = _read_response(sock, bytearray())
        assert status == 200 and ("connection", "close") in headers
        assert _closed(sock)
    assert served.recorder.ways == ["direct"]


def test_a_client_gone_while_its_direct_answer_is_made_leaves_the_gateway_serving(served: Served) -> None:
    # given a client that sends a request and goes before its direct answer is made
    served.recorder.hold = True
    head, body = _request()
    with closing(_connect(served)) as sock:
        sock.sendall(head + body)
        assert served.recorder.entered.wait(10)
    served.recorder.release.set()
    assert _until(lambda: served.recorder.ways == ["direct"])
    # then the next client is answered directly as ever
    served.recorder.hold = False
    assert [status for status, _, _ in _exchange(served, [_request()])] == [200]
    assert served.recorder.ways == ["direct", "direct"]


@pytest.mark.parametrize("protocol", ["json", "query"])
def test_boto3_is_answered_directly_on_both_protocols(served: Served, protocol: str) -> None:
    # given boto3 on a kept-alive connection
    client = sqs_client(served.url, protocol)
    # when it lists queues and asks for a missing one
    listed = client.list_queues()
    with pytest.raises(ClientError) as missing:
        client.get_queue_url(QueueName="nope")
    # then it reads both answers, each request served directly (boto3 sends a body apart from its headers)
    assert listed["QueueUrls"] == ["http://x/000000000000/direct"]
    assert missing.value.response["Error"]["Code"] == "AWS.SimpleQueueService.NonExistentQueue"
    assert listed["ResponseMetadata"]["HTTPHeaders"]["x-amzn-requestid"] == "r-2"
    assert served.recorder.ways == ["direct", "direct"]


KEEP_ALIVE = 2.0


def test_an_idle_kept_alive_connection_is_closed_after_the_keep_alive_timeout() -> None:
    with _serving(direct=True, keep_alive=KEEP_ALIVE) as served, closing(_connect(served)) as sock:
        # given a connection that was answered and then sent nothing
        assert _exchange_on(sock, _request())[0] == 200
        # then the gateway closes it
        sock.settimeout(KEEP_ALIVE * 10)
        assert sock.recv(1) == b""


def test_the_keep_alive_clock_restarts_with_each_answer() -> None:
    with _serving(direct=True, keep_alive=KEEP_ALIVE) as served, closing(_connect(served)) as sock:
        # given a connection answered, then asked again half a timeout later
        assert _exchange_on(sock, _request())[0] == 200
        time.sleep(KEEP_ALIVE / 2)
        assert _exchange_on(sock, _request())[0] == 200
        # when the next request comes more than a timeout after the first answer, but less after the second
        time.sleep(KEEP_ALIVE * 3 / 4)
        # then it is answered on the same connection
        assert _exchange_on(sock, _request())[0] == 200


def _exchange_on(sock: socket.socket, request: tuple[bytes, bytes]) -> tuple[int, list[tuple[str, str]], bytes]:
    sock.sendall(request[0] + request[1])
    return _read_response(sock, bytearray())
