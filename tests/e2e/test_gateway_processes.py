"""A stack whose gateway is two processes on one port (``FERRYMQ_GATEWAY_PROCESSES=2``, ``SO_REUSEPORT``), used as
a client uses it: connections spread over both, and whichever process answers, ``/metrics`` counts the port's
requests and a dashboard session opened through one works, and ends, through both."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from ferrymq.frontend.siblings import Counts
from tests.e2e.conftest import Stack
from tests.e2e.test_metrics import of_queue, scrape
from tests.support.processes import group_members
from tests.support.sqs_clients import sqs_client
from tests.support.stack import started
from tests.support.waiting import wait_for

CONNECTIONS = 20
"""Fresh connections per check: all of them going to one of two processes has odds of one in half a million."""


@pytest.fixture(scope="module")
def two_gateways(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from started(Path(tmp_path_factory.mktemp("two-gateways")), {"FERRYMQ_GATEWAY_PROCESSES": "2"})


def _gateway_pids(stack: Stack) -> list[int]:
    assert stack.process is not None
    return sorted(pid for pid, argv in group_members(stack.process.pid).items() if "ferrymq.infra.gateway" in argv)


def _fresh_client(stack: Stack, **config: Any) -> Any:
    """An SQS client of its own, so its first call opens a connection of its own."""
    return sqs_client(stack.endpoint, "json", access_key=stack.access_key, secret_key=stack.secret_key,
                      region=stack.region, **config)


def test_up_starts_two_gateway_processes_on_one_port_and_says_so(two_gateways: Stack) -> None:
    assert len(_gateway_pids(two_gateways)) == 2
    assert "gateway          2 processes sharing the port" in two_gateways.log_path.read_text()


def test_connections_spread_over_both_and_a_scrape_of_either_counts_every_send(two_gateways: Stack) -> None:
    # given a queue, and one message sent over each of many fresh connections
    name = f"spread-{uuid.uuid4().hex[:8]}"
    url = _fresh_client(two_gateways).create_queue(QueueName=name)["QueueUrl"]
    for i in range(CONNECTIONS):
        _fresh_client(two_gateways).send_message(QueueUrl=url, MessageBody=f"m{i}")
    # then both processes answered some of them, as the counts each writes for the other say (within a period)
    pids = _gateway_pids(two_gateways)
    assert {p.stem for p in (two_gateways.data_dir / "gateways").glob("*.counters")} == {str(pid) for pid in pids}
    wait_for(lambda: all(_sent_in_file(two_gateways, pid, name) > 0 for pid in pids), timeout=10)
    # and every scrape, over a fresh connection to whichever process, counts all of them within a period or two
    def every_scrape_counts_all() -> bool:
        return all(scrape(f"{two_gateways.endpoint}/metrics").get(("ferrymq_queue_messages_sent_total",
                                                                     of_queue(name))) == CONNECTIONS
                   for _ in range(6))

    wait_for(every_scrape_counts_all, timeout=15)


def _gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie not yet reaped has closed its sockets already)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _sent_in_file(stack: Stack, pid: int, name: str) -> int:
    path = stack.data_dir / "gateways" / f"{pid}.counters"
    sent = Counts.decode(path.read_bytes()).queues.get(("000000000000", "us-east-1", name))
    return sent[0][0] if sent is not None else 0


def _dashboard_call(stack: Stack, cookie: str, path: str) -> int:
    """A dashboard API call over a connection of its own (a new requests.Session each time)."""
    with requests.Session() as http:
        http.cookies.set("ferrymq_dashboard", cookie, path="/dashboard")
        return http.get(f"{stack.endpoint}/dashboard/api/{path}", timeout=30).status_code


def test_a_dashboard_session_opened_through_one_process_works_and_ends_through_both(two_gateways: Stack) -> None:
    # given a login over one connection
    login = requests.post(f"{two_gateways.endpoint}/dashboard/api/login", timeout=30,
                          json={"accessKeyId": two_gateways.access_key, "secretAccessKey": two_gateways.secret_key})
    assert login.status_code == 200
    cookie, csrf = login.cookies["ferrymq_dashboard"], login.json()["csrfToken"]
    # then the session opens the API over every fresh connection, whichever process takes it
    assert [_dashboard_call(two_gateways, cookie, "session") for _ in range(CONNECTIONS)] == [200] * CONNECTIONS
    # and once logged out over one connection, it opens nothing over any
    with requests.Session() as http:
        http.cookies.set("ferrymq_dashboard", cookie, path="/dashboard")
        assert http.post(f"{two_gateways.endpoint}/dashboard/api/logout", json={}, timeout=30,
                         headers={"X-CSRF-Token": csrf}).status_code == 200
    assert [_dashboard_call(two_gateways, cookie, "queues") for _ in range(CONNECTIONS)] == [401] * CONNECTIONS


def test_a_gateway_process_killed_is_started_again_while_the_other_serves_the_port(two_gateways: Stack) -> None:
    # given the two gateway processes, when one is killed with SIGKILL
    victim, survivor = _gateway_pids(two_gateways)
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: _gone(victim), timeout=10)
    # then every request over a fresh connection meanwhile is answered (new connections go to the one listening),
    # by an SDK that retries as SDKs do: a connection the kernel handed the victim as it died is reset with it
    client = _fresh_client(two_gateways, retries={"total_max_attempts": 3, "mode": "standard"})
    url = client.create_queue(QueueName=f"kill-{uuid.uuid4().hex[:8]}")["QueueUrl"]
    for i in range(CONNECTIONS):
        _fresh_client(two_gateways, retries={"total_max_attempts": 3, "mode": "standard"}).send_message(
            QueueUrl=url, MessageBody=f"m{i}")
    # and `up` starts a new process in its place, and says so
    wait_for(lambda: len(_gateway_pids(two_gateways)) == 2 and victim not in _gateway_pids(two_gateways), timeout=30)
    assert survivor in _gateway_pids(two_gateways)
    wait_for(lambda: "is back" in two_gateways.log_path.read_text(), timeout=30)
    # and nothing sent was lost
    got = set()
    for _ in range(10):
        for m in client.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", []):
            got.add(m["Body"])
    assert got == {f"m{i}" for i in range(CONNECTIONS)}


def test_over_https_every_process_serves_the_certificate_clients_are_told_to_trust(tmp_path: Path) -> None:
    # given a stack serving HTTPS with its self-signed certificate from two gateway processes
    for stack in started(tmp_path / "tls-gateways", {"FERRYMQ_GATEWAY_PROCESSES": "2", "FERRYMQ_TLS": "1"}):
        assert len(_gateway_pids(stack)) == 2 and stack.endpoint.startswith("https://")
        trusted = str(stack.data_dir / "tls" / "cert.pem")
        # then a client trusting that one certificate gets through on every fresh connection, whichever process
        for _ in range(CONNECTIONS):
            client = sqs_client(stack.endpoint, "json", access_key=stack.access_key, secret_key=stack.secret_key,
                                region=stack.region, verify=trusted)
            assert client.list_queues()["ResponseMetadata"]["HTTPStatusCode"] == 200
