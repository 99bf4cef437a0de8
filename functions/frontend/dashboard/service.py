"""The dashboard's routes: the static page and the JSON API it polls (see the package's threat model).

The API reads what FerryMQ's own actions read, through the same handlers where one exists (cluster status,
move tasks, redrive), with the logged-in key as the caller: a non-admin key gets exactly what its signed
requests would get.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.resources
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qs

import orjson

from ferrymq.arn import parse_queue_arn
from ferrymq.aws.credentials import Credential
from ferrymq.aws.queue_store import QueueRecord
from ferrymq.destinations import retention_seconds
from ferrymq.errors import AccessDenied, InternalError, InvalidParameterValue, MissingParameter, SqsError
from ferrymq.frontend.actions import ACTIONS
from ferrymq.frontend.auth import Authenticator
from ferrymq.frontend.context import RequestContext, Services
from ferrymq.frontend.dashboard import access, mappings, queue_actions, refusals, sessions
from ferrymq.frontend.dashboard.errors import RecentErrors
from ferrymq.frontend.dashboard.history import QueueHistory
from ferrymq.frontend.http import HttpRequest
from ferrymq.frontend.metrics.depths import combined
from ferrymq.frontend.metrics.service import GatewayMetrics
from ferrymq.frontend.siblings import Siblings
from ferrymq.metadata import redrive
from ferrymq.protocol.responses import HttpResponse

log = logging.getLogger(__name__)

PREFIX = "/dashboard"
MAX_QUEUES = 200
"""Queues one poll shows (and asks the workers about): the first of the account's, by name."""
MAX_ERRORS = 50
_CONCURRENCY = 16
"""Queues asked about at once by one poll."""
MAX_BODY_BYTES = 16_384
_STATIC = {
    "/dashboard/": ("index.html", "text/html; charset=utf-8"),
    "/dashboard/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/dashboard/style.css": ("style.css", "text/css; charset=utf-8"),
}
_SECURITY_HEADERS = [
    ("Cache-Control", "no-store"),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
]
_PAGE_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")

Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]


def _json(status: int, document: Any, headers: list[tuple[str, str]] | None = None) -> HttpResponse:
    return HttpResponse(status, [("Content-Type", "application/json"), *_SECURITY_HEADERS, *(headers or [])],
                        orjson.dumps(document))


def _refused(error: SqsError) -> HttpResponse:
    # The code SDKs show (botocore reads it from x-amzn-query-error), not the JSON protocol's __type name.
    return _json(error.status, {"error": error.query_code, "message": error.message})


def _static(name: str) -> bytes:
    return (importlib.resources.files("ferrymq") / "data" / "dashboard" / name).read_bytes()


