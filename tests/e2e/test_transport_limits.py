"""Slow-loris and large-body abuse against ``ferrymq up``: the gateway's memory stays bounded, every slow
connection is closed, and legitimate boto3 clients keep being served meanwhile.

The gateway's resident memory is printed before, during (the peak of samples) and after the abuse; the test
asserts it stays within the budget for unverified bodies plus a margin, not any timing of the legitimate
requests.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.e2e.conftest import Stack
from tests.support.processes import group_members
from tests.support.sqs_clients import sqs_client
from tests.support.stack import started

HEADER_TIMEOUT = 3.0
BODY_TIMEOUT = 6.0
BUDGET = 16 * 1024 * 1024
MAX_REQUEST = 8 * 1024 * 1024
TRICKLERS = 200
NO_CREDENTIALS = 40
UNKNOWN_KEY = 40
KNOWN_KEY = 20
KNOWN_KEY_BODY = 4 * 1024 * 1024
KNOWN_KEY_SENT = 3 * 1024 * 1024


@pytest.fixture(scope="module")
def limited_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from started(tmp_path_factory.mktemp("ferrymq-limits"), {
        "FERRYMQ_HEADER_TIMEOUT_SECONDS": str(HEADER_TIMEOUT),
        "FERRYMQ_BODY_TIMEOUT_SECONDS": str(BODY_TIMEOUT),
        "FERRYMQ_UNAUTHENTICATED_BUFFER_BYTES": str(BUDGET),
        "FERRYMQ_MAX_REQUEST_BYTES": str(MAX_REQUEST),
    })


def _gateway_pid(stack: Stack) -> int:
    assert stack.process is not None
    pids = [pid for pid, argv in group_members(stack.process.pid).items() if "ferrymq.infra.gateway" in argv]
    assert len(pids) == 1, pids
    return pids[0]


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _connect(stack: Stack) -> socket.socket:
    address = urlsplit(stack.endpoint)
    return socket.create_connection((address.hostname or "", address.port or 0), timeout=10)


def _auth(key: str) -> bytes:
    now = datetime.now(UTC)
    return (
        f"X-Amz-Date: {now:%Y%m%dT%H%M%SZ}\r\nAuthorization: AWS4-HMAC-SHA256 "
        f"Credential={key}/{now:%Y%m%d}/us-east-1/sqs/aws4_request, SignedHeaders=content-type;host;x-amz-date, "
        f"Signature={'0' * 64}\r\n"
    ).encode()


def _large_head(auth: bytes, length: int) -> bytes:
    return (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded; charset=utf-8\r\n"
            + auth + f"Content-Length: {length}\r\n\r\n".encode())


def _status_of(sock: socket.socket) -> int:
    """The status of the answer on ``sock`` (0: closed without one), reading at most its head."""
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
    except (ConnectionResetError, TimeoutError):
        pass
    return int(data.split()[1]) if data.startswith(b"HTTP/1.1 ") else 0


class LegitimateTraffic(threading.Thread):
    """boto3 clients on both protocols sending, receiving and deleting in a loop until stopped."""

    def __init__(self, stack: Stack) -> None:
        super().__init__(daemon=True)
        self.clients = [sqs_client(stack.endpoint, p, access_key=stack.access_key, secret_key=stack.secret_key,
                                   region=stack.region) for p in ("json", "query")]
        self.queue_url = self.clients[0].create_queue(QueueName="limits-legit")["QueueUrl"]
        self.stopped = threading.Event()
        self.served = 0
        self.failures: list[BaseException] = []

    def run(self) -> None:
        while not self.stopped.is_set():
            for client in self.clients:
                try:
                    client.send_message(QueueUrl=self.queue_url, MessageBody="still served")
                    for message in client.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10,
                                                          WaitTimeSeconds=0).get("Messages", []):
                        client.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"])
                    self.served += 1
                except Exception as exc:  # every failure is reported by the test
                    self.failures.append(exc)


def test_slow_and_large_abuse_leaves_memory_bounded_and_clients_served(limited_stack: Stack) -> None:
    # given a stack whose gateway has settled, and legitimate clients at work
    pid = _gateway_pid(limited_stack)
    legit = LegitimateTraffic(limited_stack)
    legit.start()
    time.sleep(1.0)
    before = _rss_mib(pid)
    samples: list[float] = []
    opened: list[socket.socket] = []
    try:
        # when 200 sockets trickle their headers a byte at a time
        tricklers = [_connect(limited_stack) for _ in range(TRICKLERS)]
        opened += tricklers
        for sock in tricklers:
            sock.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        trickle_started = time.monotonic()
        # and 80 requests without valid credentials declare 8 MiB bodies and start sending them
        refused: list[socket.socket] = []
        for auth in [b""] * NO_CREDENTIALS + [_auth("AKIDNOSUCHKEY")] * UNKNOWN_KEY:
            sock = _connect(limited_stack)
            opened.append(sock)
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(_large_head(auth, MAX_REQUEST) + b"A" * 65536)
            refused.append(sock)
        # and 20 requests by an existing key with a wrong signature send 3 of their 4 MiB, then stall: together
        # almost four times the budget
        held = [_connect(limited_stack) for _ in range(KNOWN_KEY)]
        opened += held
        for sock in held:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(_large_head(_auth(limited_stack.access_key), KNOWN_KEY_BODY) + b"B" * KNOWN_KEY_SENT)
        open_tricklers = set(range(TRICKLERS))
        closed_after = 0.0
        deadline = time.monotonic() + BODY_TIMEOUT + HEADER_TIMEOUT * 3
        while time.monotonic() < deadline and (open_tricklers or not closed_after):
            for index in list(open_tricklers):
                try:
                    tricklers[index].sendall(b"a")
                    if tricklers[index].recv(1, socket.MSG_DONTWAIT) == b"":
                        open_tricklers.discard(index)
                except BlockingIOError:
                    pass
                except (BrokenPipeError, ConnectionResetError):
                    open_tricklers.discard(index)
            if not open_tricklers and not closed_after:
                closed_after = time.monotonic() - trickle_started
            samples.append(_rss_mib(pid))
            time.sleep(0.25)
        statuses = [_status_of(sock) for sock in refused]
        held_statuses = [_status_of(sock) for sock in held]
    finally:
        for sock in opened:
            sock.close()
    time.sleep(2.0)
    after = _rss_mib(pid)
    legit.stopped.set()
    legit.join(30)
    during = max(samples)
    print(f"\ngateway RSS: before {before:.1f} MiB, during {during:.1f} MiB (peak), after {after:.1f} MiB; "
          f"{TRICKLERS} trickling sockets closed after {closed_after:.1f} s (header timeout {HEADER_TIMEOUT} s); "
          f"{legit.served} legitimate rounds served; known-key bodies answered {sorted(set(held_statuses))}")
    # then every trickling socket was closed, and every body without valid credentials was refused with 403
    assert not open_tricklers
    assert statuses == [403] * (NO_CREDENTIALS + UNKNOWN_KEY)
    # and the known key's stalled bodies got 503 (over the budget) or, once the budget held them for the body
    # timeout, RequestTimeout (400)
    assert set(held_statuses) == {400, 503}
    # and the gateway held no more than the budget for them, plus a margin for its own working set
    assert during < before + BUDGET / 2**20 + 48
    # and the legitimate clients were served throughout, without a single failure
    assert legit.failures == []
    assert legit.served > 0


def test_the_stack_serves_https_to_clients_that_trust_its_certificate(tls_stack: Stack) -> None:
    # given `ferrymq up` with FERRYMQ_TLS=1 and no certificate of its own
    stack = tls_stack
    cert = stack.data_dir / "tls" / "cert.pem"
    # then it serves HTTPS with a private, self-signed certificate in its data directory
    assert stack.endpoint.startswith("https://")
    assert cert.stat().st_mode & 0o077 == 0
    assert (stack.data_dir / "tls" / "key.pem").stat().st_mode & 0o077 == 0
    # and boto3 trusting that certificate works on both protocols
    for protocol in ("json", "query"):
        client: Any = sqs_client(stack.endpoint, protocol, access_key=stack.access_key,
                                 secret_key=stack.secret_key, region=stack.region, verify=str(cert))
        url = client.create_queue(QueueName=f"tls-{protocol}")["QueueUrl"]
        assert url.startswith("https://")
        client.send_message(QueueUrl=url, MessageBody="over tls")
        assert client.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "over tls"
    # and a client that does not trust it is refused by its own TLS check
    untrusting: Any = sqs_client(stack.endpoint, "json", access_key=stack.access_key,
                                 secret_key=stack.secret_key, region=stack.region)
    with pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED"):
        untrusting.list_queues()
