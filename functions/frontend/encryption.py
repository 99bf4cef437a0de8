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

The service's own keys are not the tenants': a ``KmsMasterKeyId`` naming one of them (the
managed key, the key that seals access-key secrets, any ``alias/ferrymq/`` or AWS-managed ``alias/aws/`` key),
by alias name, alias ARN, key id or key ARN, is accepted as a queue attribute, as SQS accepts any string, and
refused at send as KMS refuses a key the caller may not use (``KMS.AccessDeniedException``). Alias forms are
refused by name; ids and ARNs after the key is resolved, which happens only when a data key is made, so a
queue whose data key is held costs no KMS call. ``alias/aws/sqs``, the AWS-managed key of SQS, is the tenant's
name for the managed key: SSE-KMS under the key SSE-SQS uses. Errors name a key as the queue names it, never
by the ARN KMS resolved it to, which would show the service's KMS account.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any, TypeVar

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ferrymq.arn import parse_arn, parse_queue_arn
from ferrymq.aws.kms import metered
from ferrymq.aws.secret_box import KEY_ALIAS as CREDENTIALS_KEY_ALIAS
from ferrymq.bulkhead import Bulkhead, off_loop
from ferrymq.errors import KmsAccessDenied, SqsError
from ferrymq.metadata import queue_attributes
from ferrymq.sse.data_keys import DataKeys, SealingKey
from ferrymq.sse.envelope import EnvelopeError, Sealer, open_sealed, pack_plaintext, read_header, unpack_plaintext

log = logging.getLogger(__name__)
T = TypeVar("T")

SSE_NONE = "none"
SSE_SQS = "sqs"
SSE_KMS = "kms"
MANAGED_KEY_DESCRIPTION = "FerryMQ SQS-managed server-side encryption"
TENANT_MANAGED_ALIAS = "alias/aws/sqs"
"""The AWS-managed key of SQS as a tenant names it: FerryMQ's managed key."""
SERVICE_ALIAS_PREFIXES = ("alias/ferrymq/", "alias/aws/")
MAX_REFUSED_NAMES = 4096
_KMS_ARN = re.compile(r"arn:aws[a-z-]*:kms:[a-z0-9-]*:[0-9]*:(?:key|alias)/[A-Za-z0-9/_+=,.@-]*")

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


def alias_named(key_id: str) -> str | None:
    """The alias name (``alias/...``) a KmsMasterKeyId names, by name or alias ARN; None for a key id or ARN."""
    if key_id.startswith("alias/"):
        return key_id
    arn = parse_arn(key_id)
    if arn is not None and arn.service == "kms" and arn.resource.startswith("alias/"):
        return arn.resource
    return None


def names_tenant_managed_key(key_id: str, queue_arn: str) -> bool:
    """Whether ``key_id`` is ``alias/aws/sqs`` of the queue's own account and region (by name or alias ARN)."""
    if key_id == TENANT_MANAGED_ALIAS:
        return True
    arn, queue = parse_arn(key_id), parse_queue_arn(queue_arn)
    return (arn is not None and queue is not None and arn.service == "kms"
            and arn.resource == TENANT_MANAGED_ALIAS and arn.account == queue.account and arn.region == queue.region)


def refused(key_id: str) -> KmsAccessDenied:
    return KmsAccessDenied(f"The caller is not authorized to use the KMS key {key_id}: it is not the caller's key.")


def named_as(exc: SqsError, key_name: str) -> SqsError:
    """``exc`` with every KMS ARN in its message replaced by the key's name as the tenant knows it."""
    if not isinstance(exc, SqsError) or "arn:" not in exc.message:
        return exc
    renamed = type(exc)(_KMS_ARN.sub(key_name, exc.message))
    renamed.__cause__ = exc.__cause__
    return renamed


