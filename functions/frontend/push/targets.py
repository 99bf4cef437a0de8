"""Where a poller delivers a batch: an HTTP endpoint (signed POST) or a Lambda function (Invoke, through a boto3
client that honours ``AWS_ENDPOINT_URL_LAMBDA``). What came back is a :class:`Delivery`.

Calls are blocking (urllib3, boto3) on a thread pool of each mapping's own, as large as its MaximumConcurrency (the
front end's dependencies carry no async HTTP client): a slow target ties up its own mapping's threads, never
another mapping's. Redirects are not followed and at most :data:`MAX_ANSWER_BYTES` of an answer are read.

Every POST resolves the destination's host, checks every address against the destination policy
(ferrymq.push.destinations) and connects to a checked address itself, with the URL's Host header and, for https,
its host as server name and certificate name: the name is never resolved a second time by the HTTP client.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import urllib3
from botocore.exceptions import BotoCoreError, ClientError

from ferrymq.push import destinations
from ferrymq.push.destinations import DestinationPolicy, DestinationRefused, Resolver
from ferrymq.push.signature import DELIVERY_HEADER, MAPPING_HEADER, signed_headers

MAX_ANSWER_BYTES = 1 << 20
MAX_TIMEOUT_SECONDS = 900.0
# Lambda's answers that mean "slow down" (beside any 429 or 5xx).
_LAMBDA_THROTTLES = frozenset({"TooManyRequestsException", "ThrottlingException", "EC2ThrottledException",
                               "ServiceException", "ResourceNotReadyException"})
NO_ANSWER = object()
"""The answer of a target that answered nothing readable as JSON (a failure under ReportBatchItemFailures)."""


@dataclass(frozen=True, slots=True)
class Delivery:
    ok: bool
    """The target took the batch (a 2xx)."""
    answer: object = None
    """The answer's JSON (None when empty; :data:`NO_ANSWER` when not JSON)."""
    throttled: bool = False
    """The target asked to slow down (429, or a 5xx)."""
    detail: str = ""


class HttpTarget:
    def __init__(self, url: str, mapping_uuid: str, secret: str, pool: urllib3.PoolManager,
                 threads: ThreadPoolExecutor, clock: Callable[[], float] = time.time, *,
                 policy: DestinationPolicy | None = None, resolver: Resolver = socket.getaddrinfo) -> None:
        self._url = url
        self._policy = policy or DestinationPolicy()
        self._resolver = resolver
        self._mapping = mapping_uuid
        self._secret = secret
        self._pool = pool
        self._threads = threads
        self._clock = clock

    async def deliver(self, body: bytes, timeout: float) -> Delivery:
        return await asyncio.get_running_loop().run_in_executor(self._threads, self._post, body,
                                                                min(max(timeout, 1.0), MAX_TIMEOUT_SECONDS))

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)

    def _post(self, body: bytes, timeout: float) -> Delivery:
        headers = {"Content-Type": "application/json", MAPPING_HEADER: self._mapping,
                   DELIVERY_HEADER: str(uuid.uuid4()), "User-Agent": "FerryMQ-Push/1",
                   **signed_headers(self._secret, int(self._clock()), body)}
        try:
            where = destinations.parse(self._url)
            addresses = destinations.resolve(where, self._policy, self._resolver)
        except DestinationRefused as exc:
            return Delivery(False, detail=str(exc))
        headers["Host"] = where.host_header
        answer, failed = None, "no address"
        for address in addresses:
            https = {"server_hostname": where.host, "assert_hostname": where.host} if where.scheme == "https" else None
            connection = self._pool.connection_from_host(str(address), where.port, where.scheme, pool_kwargs=https)
            try:
                answer = connection.urlopen("POST", where.target, body=body, headers=headers, redirect=False,
                                            retries=False, assert_same_host=False, preload_content=False,
                                            timeout=urllib3.Timeout(connect=min(timeout, 10.0), read=timeout))
                break
            except (urllib3.exceptions.NewConnectionError, urllib3.exceptions.ConnectTimeoutError) as exc:
                # Nothing was sent: the next checked address may answer (as a client tries each of a name's).
                failed = type(exc).__name__
            except urllib3.exceptions.HTTPError as exc:
                return Delivery(False, detail=f"{type(exc).__name__} posting to the destination")
        if answer is None:
            return Delivery(False, detail=f"{failed} posting to the destination")
        try:
            text = answer.read(MAX_ANSWER_BYTES + 1)
        except urllib3.exceptions.HTTPError as exc:
            return Delivery(False, detail=f"{type(exc).__name__} reading the destination's answer")
        finally:
            answer.release_conn()
        status = answer.status
        if not 200 <= status < 300:
            return Delivery(False, throttled=status == 429 or status >= 500, detail=f"HTTP {status}")
        return Delivery(True, _parsed(text))


class LambdaTarget:
    """Invokes ``function_arn`` synchronously with the event; a FunctionError fails the batch."""

    def __init__(self, client: object, function_arn: str, threads: ThreadPoolExecutor) -> None:
        self._client = client
        self._function = function_arn
        self._threads = threads

    async def deliver(self, body: bytes, timeout: float) -> Delivery:
        return await asyncio.get_running_loop().run_in_executor(self._threads, self._invoke, body)

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)

    def _invoke(self, body: bytes) -> Delivery:
        try:
            answer = self._client.invoke(  # type: ignore[attr-defined]
                FunctionName=self._function, InvocationType="RequestResponse", Payload=body)
            payload = answer["Payload"].read(MAX_ANSWER_BYTES + 1)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            return Delivery(False, throttled=code in _LAMBDA_THROTTLES or status == 429 or status >= 500,
                            detail=f"Lambda {code or status}")
        except BotoCoreError as exc:
            return Delivery(False, detail=f"{type(exc).__name__} invoking the function")
        if answer.get("FunctionError"):
            return Delivery(False, detail=f"Function error ({answer['FunctionError']})")
        return Delivery(True, _parsed(payload))


def _parsed(text: bytes) -> object:
    if not text.strip():
        return None
    if len(text) > MAX_ANSWER_BYTES:
        return NO_ANSWER
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return NO_ANSWER
