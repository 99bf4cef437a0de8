"""Server-side encryption in the front end: which queues encrypt, sealing messages before they are stored and
opening them when a consumer receives them, and the KMS calls each request made (for its usage record).

A queue encrypts with its ``KmsMasterKeyId`` (SSE-KMS), else with FerryMQ's managed key while
``SqsManagedSseEnabled`` is true (SSE-SQS, the default), else not at all.  Sealing replaces a message's body
by its envelope (``bytes``, :mod:`ferrymq.sse.envelope`) and empties its attributes and MD5s, which the
envelope carries; a plain body is a ``str``.  So whether a stored message is opened depends on the message,
not on the queue it is read from: changing a queue's SSE settings affects new messages only, and a message
redriven or moved to a queue with other settings still opens, under the queue ARN and key its envelope names.

Keys come from :class:`~ferrymq.sse.data_keys.DataKeys`; a lookup that misses fetches once (concurrent
requests for the same key wait for the same fetch) in a thread, since it calls KMS.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any, TypeVar

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ferrymq.aws.kms import metered
from ferrymq.bulkhead import Bulkhead, off_loop
from ferrymq.metadata import queue_attributes
from ferrymq.sse.data_keys import DataKeys, SealingKey
from ferrymq.sse.envelope import EnvelopeError, open_sealed, pack_plaintext, read_header, seal, unpack_plaintext

log = logging.getLogger(__name__)
T = TypeVar("T")

SSE_NONE = "none"
SSE_SQS = "sqs"
SSE_KMS = "kms"
MANAGED_KEY_DESCRIPTION = "FerryMQ SQS-managed server-side encryption"

_kms_calls: ContextVar[list[int] | None] = ContextVar("ferrymq_request_kms_calls", default=None)


def sse_mode(attributes: Mapping[str, str]) -> str:
    """How a queue with these stored attributes encrypts new messages: ``none``, ``sqs`` or ``kms``."""
    if attributes.get("KmsMasterKeyId"):
        return SSE_KMS
    if attributes.get("SqsManagedSseEnabled", queue_attributes.DEFAULTS["SqsManagedSseEnabled"]).lower() == "true":
        return SSE_SQS
    return SSE_NONE


def start_metering() -> None:
    """Count the KMS calls the current request makes from here on (read by :func:`take_kms_calls`)."""
    _kms_calls.set([0])


def take_kms_calls() -> int:
    """The KMS calls the current request made, once (the count is reset)."""
    holder = _kms_calls.get()
    if holder is None:
        return 0
    _kms_calls.set(None)
    return holder[0]


def _count(calls: int) -> None:
    holder = _kms_calls.get()
    if holder is not None:
        holder[0] += calls


class MessageCipher:
    """Seals and opens messages for every queue a front end serves.

    ``managed_key``: the KMS key (alias, id or ARN) of SSE-SQS, created on first use when it is missing.
    """

    def __init__(self, keys: DataKeys, managed_key: str, bulkhead: Bulkhead | None = None) -> None:
        """``bulkhead``: where the KMS calls run (by default the event loop's default threads)."""
        self.keys = keys
        self._bulkhead = bulkhead
        self._managed_key = managed_key
        self._managed_arn: str | None = None
        self._fetches: dict[tuple[Any, ...], asyncio.Future[Any]] = {}

    async def _once(self, slot: tuple[Any, ...], work: Callable[[], T]) -> T:
        """``work()`` in a thread, shared by every caller asking for ``slot`` while it runs; its KMS calls are
        counted for the request that started it."""
        fetch = self._fetches.get(slot)
        if fetch is None:
            fetch = asyncio.ensure_future(self._metered(work))
            self._fetches[slot] = fetch
            fetch.add_done_callback(lambda _: self._fetches.pop(slot, None))
        return await asyncio.shield(fetch)

    async def _metered(self, work: Callable[[], T]) -> T:
        calls = [0]

        def run() -> T:
            with metered() as counted:
                try:
                    return work()
                finally:
                    calls[0] = counted.count

        try:
            return await off_loop(self._bulkhead, run)
        finally:
            # This task runs in a copy of the starting request's context: the same counter.
            _count(calls[0])

    async def _managed(self) -> str:
        if self._managed_arn is None:
            keys, alias = self.keys, self._managed_key
            self._managed_arn = await self._once(
                ("managed",), lambda: keys.kms.ensure_alias(alias, MANAGED_KEY_DESCRIPTION)
            )
        return self._managed_arn

    async def seal(self, queue_arn: str, attributes: Mapping[str, str], messages: list[dict[str, Any]]) -> None:
        """Encrypt ``messages`` (``WorkerClient.send`` maps, with their final ids) in place, if the queue
        encrypts; raises the Kms* errors."""
        mode = sse_mode(attributes)
        if mode == SSE_NONE or not messages:
            return
        key_id = attributes["KmsMasterKeyId"] if mode == SSE_KMS else await self._managed()
        period = queue_attributes.int_value(attributes, "KmsDataKeyReusePeriodSeconds")
        key = await self._sealing_key(key_id, queue_arn, period, len(messages))
        aead, arn, wrapped = key.aead, key.queue_arn, key.wrapped
        for m in messages:
            plaintext = pack_plaintext(m["body"], m["attrs"], m["md5_body"], m["md5_attrs"])
            m["body"] = seal(aead, arn, wrapped, m["id"], plaintext)
            m["attrs"] = {}
            m["md5_body"] = ""
            m["md5_attrs"] = None

    async def _sealing_key(self, key_id: str, queue_arn: str, period: int, count: int) -> SealingKey:
        keys = self.keys
        key = keys.sealing_key(key_id, queue_arn, period, count)
        if key is None:
            key = await self._once(("seal", key_id, queue_arn, period),
                                   lambda: keys.new_sealing_key(key_id, queue_arn, period))
            key.remaining -= count
        return key

    async def open(self, attributes: Mapping[str, str], messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` (received rows) with sealed ones decrypted in place; raises the Kms* errors.

        A message whose envelope does not open (damaged on disk, or tampered with) is left out and logged: it
        stays in flight, and comes back, or goes to the dead-letter queue, like any message not deleted.
        """
        period = queue_attributes.int_value(attributes, "KmsDataKeyReusePeriodSeconds")
        opened: list[dict[str, Any]] = []
        for m in messages:
            body = m["body"]
            if isinstance(body, bytes):
                try:
                    header = read_header(body)
                    aead = self.keys.opening_key(header.wrapped_key, header.queue_arn)
                    if aead is None:
                        aead = await self._unwrap(header.wrapped_key, header.queue_arn, period)
                    m["body"], m["attrs"], m["md5_body"], m["md5_attrs"] = unpack_plaintext(
                        open_sealed(aead, body, header)
                    )
                except EnvelopeError as exc:
                    log.error("message %s does not open, left out of the receive: %s", m["id"], exc)
                    continue
            opened.append(m)
        return opened

    async def _unwrap(self, wrapped: bytes, queue_arn: str, period: int) -> AESGCM:
        keys = self.keys
        return await self._once(("open", wrapped, queue_arn), lambda: keys.unwrap(wrapped, queue_arn, period))
