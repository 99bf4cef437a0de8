"""A push target under the default destination policy never reaches a loopback receiver, whatever the URL says or
the name resolves to at delivery (DNS rebinding); with loopback allowed it connects to the address it checked,
sending the URL's Host header."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import socket
import ssl
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import urllib3

from ferrymq.frontend.push.targets import HttpTarget
from ferrymq.infra import tls
from ferrymq.push import destinations
from ferrymq.push.destinations import DestinationPolicy


@dataclass
class Receiver:
    port: int
    hosts: list[str] = field(default_factory=list)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with _serving(None) as got:
        yield got


@contextlib.contextmanager
def _serving(context: ssl.SSLContext | None) -> Iterator[Receiver]:
    got = Receiver(0)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            got.hosts.append(str(self.headers.get("Host")))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if context is not None:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    got.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield got
    finally:
        server.shutdown()
        server.server_close()


def _resolving_to(address: str) -> Any:
    def resolver(host: str, port: int, **_: Any) -> list[tuple[Any, ...]]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]
    return resolver


def _deliver(url: str, policy: DestinationPolicy, resolver: Any = socket.getaddrinfo,
             ca_certs: Path | None = None) -> Any:
    pool = urllib3.PoolManager(ca_certs=str(ca_certs) if ca_certs else None)
    target = HttpTarget(url, "m", "secret", pool, ThreadPoolExecutor(1), policy=policy, resolver=resolver)
    try:
        return asyncio.run(target.deliver(b'{"Records": []}', 5.0))
    finally:
        target.close()
        pool.clear()


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::ffff:127.0.0.1]", "2130706433", "0x7f.1", "127.1"])
def test_the_default_policy_delivers_nothing_to_loopback(receiver: Receiver, host: str) -> None:
    delivery = _deliver(f"http://{host}:{receiver.port}/hook", DestinationPolicy())
    assert not delivery.ok
    assert "loopback" in delivery.detail or "four decimal numbers" in delivery.detail
    assert receiver.hosts == []


def test_a_name_rebound_to_loopback_after_the_create_check_gets_nothing(receiver: Receiver) -> None:
    url = f"http://hooks.rebind.test:{receiver.port}/hook"
    where = destinations.parse(url)
    # At create the name answered a public address and passed ...
    assert destinations.resolve(where, DestinationPolicy(), _resolving_to("93.184.216.34"))
    # ... at delivery it answers loopback: the delivery checks again and connects nowhere.
    delivery = _deliver(url, DestinationPolicy(), _resolving_to("127.0.0.1"))
    assert (delivery.ok, receiver.hosts) == (False, [])
    assert "resolves to 127.0.0.1, a loopback address" in delivery.detail


def test_with_loopback_allowed_the_checked_address_is_the_one_connected_to(receiver: Receiver) -> None:
    # hooks.rebind.test is not in DNS: the POST reaching the receiver went to the address the policy checked,
    # not to a second resolution by the HTTP client, and still names the URL's host.
    allowed = DestinationPolicy.of("127.0.0.0/8")
    delivery = _deliver(f"http://hooks.rebind.test:{receiver.port}/hook", allowed, _resolving_to("127.0.0.1"))
    assert delivery.ok, delivery.detail
    assert receiver.hosts == [f"hooks.rebind.test:{receiver.port}"]


def test_a_name_with_one_bad_address_among_several_gets_nothing(receiver: Receiver) -> None:
    def several(host: str, port: int, **_: Any) -> list[tuple[Any, ...]]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in ("127.0.0.1", "10.0.0.7")]

    delivery = _deliver(f"http://hooks.rebind.test:{receiver.port}/", DestinationPolicy.of("127.0.0.0/8"), several)
    assert (delivery.ok, receiver.hosts) == (False, [])
    assert "10.0.0.7" in delivery.detail


@pytest.mark.parametrize(("certified", "ok"), [("hooks.rebind.test", True), ("elsewhere.test", False)])
def test_https_names_the_urls_host_for_sni_and_the_certificate(tmp_path: Path, certified: str, ok: bool) -> None:
    cert, key = tls.ensure_self_signed(tmp_path, [certified])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    names: list[str | None] = []
    context.sni_callback = lambda _sock, name, _context: names.append(name)  # type: ignore[assignment,func-returns-value]
    with _serving(context) as receiver:
        delivery = _deliver(f"https://hooks.rebind.test:{receiver.port}/hook", DestinationPolicy.of("127.0.0.0/8"),
                            _resolving_to("127.0.0.1"), ca_certs=cert)
    assert delivery.ok is ok, delivery.detail
    assert names[:1] == ["hooks.rebind.test"]
    assert receiver.hosts == ([f"hooks.rebind.test:{receiver.port}"] if ok else [])
