"""What the gateway reads from a client before it knows who the client is, and for how long.

The ASGI app (functions/frontend/asgi.py) takes each request through these steps, all before the body is read
unless said otherwise:

1. a connection over the per-client cap (flagged in the scope by the server's protocol, infra/http_protocol.py)
   gets ``503 ServiceUnavailable`` and is closed;
2. a declared ``Content-Length`` over ``max_request_bytes`` gets ``413 RequestEntityTooLarge``, or for a
   SendMessageBatch named in the headers SQS's ``BatchRequestTooLong``;
3. for a body larger than ``FREE_BYTES`` (or of unknown length), the credentials in the headers must be well
   formed and name a key that exists (the pipeline verifies the signature itself once the body is there, as
   the payload hash needs it; a smaller body is buffered by the server anyway, and is left to that check);
4. as the body arrives, its bytes beyond the first ``FREE_BYTES`` are charged to one gateway-wide
   :class:`BufferBudget`; when it is spent the answer is ``503 ServiceUnavailable``, which SDKs retry (the
   bytes are charged as they arrive, not as declared, so a slow sender holds only what it has sent);
5. the body must arrive within ``body_timeout_seconds`` (``RequestTimeout``), and a chunked body that grows
   past ``max_request_bytes`` is cut off with the error of step 2.

The budget's share is handed back as soon as the signature is verified, and in any case when the request ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

from ferrymq.errors import BatchRequestTooLong, RequestEntityTooLarge, RequestTimeout, ServiceUnavailable, SqsError
from ferrymq.limits import MAX_BATCH_BYTES

# Set to True in an HTTP scope's "extensions" by the server's protocol when the connection is over the cap.
OVER_CLIENT_CAP = "ferrymq.over_client_cap"
_BATCH_TARGET = "AmazonSQS.SendMessageBatch"
# The first bytes of every body are not charged to the budget: uvicorn buffers this much per connection anyway
# before it pauses reading, and the connection cap bounds it. Small requests, the usual ones, therefore never
# wait on the budget, however much of it slow large bodies hold.
FREE_BYTES = 64 * 1024

Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]


class ClientGone(Exception):
    """The client disconnected before its request was read: there is no one to answer."""


class BufferBudget:
    """Bytes of request bodies buffered gateway-wide for requests whose signature is not yet verified."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.in_use = 0

    def try_take(self, size: int) -> bool:
        if self.in_use + size > self.capacity:
            return False
        self.in_use += size
        return True

    def give_back(self, size: int) -> None:
        self.in_use -= size


class BodyLease:
    """One request's share of the budget; :meth:`release` may be called any number of times."""

    __slots__ = ("_budget", "held")

    def __init__(self, budget: BufferBudget) -> None:
        self._budget = budget
        self.held = 0

    def grow(self, size: int) -> None:
        if not self._budget.try_take(size):
            raise ServiceUnavailable()
        self.held += size

    def release(self) -> None:
        if self.held:
            self._budget.give_back(self.held)
            self.held = 0


def declared_length(headers: Mapping[str, str]) -> int | None:
    """The body length the client declared; the HTTP parser has already refused malformed values."""
    raw = headers.get("content-length")
    if raw is None:
        return None
    try:
        return int(raw.split(",")[0])
    except ValueError:
        return None


def too_large(headers: Mapping[str, str], query_string: str, size: int, limit: int) -> SqsError:
    """AWS's answer to a body over the limit: BatchRequestTooLong when the headers say it is a batch send."""
    if headers.get("x-amz-target") == _BATCH_TARGET or "Action=SendMessageBatch" in query_string.split("&"):
        return BatchRequestTooLong(
            f"Batch requests cannot be longer than {MAX_BATCH_BYTES} bytes. You have sent {size} bytes."
        )
    return RequestEntityTooLarge(f"HTTP content length exceeded {limit} bytes.")


async def read_body(receive: Receive, *, declared: int | None, limit: int, lease: BodyLease, timeout: float,
                    oversized: Callable[[int], SqsError], free_bytes: int = FREE_BYTES) -> bytes:
    """The whole body, charged to the budget as it arrives beyond ``free_bytes``; raises an SqsError over a
    limit, ClientGone if the client left."""
    try:
        async with asyncio.timeout(timeout):
            return await _read_all(receive, declared, limit, lease, oversized, free_bytes)
    except TimeoutError:
        raise RequestTimeout() from None


async def _read_all(receive: Receive, declared: int | None, limit: int, lease: BodyLease,
                    oversized: Callable[[int], SqsError], free_bytes: int) -> bytes:
    message = await receive()
    if message["type"] == "http.disconnect":
        raise ClientGone()
    body: bytes | bytearray = message.get("body", b"")
    if not message.get("more_body", False):
        # One chunk: the common case of a small request, kept free of copies.
        _account(lease, declared, len(body), limit, oversized, free_bytes)
        return bytes(body)
    buffer = bytearray(body)
    _account(lease, declared, len(buffer), limit, oversized, free_bytes)
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone()
        buffer += message.get("body", b"")
        _account(lease, declared, len(buffer), limit, oversized, free_bytes)
        if not message.get("more_body", False):
            return bytes(buffer)


def _account(lease: BodyLease, declared: int | None, total: int, limit: int, oversized: Callable[[int], SqsError],
             free_bytes: int) -> None:
    if declared is None and total > limit:
        # A declared length was checked before reading, and the HTTP parser holds the body to it.
        raise oversized(total)
    charge = total - free_bytes - lease.held
    if charge > 0:
        lease.grow(charge)
