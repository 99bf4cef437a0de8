"""The dashboard's login sessions, each with its CSRF token, kept in DynamoDB (:mod:`ferrymq.aws.dashboard_sessions`)
so that any front-end process serves any session: several gateways on one port, or many function instances.

The cookie holds the access key id and the session's random id, signed with a key derived from the cluster secret
(a made-up cookie is refused without a table read); the table holds a hash of the id and a proof of the secret
the login gave (an HMAC of the secret under the id), never the secret. Every call reads the session's
item and checks the proof against the key's secret as the authenticator knows it: disabling, deleting or
rotating the key ends the session at once, and so does a logout through any process.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from ferrymq.aws.dashboard_sessions import SessionTable, StoredSession
from ferrymq.bulkhead import Bulkhead, off_loop
from ferrymq.clock import Clock

COOKIE = "ferrymq_dashboard"
SESSION_SECONDS = 8 * 3600
MAX_SESSIONS_PER_KEY = 20
"""Sessions one key holds at once; a login past that ends the oldest."""
_TOKEN_BYTES = 32
_MAX_COOKIE_CHARS = 512
_MAC_BYTES = 16


@dataclass(frozen=True, slots=True)
class Session:
    access_key_id: str
    csrf_token: str
    expires_at: int
    token: str
    """The session's random id, from the cookie."""
    secret_proof: str

    def proves(self, secret_access_key: str) -> bool:
        """Whether ``secret_access_key`` is the secret this session logged in with."""
        return hmac.compare_digest(_proof(self.token, secret_access_key), self.secret_proof)


class Sessions:
    def __init__(self, table: SessionTable, clock: Clock, bulkhead: Bulkhead | None = None, *,
                 cookie_key: bytes | None = None, lifetime: int = SESSION_SECONDS,
                 per_key: int = MAX_SESSIONS_PER_KEY) -> None:
        """``cookie_key`` signs the cookies (every process of the stack must be given the same one: see
        :func:`cookie_key_of`); None: a key of this process's own, so its cookies hold in it alone."""
        self._cookie_key = cookie_key if cookie_key is not None else secrets.token_bytes(32)
        self._table = table
        self._clock = clock
        self._bulkhead = bulkhead
        self._lifetime = lifetime
        self._per_key = per_key

    async def open(self, access_key_id: str, secret_access_key: str) -> tuple[str, Session]:
        """A new session's cookie value and the session, once stored; the key's oldest sessions past the bound,
        and its expired ones, are ended."""
        now = self._clock.now()
        held = await off_loop(self._bulkhead, self._table.of_key, access_key_id)
        live = sorted((s for s in held if s.expires_at > now), key=lambda s: s.created_ms, reverse=True)
        for ended in [s for s in held if s.expires_at <= now] + live[self._per_key - 1:]:
            await off_loop(self._bulkhead, self._table.delete, ended.access_key_id, ended.session_hash)
        token = secrets.token_urlsafe(_TOKEN_BYTES)
        session = Session(access_key_id, secrets.token_urlsafe(_TOKEN_BYTES), int(now) + self._lifetime, token,
                          _proof(token, secret_access_key))
        stored = StoredSession(access_key_id, _hash(token), session.secret_proof, session.csrf_token, int(now * 1000),
                               session.expires_at)
        await off_loop(self._bulkhead, self._table.put, stored)
        return self._cookie_value(access_key_id, token), session

    async def get(self, cookie_value: str | None) -> Session | None:
        """The live session a cookie names, or None (no cookie, a malformed or made-up one, an unknown or expired
        session). A cookie this stack did not sign costs no table read."""
        parsed = self._parse_cookie_value(cookie_value)
        if parsed is None:
            return None
        access_key_id, token = parsed
        stored = await off_loop(self._bulkhead, self._table.get, access_key_id, _hash(token))
        if stored is None or stored.expires_at <= self._clock.now():
            return None
        return Session(access_key_id, stored.csrf_token, stored.expires_at, token, stored.secret_proof)

    async def close(self, cookie_value: str | None) -> None:
        parsed = self._parse_cookie_value(cookie_value)
        if parsed is not None:
            await off_loop(self._bulkhead, self._table.delete, parsed[0], _hash(parsed[1]))

    def _cookie_value(self, access_key_id: str, token: str) -> str:
        # The key id is encoded: a cookie's value may not hold every character a key id might.
        encoded = base64.urlsafe_b64encode(access_key_id.encode()).decode().rstrip("=")
        return f"{encoded}.{token}.{self._mac(encoded, token)}"

    def _parse_cookie_value(self, value: str | None) -> tuple[str, str] | None:
        if not value or len(value) > _MAX_COOKIE_CHARS or not value.isascii():
            return None
        parts = value.split(".")
        if len(parts) != 3 or not all(parts):
            return None
        encoded, token, mac = parts
        if not hmac.compare_digest(mac.encode(), self._mac(encoded, token).encode()):
            return None
        try:
            access_key_id = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return None
        return (access_key_id, token) if access_key_id else None

    def _mac(self, encoded: str, token: str) -> str:
        digest = hmac.new(self._cookie_key, f"{encoded}.{token}".encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest[:_MAC_BYTES]).decode().rstrip("=")

def _proof(token: str, secret_access_key: str) -> str:
    return hmac.new(token.encode(), secret_access_key.encode(), hashlib.sha256).hexdigest()


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def cookie_key_of(cluster_secret: str) -> bytes | None:
    """The key that signs the dashboard's cookies, the same in every process of a stack that shares its cluster
    secret; None without one."""
    if not cluster_secret:
        return None
    return hmac.new(cluster_secret.encode(), b"ferrymq dashboard session cookie", hashlib.sha256).digest()


def csrf_matches(session: Session, token: str | None) -> bool:
    return token is not None and hmac.compare_digest(session.csrf_token.encode(), token.encode())


def session_cookie(cookie_header: str | None) -> str | None:
    """The session cookie's value in a Cookie header, if any."""
    for part in (cookie_header or "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value or None
    return None


def set_cookie(value: str, *, secure: bool, max_age: int = SESSION_SECONDS) -> str:
    flags = "; Secure" if secure else ""
    return f"{COOKIE}={value}; Path=/dashboard; Max-Age={max_age}; HttpOnly; SameSite=Strict{flags}"