class Dashboard:
    def __init__(self, services: Services, authenticator: Authenticator, recent_errors: RecentErrors,
                 metrics: GatewayMetrics | None, logins: sessions.Sessions, siblings: Siblings | None = None) -> None:
        self._services = services
        self._settings = services.settings
        self._auth = authenticator
        self._errors = recent_errors
        self._sessions = logins
        collect = self._settings.metrics_collect_seconds
        self._siblings = siblings
        self.history = QueueHistory(metrics.recorder if metrics else None, metrics.depths if metrics else None,
                                    period=min(collect, 5.0) if collect > 0 else 5.0, siblings=siblings)
        self._pages: dict[str, bytes] = {}

    @staticmethod
    def serves(path: str) -> bool:
        return path == PREFIX or path.startswith(f"{PREFIX}/")

    def start(self) -> None:
        self.history.start()

    async def close(self) -> None:
        await self.history.close()

    async def answer(self, request: HttpRequest, receive: Receive) -> HttpResponse:
        """The answer to any request under /dashboard (``request`` without its body, read here)."""
        if not self._settings.dashboard_remote and not (
            access.is_loopback(request.peer) and access.host_is_loopback(request.headers.get("host"))
        ):
            return _refused(refusals.Forbidden("The dashboard is served to loopback only."))
        path = request.path.split("?", 1)[0]
        try:
            if request.method == "GET":
                return await self._get(request, path)
            if request.method == "POST":
                body = await _read_body(receive)
                return await self._post(request, path, body)
            raise refusals.MethodNotAllowed(f"{request.method} is not served here.")
        except SqsError as failed:
            return _refused(failed)
        except Exception:
            log.exception("dashboard: %s %s failed", request.method, path)
            return _refused(InternalError())

    # --- routes -----------------------------------------------------------------------------------------

    async def _get(self, request: HttpRequest, path: str) -> HttpResponse:
        if path == PREFIX:
            return HttpResponse(308, [("Location", f"{PREFIX}/"), *_SECURITY_HEADERS], b"")
        if path in _STATIC:
            name, content_type = _STATIC[path]
            if name not in self._pages:
                self._pages[name] = _static(name)
            return HttpResponse(200, [("Content-Type", content_type), *_SECURITY_HEADERS,
                                      ("Content-Security-Policy", _PAGE_POLICY)], self._pages[name])
        query = parse_qs(request.query_string)
        if path == f"{PREFIX}/api/session":
            session, credential = await self._caller(request)
            return _json(200, _who(session, credential))
        if path == f"{PREFIX}/api/queues":
            _, credential = await self._caller(request)
            account = _account(credential, query.get("account", [None])[0])
            prefix = query.get("prefix", [""])[0]
            return _json(200, await self._queues(request, credential, account, prefix))
        if path == f"{PREFIX}/api/cluster":
            _, credential = await self._caller(request)
            if not credential.admin:
                raise AccessDenied("The cluster view needs an admin key.")
            return _json(200, await ACTIONS["GetClusterStatus"](self._context(request, credential, "GetClusterStatus"),
                                                                {}))
        if path == f"{PREFIX}/api/mappings":
            _, credential = await self._caller(request)
            wanted = query.get("account", [None])[0]
            # An admin key without an account sees every account's mappings; any other caller one account's.
            scope = None if credential.admin and not wanted else _account(credential, wanted)
            return _json(200, await mappings.listed(self._services, scope))
        if path == f"{PREFIX}/api/errors":
            _, credential = await self._caller(request)
            others = await asyncio.to_thread(self._siblings.others) if self._siblings is not None else []
            shown = self._errors.latest(None if credential.admin else credential.account_id, MAX_ERRORS,
                                        [e for counts in others for e in counts.errors])
            return _json(200, {"errors": [dataclasses.asdict(e) for e in shown]})
        raise refusals.NotFound(f"Nothing is served at {path}.")

    async def _post(self, request: HttpRequest, path: str, body: bytes) -> HttpResponse:
        if "application/json" not in request.headers.get("content-type", ""):
            raise refusals.UnsupportedMediaType("The dashboard's API takes JSON only.")
        if not access.same_origin(request.headers.get("origin"), request.headers.get("host")):
            raise refusals.Forbidden("Cross-origin requests are refused.")
        document = _document(body)
        if path == f"{PREFIX}/api/login":
            key_id, secret = document.get("accessKeyId"), document.get("secretAccessKey")
            if not isinstance(key_id, str) or not isinstance(secret, str) or not key_id or not secret:
                raise MissingParameter("An access key id and its secret key are needed.")
            try:
                credential = await self._auth.verify_key_pair(key_id, secret)
            except SqsError:
                raise refusals.InvalidLogin("The access key id or the secret key is wrong.") from None
            cookie_value, session = await self._sessions.open(key_id, secret)
            cookie = sessions.set_cookie(cookie_value, secure=request.secure_transport)
            return _json(200, _who(session, credential), [("Set-Cookie", cookie)])
        session, credential = await self._caller(request)
        if not sessions.csrf_matches(session, request.headers.get("x-csrf-token")):
            raise refusals.InvalidCsrfToken("The request lacks this session's CSRF token.")
        if path == f"{PREFIX}/api/logout":
            await self._sessions.close(sessions.session_cookie(request.headers.get("cookie")))
            return _json(200, {}, [("Set-Cookie", sessions.set_cookie("", secure=request.secure_transport,
                                                                       max_age=0))])
        if path == f"{PREFIX}/api/redrive":
            arn = document.get("queueArn")
            parsed = parse_queue_arn(arn) if isinstance(arn, str) else None
            if parsed is None:
                raise InvalidParameterValue("queueArn must be a queue's ARN.")
            account = _account(credential, parsed.account)
            ctx = self._context(request, credential, "StartMessageMoveTask", account)
            return _json(200, await ACTIONS["StartMessageMoveTask"](ctx, {"SourceArn": arn}))
        route = path.removeprefix(f"{PREFIX}/api/")
        if route in queue_actions.PATHS:
            return _json(200, await queue_actions.run(
                route, document, credential,
                lambda action, account: self._context(request, credential, action, account)))
        raise refusals.NotFound(f"Nothing is served at {path}.")

    # --- the caller ---------------------------------------------------------------------------------------

    async def _caller(self, request: HttpRequest) -> tuple[sessions.Session, Credential]:
        cookie = sessions.session_cookie(request.headers.get("cookie"))
        session = await self._sessions.get(cookie)
        if session is None:
            raise refusals.LoginRequired("Log in with an access key first.")
        try:
            credential = await self._auth.verify_key(session.access_key_id, session.proves)
        except SqsError:
            await self._sessions.close(cookie)
            raise refusals.LoginRequired("The session's key no longer works: log in again.") from None
        return session, credential

    def _context(self, request: HttpRequest, credential: Credential, action: str,
                 account: str | None = None) -> RequestContext:
        """The context an action handler is given, as if ``credential`` had signed the request (for an admin
        acting on another account, as that account)."""
        if account is not None and account != credential.account_id:
            credential = dataclasses.replace(credential, account_id=account)
        credential = dataclasses.replace(credential, region=self._settings.region)
        return RequestContext(services=self._services, credential=credential, base_url=request.base_url,
                              action=action, secure_transport=request.secure_transport, source_ip=request.peer)

    # --- the queues view ----------------------------------------------------------------------------------

    async def _queues(self, request: HttpRequest, credential: Credential, account: str,
                      prefix: str) -> dict[str, Any]:
        """The first MAX_QUEUES queues whose names start with ``prefix``; a dead-letter queue's sources are
        those among them."""
        catalog = self._services.catalog
        region = self._settings.region
        records = await catalog.list(account, prefix, MAX_QUEUES + 1, None, region)
        truncated = len(records) > MAX_QUEUES
        records = records[:MAX_QUEUES]
        arns = {record.name: catalog.arn_of(record) for record in records}
        sources: dict[str, list[str]] = {}
        for record in records:
            target = _dead_letter_target(record)
            if target is not None:
                sources.setdefault(target, []).append(record.name)
        ctx = self._context(request, credential, "ListMessageMoveTasks", account)
        gate = asyncio.Semaphore(_CONCURRENCY)

        async def shown(record: QueueRecord) -> dict[str, Any]:
            arn = arns[record.name]
            entry: dict[str, Any] = {"name": record.name, "arn": arn, "url": ctx.url_of(record),
                                     "fifo": record.name.endswith(".fifo")}
            async with gate:
                entry.update(await self._depth(record))
                if arn in sources:
                    entry["deadLetterSources"] = sorted(sources[arn])
                    entry["moveTask"] = await self._move_task(ctx, arn)
            key = (record.account, record.region or region, record.name)
            entry["history"] = [[s.at, round(s.sent_per_second, 3), round(s.received_per_second, 3), s.visible,
                                 s.in_flight] for s in self.history.of(key)]
            return entry

        queues = await asyncio.gather(*(shown(record) for record in records))
        return {"account": account, "region": region, "prefix": prefix, "queues": queues, "truncated": truncated,
                "historySeconds": self.history.period}

    async def _depth(self, queue: QueueRecord) -> dict[str, Any]:
        retention = retention_seconds(queue.attributes)

        async def depth(worker: Any, partition: int, queue_id: str) -> dict:
            return await worker.depth(partition, queue_id, retention_seconds=retention)

        try:
            shards = await self._services.dispatcher.on_every_shard(queue, depth, idempotent=True)
        except SqsError as failed:
            return {"unavailable": failed.message or failed.code}
        figures = combined(shards)
        held = figures.visible + figures.in_flight + figures.delayed
        return {"visible": figures.visible, "inFlight": figures.in_flight, "delayed": figures.delayed,
                "oldestAgeSeconds": int(figures.oldest_age_seconds) if held else None}

    async def _move_task(self, ctx: RequestContext, arn: str) -> dict[str, Any] | None:
        try:
            listed = await ACTIONS["ListMessageMoveTasks"](ctx, {"SourceArn": arn, "MaxResults": 1})
        except SqsError as failed:
            log.debug("dashboard: move tasks of %s: %s", arn, failed.code)
            return None
        return listed["Results"][0] if listed.get("Results") else None


