"""``--host auto`` (the image's FERRYMQ_WORKER_HOST): the address a worker listens on and publishes."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from ferrymq.storage import __main__ as entry


class Probe:
    """A UDP socket whose connect only picks a route (no packet is sent): its name is the route's address."""

    def __init__(self, address: str | None) -> None:
        self.address = address

    def __call__(self, *args: Any) -> Probe:
        return self

    def __enter__(self) -> Probe:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def connect(self, target: tuple[str, int]) -> None:
        if self.address is None:
            raise OSError("Network is unreachable")

    def getsockname(self) -> tuple[str, int]:
        assert self.address is not None
        return self.address, 40000


def test_the_host_names_address_when_it_is_not_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket, "gethostbyname", lambda name: "10.0.3.17")
    assert entry.own_address() == "10.0.3.17"


def test_a_loopback_host_name_gives_the_address_of_the_route_out(monkeypatch: pytest.MonkeyPatch) -> None:
    # Debian and Ubuntu map the host name to 127.0.1.1 in /etc/hosts.
    monkeypatch.setattr(socket, "gethostbyname", lambda name: "127.0.1.1")
    monkeypatch.setattr(socket, "socket", Probe("10.0.3.18"))
    assert entry.own_address() == "10.0.3.18"


def test_no_name_and_no_route_leave_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    def unknown(name: str) -> str:
        raise socket.gaierror("Name or service not known")

    monkeypatch.setattr(socket, "gethostbyname", unknown)
    monkeypatch.setattr(socket, "socket", Probe(None))
    assert entry.own_address() == "127.0.0.1"
