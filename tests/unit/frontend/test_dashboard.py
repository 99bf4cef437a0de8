"""The dashboard's parts that need no stack: the loopback rule, logins by key pair, the recent errors' bound,
and the rates the history derives from the recorder's counters."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from ferrymq.aws.credentials import INACTIVE
from ferrymq.aws.dashboard_sessions import SessionTable
from ferrymq.clock import ManualClock
from ferrymq.errors import InvalidClientTokenId, QueueDoesNotExist
from ferrymq.frontend.auth import Authenticator
from ferrymq.frontend.dashboard import access, sessions
from ferrymq.frontend.dashboard.errors import RecentErrors
from ferrymq.frontend.dashboard.history import QueueHistory
from ferrymq.frontend.dashboard.service import Dashboard
from ferrymq.frontend.http import HttpRequest
from ferrymq.frontend.metrics.recorder import FrontendMetrics, QueueCounters
from ferrymq.settings import Settings
from tests.unit.frontend.test_authenticator import KEY, TEMPORARY, MemoryKeys


def _authenticator(keys: MemoryKeys, clock: ManualClock) -> Authenticator:
    return Authenticator(keys, clock, ttl=60.0, max_skew_seconds=300, regions=frozenset({"us-east-1"}))  # type: ignore[arg-type]


def test_a_login_needs_the_keys_own_secret_and_a_usable_permanent_key() -> None:
    clock = ManualClock()
    keys = MemoryKeys(KEY, TEMPORARY, replace(KEY, access_key_id="AKIADISABLED", status=INACTIVE))
    auth = _authenticator(keys, clock)
    assert asyncio.run(auth.verify_key_pair(KEY.access_key_id, KEY.secret_access_key)) == KEY
    for key_id, secret in ((KEY.access_key_id, "not-the-secret"), ("AKIANOSUCHKEY", KEY.secret_access_key),
                           ("AKIADISABLED", KEY.secret_access_key),
                           (TEMPORARY.access_key_id, TEMPORARY.secret_access_key)):
        with pytest.raises(InvalidClientTokenId):
            asyncio.run(auth.verify_key_pair(key_id, secret))


@pytest.mark.parametrize(("address", "loopback"), [
    ("127.0.0.1", True), ("127.8.9.10", True), ("::1", True), ("::ffff:127.0.0.1", True),
    ("10.0.0.1", False), ("192.0.2.7", False), ("::ffff:192.0.2.7", False), ("", False), (None, False),
    ("not-an-address", False),
])
def test_loopback_peers(address: str | None, loopback: bool) -> None:
    assert access.is_loopback(address) is loopback


def test_loopback_hosts_and_origins() -> None:
    assert access.host_is_loopback("localhost:9324") and access.host_is_loopback("127.0.0.1:9324")
    assert access.host_is_loopback("[::1]:9324")
    assert not access.host_is_loopback("attacker.example:9324") and not access.host_is_loopback(None)
    assert access.same_origin(None, "127.0.0.1:9324")
    assert access.same_origin("http://127.0.0.1:9324", "127.0.0.1:9324")
    assert not access.same_origin("http://attacker.example", "127.0.0.1:9324")


def _dashboard(**settings: Any) -> Dashboard:
    clock = ManualClock()
    services = SimpleNamespace(settings=Settings(data_dir=Path("/unused"), **settings), clock=clock)
    # These requests never reach a session's item: the table is never called.
    logins = sessions.Sessions(SessionTable(None, "unused"), clock)
    return Dashboard(services, _authenticator(MemoryKeys(KEY), clock), RecentErrors(), None, logins)  # type: ignore[arg-type]


def _get(dashboard: Dashboard, path: str, peer: str, host: str = "127.0.0.1:9324") -> tuple[int, bytes]:
    async def receive() -> dict[str, Any]:
        raise AssertionError("a GET has no body to read")

    request = HttpRequest("GET", path, "", {"host": host}, b"", peer=peer)
    answer = asyncio.run(dashboard.answer(request, receive))
    return answer.status, answer.body


def test_peers_other_than_loopback_are_refused_unless_the_settings_open_the_dashboard() -> None:
    closed = _dashboard()
    for path in ("/dashboard/", "/dashboard/api/queues", "/dashboard/api/login"):
        status, body = _get(closed, path, "192.0.2.7")
        assert status == 403 and b"loopback" in body
    assert _get(closed, "/dashboard/", "127.0.0.1")[0] == 200
    opened = _dashboard(dashboard_remote=True)
    status, body = _get(opened, "/dashboard/", "192.0.2.7", host="queues.example:9324")
    assert status == 200 and b"<title>FerryMQ dashboard</title>" in body
    # Opened to other hosts, the API still wants a login.
    status, body = _get(opened, "/dashboard/api/queues", "192.0.2.7", host="queues.example:9324")
    assert status == 401 and orjson.loads(body)["error"] == "LoginRequired"


def test_recent_errors_keep_the_last_ones_and_hide_unexpected_errors_text() -> None:
    errors = RecentErrors(capacity=3)
    for i in range(5):
        errors.add(float(i), "111122223333" if i % 2 else "444455556666", "GetQueueUrl", QueueDoesNotExist(),
                   f"request-{i}")
    errors.add(5.0, None, None, RuntimeError("secret detail"), "request-5")
    latest = errors.latest(None, 10)
    assert [e.request_id for e in latest] == ["request-5", "request-4", "request-3"]
    assert latest[0].code == "InternalFailure" and "secret" not in latest[0].message
    assert [e.request_id for e in errors.latest("111122223333", 10)] == ["request-3"]


def test_history_rates_come_from_the_counters_between_samples() -> None:
    clock = ManualClock(start=1000.0)
    recorder = FrontendMetrics("us-east-1", ["SendMessage"])
    history = QueueHistory(recorder, None, period=2.0, keep_seconds=6.0, wall=clock.now)
    key = ("111122223333", "us-east-1", "q")
    history.sample()
    counters = recorder.queues[key] = QueueCounters()
    counters.sent, counters.received = 10, 4
    clock.advance(2.0)
    history.sample()
    counters.sent = 16
    clock.advance(2.0)
    history.sample()
    assert [(s.sent_per_second, s.received_per_second) for s in history.of(key)] == [(5.0, 2.0), (3.0, 0.0)]
    for _ in range(5):
        clock.advance(2.0)
        history.sample()
    assert len(history.of(key)) == 3, "only keep_seconds of samples are kept"
    del recorder.queues[key]
    history.sample()
    assert history.of(key) == []
