"""The dashboard's sessions against DynamoDB's API (the stand-in): what the cookie and the table hold, expiry,
the bound per key, logout, and cookies an attacker makes up."""

from __future__ import annotations

import asyncio
import base64
import uuid

import pytest

from ferrymq.aws import session
from ferrymq.aws.dashboard_sessions import SessionTable
from ferrymq.clock import ManualClock
from ferrymq.frontend.dashboard import sessions
from ferrymq.settings import Settings

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.fixture
def table(aws_settings: Settings) -> SessionTable:
    return SessionTable(session.client("dynamodb", aws_settings), aws_settings.dashboard_sessions_table)


def _key_id() -> str:
    return f"AKIA{uuid.uuid4().hex[:16].upper()}"


COOKIE_KEY = sessions.cookie_key_of("the stack's cluster secret")


def _sessions(table: SessionTable, clock: ManualClock, **kwargs: int) -> sessions.Sessions:
    """Sessions as one process of a stack holds them: every process derives the same cookie key."""
    return sessions.Sessions(table, clock, cookie_key=COOKIE_KEY, **kwargs)


def test_a_session_opened_by_one_process_is_known_to_another_and_a_logout_ends_it_for_both(
        table: SessionTable) -> None:
    # given two front-end processes' session objects over the same table
    clock = ManualClock(1_800_000_000.0)
    one, other = _sessions(table, clock), _sessions(table, clock)
    key_id = _key_id()
    # when one opens a session
    cookie, opened = asyncio.run(one.open(key_id, SECRET))
    # then the other finds it by the cookie, with its CSRF token and the proof of the secret
    found = asyncio.run(other.get(cookie))
    assert found is not None and found.access_key_id == key_id and found.csrf_token == opened.csrf_token
    assert found.proves(SECRET) and not found.proves(SECRET + "x") and not found.proves("")
    assert sessions.csrf_matches(found, opened.csrf_token) and not sessions.csrf_matches(found, None)
    # and when the other logs it out, the first no longer knows it
    asyncio.run(other.close(cookie))
    assert asyncio.run(one.get(cookie)) is None


def test_the_table_holds_neither_the_session_id_nor_the_secret(table: SessionTable) -> None:
    clock = ManualClock(1_800_000_000.0)
    key_id = _key_id()
    cookie, _ = asyncio.run(_sessions(table, clock).open(key_id, SECRET))
    token = cookie.split(".")[1]
    [stored] = table.of_key(key_id)
    written = repr(stored)
    assert token not in written and SECRET not in written
    assert stored.expires_at == 1_800_000_000 + sessions.SESSION_SECONDS


def test_a_session_expires(table: SessionTable) -> None:
    clock = ManualClock(1_800_000_000.0)
    logins = _sessions(table, clock, lifetime=60)
    cookie, _ = asyncio.run(logins.open(_key_id(), SECRET))
    clock.advance(59.0)
    assert asyncio.run(logins.get(cookie)) is not None
    clock.advance(1.0)
    assert asyncio.run(logins.get(cookie)) is None


def test_a_key_holds_a_bounded_number_of_sessions_and_the_oldest_go_first(table: SessionTable) -> None:
    clock = ManualClock(1_800_000_000.0)
    logins = _sessions(table, clock, per_key=3)
    key_id = _key_id()
    cookies = []
    for _ in range(5):
        cookies.append(asyncio.run(logins.open(key_id, SECRET))[0])
        clock.advance(1.0)
    assert [asyncio.run(logins.get(c)) is not None for c in cookies] == [False, False, True, True, True]
    assert len(table.of_key(key_id)) == 3
    # an expired session is removed at the key's next login
    clock.advance(sessions.SESSION_SECONDS)
    asyncio.run(logins.open(key_id, SECRET))
    assert len(table.of_key(key_id)) == 1


class _Untouchable:
    """A DynamoDB client that fails the test if it is called at all."""

    def __getattr__(self, name: str) -> object:
        raise AssertionError(f"the table was asked ({name}) about a cookie this stack never signed")


def _changed(text: str) -> str:
    """``text`` with its last character replaced by another."""
    return text[:-1] + ("B" if text[-1] == "A" else "A")


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize("cookie", [
    None, "", ".", "..", "no-dot", f"{_b64('AKIAEXAMPLE')}.", ".token", "!!!.token.mac",
    f"{_b64('AKIAEXAMPLE')}.made-up.mac", f"{_b64('')}.token.mac", "x" * 10_000, "\udcff.token.mac",
    f"{_b64('a' * 2000)}.token.mac",
])
def test_a_made_up_cookie_names_no_session_and_costs_no_table_read(cookie: str | None) -> None:
    untouchable = sessions.Sessions(SessionTable(_Untouchable(), "unused"), ManualClock(1_800_000_000.0),
                                    cookie_key=COOKIE_KEY)
    assert asyncio.run(untouchable.get(cookie)) is None
    asyncio.run(untouchable.close(cookie))  # nothing to end, nothing raised, nothing asked


def test_a_cookie_this_stack_did_not_sign_costs_no_table_read(table: SessionTable) -> None:
    # given a real session's cookie
    clock = ManualClock(1_800_000_000.0)
    cookie, _ = asyncio.run(_sessions(table, clock).open(_key_id(), SECRET))
    encoded, token, mac = cookie.split(".")
    untouchable = sessions.Sessions(SessionTable(_Untouchable(), "unused"), clock, cookie_key=COOKIE_KEY)
    # when it is sent with another key's id, or its token or signature changed, or signed by another stack
    other_stack = sessions.Sessions(table, clock, cookie_key=sessions.cookie_key_of("another secret"))
    forged = [f"{_b64(_key_id())}.{token}.{mac}", f"{encoded}.{_changed(token)}.{mac}",
              f"{encoded}.{token}.{_changed(mac)}", f"{encoded}.{token}", f"{encoded}.{token}.{mac}.{mac}",
              f"{encoded}.{token}.{mac}é"]
    # then none names a session, and none was looked up
    for made_up in forged:
        assert asyncio.run(untouchable.get(made_up)) is None, made_up
    assert asyncio.run(other_stack.get(cookie)) is None
    # while the cookie itself, in this stack, still opens its session
    assert asyncio.run(_sessions(table, clock).get(cookie)) is not None


def test_the_cookie_is_http_only_strict_and_read_back_from_a_cookie_header() -> None:
    cookie = sessions.set_cookie("x", secure=True)
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Secure" in cookie
    assert sessions.session_cookie(f"a=b; {sessions.COOKIE}=v.t; c=d") == "v.t"
    assert sessions.session_cookie("a=b") is None and sessions.session_cookie(None) is None