def _who(session: sessions.Session, credential: Credential) -> dict[str, Any]:
    return {"accessKeyId": credential.access_key_id, "account": credential.account_id, "admin": credential.admin,
            "csrfToken": session.csrf_token}


def _account(credential: Credential, wanted: str | None) -> str:
    if not wanted or wanted == credential.account_id:
        return credential.account_id
    if not credential.admin:
        raise AccessDenied(f"Only an admin key may look at account {wanted}.")
    if len(wanted) != 12 or not wanted.isdigit():
        raise InvalidParameterValue(f"{wanted} is not an account id: 12 digits.")
    return wanted


def _dead_letter_target(queue: QueueRecord) -> str | None:
    raw = queue.attributes.get("RedrivePolicy")
    if not raw:
        return None
    try:
        return redrive.RedrivePolicy.from_json(raw).dead_letter_target_arn
    except (ValueError, KeyError, TypeError):
        return None


def _document(body: bytes) -> dict[str, Any]:
    try:
        document = orjson.loads(body or b"{}")
    except orjson.JSONDecodeError:
        raise refusals.MalformedJson("The body is not JSON.") from None
    if not isinstance(document, dict):
        raise refusals.MalformedJson("The body must be a JSON object.")
    return document


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise refusals.MalformedJson("The body ended before it was complete.")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise refusals.RequestTooLarge("The dashboard's requests are small.")
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)
