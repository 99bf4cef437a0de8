"""The Authenticator's key rules and caches, against an in-memory key store and a hand-moved clock."""

from __future__ import annotations

import asyncio
import calendar
import hashlib
from dataclasses import replace
from datetime import datetime
from urllib.parse import urlsplit

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from ferrymq.aws.credentials import INACTIVE, Credential
from ferrymq.clock import ManualClock
from ferrymq.errors import ExpiredToken, InvalidClientTokenId, ServiceUnavailable
from ferrymq.frontend.auth import Authenticator
from ferrymq.frontend.http import HttpRequest

SIGNED_AT = datetime(2024, 3, 5, 12, 30, 0)
SIGNED_EPOCH = float(calendar.timegm(SIGNED_AT.timetuple()))
KEY = Credential("AKIAEXAMPLEEXAMPLE01", "secret", "111122223333", "alice")
TOKEN = "session-token"
TEMPORARY = Credential("ASIAEXAMPLEEXAMPLE01", "temp-secret", "111122223333", "alice",
                       session_token_sha256=hashlib.sha256(TOKEN.encode()).hexdigest(),
                       expires_at=SIGNED_EPOCH + 60)


class MemoryKeys:
    """What the Authenticator asks of a CredentialStore, in memory, counting the reads."""

    def __init__(self, *keys: Credential) -> None:
        self.keys = {k.access_key_id: k for k in keys}
        self.version_number = 0
        self.reads = 0
        self.version_reads = 0
        self.version_fails = False

    def get(self, access_key_id: str) -> Credential | None:
        self.reads += 1
        return self.keys.get(access_key_id)

    def version(self) -> int:
        self.version_reads += 1
        if self.version_fails:
            raise ServiceUnavailable()
        return self.version_number

    def change(self, key_id: str, credential: Credential | None) -> None:
        """As ``ferrymq credentials`` changes a key: the change and a version bump together."""
        if credential is None:
            del self.keys[key_id]
        else:
            self.keys[key_id] = credential
        self.version_number += 1


@pytest.fixture(autouse=True)
def _botocore_signs_at_a_fixed_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("botocore.auth.get_current_datetime", lambda *args, **kwargs: SIGNED_AT)


def _request(key: Credential, token: str | None = None, secret: str | None = None) -> HttpRequest:
    request = AWSRequest(method="POST", url="http://localhost:9324/", data=b"Action=ListQueues",
                         headers={"Content-Type": "application/x-www-form-urlencoded"})
    SigV4Auth(Credentials(key.access_key_id, secret or key.secret_access_key, token), "sqs",
              "us-east-1").add_auth(request)
    prepared = request.prepare()
    headers = {k.lower(): v for k, v in prepared.headers.items()}
    headers.setdefault("host", urlsplit(prepared.url).netloc)
    return HttpRequest("POST", "/", "", headers, prepared.body or b"")


def _authenticator(store: MemoryKeys, clock: ManualClock) -> Authenticator:
    return Authenticator(store, clock, ttl=300, max_skew_seconds=900,  # type: ignore[arg-type]
                         regions=frozenset({"us-east-1"}), recheck_seconds=2.0, negative_ttl=2.0)


def _clock() -> ManualClock:
    return ManualClock(start=SIGNED_EPOCH)


def _run(auth: Authenticator, request: HttpRequest) -> Credential:
    return asyncio.run(auth.authenticate(request))


def _refused(auth: Authenticator, request: HttpRequest, error: type[Exception]) -> None:
    with pytest.raises(error):
        _run(auth, request)


def test_a_warm_key_costs_no_read_until_the_recheck_and_then_one_version_read() -> None:
    # given a key used once
    store, clock = MemoryKeys(KEY), _clock()
    auth = _authenticator(store, clock)
    assert _run(auth, _request(KEY)).account_id == "111122223333"
    assert (store.reads, store.version_reads) == (1, 1)
    # when it is used again within the recheck period, then nothing is read
    clock.advance(1.9)
    _run(auth, _request(KEY))
    assert (store.reads, store.version_reads) == (1, 1)
    # and after it, only the version is read while it has not moved
    clock.advance(0.2)
    _run(auth, _request(KEY))
    assert (store.reads, store.version_reads) == (1, 2)


