"""Authentication: SigV4 verification against access keys kept in DynamoDB, cached in memory."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from ferrymq import sigv4
from ferrymq.aws.credentials import Credential, CredentialStore
from ferrymq.clock import Clock
from ferrymq.errors import InvalidClientTokenId
from ferrymq.ttl_cache import TtlCache
from functions.frontend.http import HttpRequest


class Authenticator:
    def __init__(self, store: CredentialStore, clock: Clock, *, ttl: float, max_skew_seconds: int) -> None:
        self._store = store
        self._clock = clock
        self._max_skew = max_skew_seconds
        self._cache: TtlCache[str, Credential] = TtlCache(clock, ttl)

    async def authenticate(self, request: HttpRequest) -> Credential:
        signed = sigv4.parse_signature(request.method, request.path, request.query_string, request.headers)
        credential = await self._credential(signed.access_key_id)
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

    async def _credential(self, access_key_id: str) -> Credential:
        hit = self._cache.get(access_key_id)
        if hit is not None:
            return hit
        credential = await asyncio.to_thread(self._store.get, access_key_id)
        if credential is None:
            raise InvalidClientTokenId()
        self._cache.put(access_key_id, credential)
        return credential
