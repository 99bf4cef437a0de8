"""Authentication: SigV4 verification against access keys kept in DynamoDB, cached in memory.

A key is read once and then served from memory for ``ttl`` seconds, so a warm request makes no DynamoDB call.
Revocation must not wait that long: at most every ``recheck`` seconds, the first request to arrive reads the
keys' version item (one small read per front end, whatever the number of keys) and, when it has moved since
the last read, every cached key and every remembered unknown key is dropped.  A key deleted, disabled or
replaced with ``ferrymq credentials`` therefore stops working on every front end within ``recheck`` seconds
and one read.  Should that read fail, the cached keys stay in use (until ``ttl``) rather than refusing every
request while DynamoDB is out, and the read is tried again ``recheck`` seconds later.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Callable
from dataclasses import replace

from ferrymq import sigv4
from ferrymq.aws.credentials import Credential, CredentialStore
from ferrymq.bulkhead import Bulkhead, off_loop
from ferrymq.clock import Clock
from ferrymq.errors import ExpiredToken, InvalidClientTokenId, SqsError
from ferrymq.frontend.http import HttpRequest
from ferrymq.protocol.ferrymq_model import signing_service
from ferrymq.ttl_cache import TtlCache

log = logging.getLogger(__name__)


class Authenticator:
    def __init__(
        self,
        store: CredentialStore,
        clock: Clock,
        *,
        ttl: float,
        max_skew_seconds: int,
        regions: frozenset[str],
        recheck_seconds: float = 2.0,
        negative_ttl: float = 2.0,
        bulkhead: Bulkhead | None = None,
    ) -> None:
        """``bulkhead``: where the DynamoDB reads run (by default the event loop's default threads)."""
        self._store = store
        self._bulkhead = bulkhead
        self._clock = clock
        self._max_skew = max_skew_seconds
        self._regions = regions
        self._recheck_seconds = recheck_seconds
        self._cache: TtlCache[str, Credential] = TtlCache(clock, ttl)
        self._unknown: TtlCache[str, bool] = TtlCache(clock, negative_ttl)
        self._version: int | None = None
        self._next_recheck = float("-inf")
        # Moves whenever the caches are dropped: a read that began before must not store what it found.
        self._generation = 0
        self._recheck_lock = asyncio.Lock()

    async def identify(self, request: HttpRequest) -> Credential:
        """What can be checked from the headers alone: a well-formed signature by a key that exists.

        The gateway calls this before reading a body, so a request without valid credentials is refused without
        buffering it; :meth:`authenticate` still checks everything once the body is there.
        """
        return await self._usable_credential(self._parse(request))

    async def authenticate(self, request: HttpRequest) -> Credential:
        signed = self._parse(request)
        credential = await self._usable_credential(signed)
        sigv4.verify_signature(
            signed,
            credential.secret_access_key,
            method=request.method,
            path=request.path,
            query_string=request.query_string,
            headers=request.headers,
            body=request.body,
            now=self._clock.now(),
            max_skew_seconds=self._max_skew,
        )
        if credential.region != signed.region:
            # The request's region is its credential scope.  Keys are mostly used from one region, so the
            # cached copy carries the last one and a warm request allocates nothing.
            credential = replace(credential, region=signed.region)
            self._cache.put(signed.access_key_id, credential)
        return credential

    async def verify_key_pair(self, access_key_id: str, secret_access_key: str) -> Credential:
        """A login with the key pair itself rather than a signature (the web dashboard): the key, if it may sign
        and ``secret_access_key`` is its secret; InvalidClientTokenId otherwise, whichever part was wrong.
        Temporary keys are refused: their session token is not part of such a login."""
        return await self.verify_key(
            access_key_id, lambda secret: hmac.compare_digest(secret.encode(), secret_access_key.encode()))

    async def verify_key(self, access_key_id: str, proves: Callable[[str], bool]) -> Credential:
        """:meth:`verify_key_pair` where the secret is not at hand, only a way to tell it (a dashboard session's
        proof): the key, if it may sign and ``proves`` its secret."""
        credential = await self._credential(access_key_id)
        matches = proves(credential.secret_access_key)
        if not matches or not credential.active or credential.session_token_sha256 is not None:
            raise InvalidClientTokenId()
        if credential.expires_at is not None and self._clock.now() >= credential.expires_at:
            raise ExpiredToken()
        return credential

    def _parse(self, request: HttpRequest) -> sigv4.SignedRequest:
        return sigv4.parse_signature(
            request.method, request.path, request.query_string, request.headers, regions=self._regions,
            service=signing_service(request.headers),
        )

    async def _usable_credential(self, signed: sigv4.SignedRequest) -> Credential:
        """The signing key, if it may sign at all: enabled, with the session token it needs (and none
        otherwise), and not expired."""
        credential = await self._credential(signed.access_key_id)
        if not credential.active or not credential.accepts_token(signed.security_token):
            raise InvalidClientTokenId()
        if credential.expires_at is not None and self._clock.now() >= credential.expires_at:
            raise ExpiredToken()
        return credential

    async def _credential(self, access_key_id: str) -> Credential:
        if self._clock.monotonic() >= self._next_recheck:
            await self._recheck()
        hit = self._cache.get(access_key_id)
        if hit is not None:
            return hit
        if self._unknown.get(access_key_id) is not None:
            raise InvalidClientTokenId()
        while True:
            generation = self._generation
            credential = await off_loop(self._bulkhead, self._store.get, access_key_id)
            if generation == self._generation:
                break
        if credential is None:
            self._unknown.put(access_key_id, True)
            raise InvalidClientTokenId()
        self._cache.put(access_key_id, credential)
        return credential

    async def _recheck(self) -> None:
        async with self._recheck_lock:
            started = self._clock.monotonic()
            if started < self._next_recheck:
                return  # another request read the version while this one waited for the lock
            try:
                version = await off_loop(self._bulkhead, self._store.version)
            except SqsError as exc:
                log.warning("could not read the access keys' version (%s); cached keys stay in use", exc.code)
                self._next_recheck = started + self._recheck_seconds
                return
            self._next_recheck = started + self._recheck_seconds
            if version != self._version:
                self._version = version
                self._generation += 1
                self._cache.clear()
                self._unknown.clear()
