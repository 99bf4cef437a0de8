"""The dashboard's login sessions: in memory, bounded, each with its CSRF token.

A session keeps the key pair it was opened with, so that every call checks the key again (through the
authenticator's cache): disabling, deleting or rotating the key ends the session at once.
"""

from __future__ import annotations

import hmac
import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

COOKIE = "ferrymq_dashboard"
SESSION_SECONDS = 8 * 3600.0
MAX_SESSIONS = 1000


@dataclass(frozen=True, slots=True)
class Session:
    access_key_id: str
    secret_access_key: str
    csrf_token: str
    expires_at: float


class Sessions:
    def __init__(self, monotonic: Callable[[], float], *, lifetime: float = SESSION_SECONDS,
                 capacity: int = MAX_SESSIONS) -> None:
        self._monotonic = monotonic
        self._lifetime = lifetime
        self._capacity = capacity
        self._open: OrderedDict[str, Session] = OrderedDict()

    def open(self, access_key_id: str, secret_access_key: str) -> tuple[str, Session]:
        """A new session's id (the cookie's value) and the session."""
        while len(self._open) >= self._capacity:
            self._open.popitem(last=False)
        session_id = secrets.token_urlsafe(32)
        session = Session(access_key_id, secret_access_key, secrets.token_urlsafe(32),
                          self._monotonic() + self._lifetime)
        self._open[session_id] = session
        return session_id, session

    def get(self, session_id: str | None) -> Session | None:
        if not session_id:
            return None
        session = self._open.get(session_id)
        if session is None:
            return None
        if self._monotonic() >= session.expires_at:
            del self._open[session_id]
            return None
        return session

    def close(self, session_id: str | None) -> None:
        if session_id:
            self._open.pop(session_id, None)


def csrf_matches(session: Session, token: str | None) -> bool:
    return token is not None and hmac.compare_digest(session.csrf_token.encode(), token.encode())


def session_cookie(cookie_header: str | None) -> str | None:
    """The session id in a Cookie header, if any."""
    for part in (cookie_header or "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value or None
    return None


def set_cookie(session_id: str, *, secure: bool, max_age: int = int(SESSION_SECONDS)) -> str:
    flags = "; Secure" if secure else ""
    return f"{COOKIE}={session_id}; Path=/dashboard; Max-Age={max_age}; HttpOnly; SameSite=Strict{flags}"