class MessageCipher:
    """Seals and opens messages for every queue a front end serves.

    ``managed_key``: the KMS key (alias, id or ARN) of SSE-SQS, created on first use when it is missing.
    ``service_keys``: the aliases of the service's other keys, besides any under :data:`SERVICE_ALIAS_PREFIXES`.
    """

    def __init__(self, keys: DataKeys, managed_key: str, bulkhead: Bulkhead | None = None,
                 service_keys: tuple[str, ...] = (CREDENTIALS_KEY_ALIAS,)) -> None:
        """``bulkhead``: where the KMS calls run (by default the event loop's default threads)."""
        self.keys = keys
        self._bulkhead = bulkhead
        self._managed_key = managed_key
        self._managed_arn: str | None = None
        self._service_aliases = frozenset((*service_keys, managed_key))
        self._service_arns: frozenset[str] | None = None
        self._refused: set[str] = set()
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
        period = queue_attributes.int_value(attributes, "KmsDataKeyReusePeriodSeconds")
        if mode == SSE_KMS:
            named = attributes["KmsMasterKeyId"]
            # The managed key's ARN is where SSE-SQS queues' data keys are held: never a tenant's hit.
            held = None if named == self._managed_arn else self.keys.sealing_key(named, queue_arn, period,
                                                                                 len(messages))
            key = held or await self._tenant_sealing_key(named, queue_arn, period, len(messages))
        else:
            # A data key held under the managed key (once its ARN is known) is taken without a coroutine.
            managed = self._managed_arn
            sealing = None if managed is None else self.keys.sealing_key(managed, queue_arn, period, len(messages))
            if sealing is None:
                try:
                    sealing = await self._sealing_key(await self._managed(), queue_arn, period, len(messages))
                except SqsError as exc:
                    raise named_as(exc, "the queue's SQS-managed key") from exc.__cause__
            key = sealing
        seal = Sealer(key.aead, key.queue_arn, key.wrapped).seal
        for m in messages:
            plaintext = pack_plaintext(m["body"], m["attrs"], m["md5_body"], m["md5_attrs"])
            m["body"] = seal(m["id"], plaintext)
            m["attrs"] = {}
            m["md5_body"] = ""
            m["md5_attrs"] = None

    async def _tenant_sealing_key(self, named: str, queue_arn: str, period: int, count: int) -> SealingKey:
        """A data key under the key a queue's ``KmsMasterKeyId`` names, once it is known to be the tenant's to
        use; KMS's refusals name the key as the queue does."""
        try:
            if names_tenant_managed_key(named, queue_arn):
                return await self._sealing_key(await self._managed(), queue_arn, period, count)
            if named in self._refused or self._names_service_alias(named):
                raise refused(named)
            await self._once(("check", named), lambda: self._check_tenant_key(named))
            return await self._sealing_key(named, queue_arn, period, count)
        except SqsError as exc:
            raise named_as(exc, named) from exc.__cause__

    def _names_service_alias(self, named: str) -> bool:
        alias = alias_named(named)
        return alias is not None and (alias in self._service_aliases or alias.startswith(SERVICE_ALIAS_PREFIXES))

    def _check_tenant_key(self, named: str) -> None:
        """Refuse a key id or ARN that resolves to a service key (blocking: KMS calls)."""
        arn = self.keys.kms.check_key(named)
        if arn in self._service_key_arns():
            if len(self._refused) < MAX_REFUSED_NAMES:
                self._refused.add(named)
            raise refused(named)

    def _service_key_arns(self) -> frozenset[str]:
        """The ARNs of the keys the service's aliases name, found once per process (blocking: KMS calls).

        Each alias of ``service_keys`` is described; the others under :data:`SERVICE_ALIAS_PREFIXES` are
        listed where this front end may list aliases. A key it may not describe or list is one KMS itself
        refuses it (as AWS-managed keys of other services are), so what cannot be resolved needs no entry.
        """
        if self._service_arns is None:
            kms = self.keys.kms
            arns: set[str] = set()
            for alias in self._service_aliases:
                with contextlib.suppress(SqsError):
                    arns.add(kms.check_key(alias))
            try:
                pages = kms.call(lambda: list(kms.client.get_paginator("list_aliases").paginate()))
            except SqsError:
                pages = []
            for page in pages:
                for entry in page.get("Aliases", []):
                    name, target = entry.get("AliasName", ""), entry.get("TargetKeyId")
                    if target and name.startswith(SERVICE_ALIAS_PREFIXES) and ":alias/" in entry.get("AliasArn", ""):
                        arns.add(entry["AliasArn"].split(":alias/", 1)[0] + f":key/{target}")
            self._service_arns = frozenset(arns)
        if self._managed_arn is not None and self._managed_arn not in self._service_arns:
            self._service_arns |= {self._managed_arn}
        return self._service_arns

    async def _sealing_key(self, key_id: str, queue_arn: str, period: int, count: int) -> SealingKey:
        keys = self.keys
        key = keys.sealing_key(key_id, queue_arn, period, count)
        if key is None:
            key = await self._once(("seal", key_id, queue_arn, period),
                                   lambda: keys.new_sealing_key(key_id, queue_arn, period))
            key.remaining -= count
        return key

    async def open(self, attributes: Mapping[str, str], messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` (received rows) with sealed ones decrypted in place; raises the Kms* errors, which
        name no key ARN (an envelope's may be the service's).

        A message whose envelope does not open (damaged on disk, or tampered with) is left out and logged: it
        stays in flight, and comes back, or goes to the dead-letter queue, like any message not deleted.
        """
        try:
            return await self._open(attributes, messages)
        except SqsError as exc:
            raise named_as(exc, "the message's KMS key") from exc.__cause__

    async def _open(self, attributes: Mapping[str, str], messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
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