def test_a_deleted_key_is_refused_after_the_next_recheck() -> None:
    # given a cached key
    store, clock = MemoryKeys(KEY), _clock()
    auth = _authenticator(store, clock)
    _run(auth, _request(KEY))
    # when it is deleted, then the cache still serves it until the recheck is due ...
    store.change(KEY.access_key_id, None)
    clock.advance(1.0)
    _run(auth, _request(KEY))
    # ... and refuses it from then on
    clock.advance(1.0)
    _refused(auth, _request(KEY), InvalidClientTokenId)


def test_a_disabled_key_is_refused_and_works_again_once_enabled() -> None:
    store, clock = MemoryKeys(KEY), _clock()
    auth = _authenticator(store, clock)
    _run(auth, _request(KEY))
    store.change(KEY.access_key_id, replace(KEY, status=INACTIVE))
    clock.advance(2.0)
    _refused(auth, _request(KEY), InvalidClientTokenId)
    store.change(KEY.access_key_id, KEY)
    clock.advance(2.0)
    _run(auth, _request(KEY))


def test_an_unknown_key_is_remembered_briefly() -> None:
    # given a key unknown when first used
    store, clock = MemoryKeys(), _clock()
    auth = _authenticator(store, clock)
    _refused(auth, _request(KEY), InvalidClientTokenId)
    _refused(auth, _request(KEY), InvalidClientTokenId)
    assert store.reads == 1
    # when it is created (which moves no version), then it works once the negative entry has expired
    store.keys[KEY.access_key_id] = KEY
    clock.advance(1.0)
    _refused(auth, _request(KEY), InvalidClientTokenId)
    clock.advance(1.0)
    assert _run(auth, _request(KEY)).user_name == "alice"


def test_a_failed_version_read_keeps_the_cache_and_is_tried_again_later() -> None:
    store, clock = MemoryKeys(KEY), _clock()
    auth = _authenticator(store, clock)
    _run(auth, _request(KEY))
    store.version_fails = True
    clock.advance(2.0)
    _run(auth, _request(KEY))
    _run(auth, _request(KEY))
    assert store.version_reads == 2
    # once the read works again, a change made meanwhile is seen
    store.version_fails = False
    store.change(KEY.access_key_id, None)
    clock.advance(2.0)
    _refused(auth, _request(KEY), InvalidClientTokenId)


def test_a_key_read_that_straddles_a_version_change_is_read_again() -> None:
    # given a key whose read is in flight when a recheck finds the version moved
    store, clock = MemoryKeys(KEY), _clock()
    auth = _authenticator(store, clock)
    original_get = store.get

    def get_then_delete(key_id: str) -> Credential | None:
        found = original_get(key_id)
        if store.reads == 1:
            store.change(key_id, None)
            auth._generation += 1  # what a concurrent recheck does when it sees the new version
        return found

    store.get = get_then_delete  # type: ignore[method-assign]
    # then the stale answer is not used: the key is read again, and found gone
    _refused(auth, _request(KEY), InvalidClientTokenId)
    assert store.reads == 2


def test_temporary_credentials_need_their_token_until_they_expire() -> None:
    store, clock = MemoryKeys(TEMPORARY, KEY), _clock()
    auth = _authenticator(store, clock)
    assert _run(auth, _request(TEMPORARY, token=TOKEN)).access_key_id == TEMPORARY.access_key_id
    _refused(auth, _request(TEMPORARY), InvalidClientTokenId)
    _refused(auth, _request(TEMPORARY, token="forged"), InvalidClientTokenId)
    _refused(auth, _request(KEY, token=TOKEN), InvalidClientTokenId)
    clock.advance(60)
    with pytest.raises(ExpiredToken) as caught:
        _run(auth, _request(TEMPORARY, token=TOKEN))
    assert caught.value.message == "The security token included in the request is expired"
    # a wrong token on an expired key is still just invalid
    _refused(auth, _request(TEMPORARY, token="forged"), InvalidClientTokenId)


def test_identify_applies_the_key_rules_before_the_body_is_read() -> None:
    store, clock = MemoryKeys(TEMPORARY), _clock()
    auth = _authenticator(store, clock)
    with pytest.raises(InvalidClientTokenId):
        asyncio.run(auth.identify(_request(TEMPORARY, token="forged")))
    assert asyncio.run(auth.identify(_request(TEMPORARY, token=TOKEN))).user_name == "alice"
