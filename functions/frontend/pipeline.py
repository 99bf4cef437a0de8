"""The request pipeline: authenticate, parse, dispatch to the action, render.

The same object serves the local gateway (ASGI) and the Lambda entry (Chalice); it holds no per-request
state, only caches and connections.
"""

from __future__ import annotations

import asyncio
import logging

from ferrymq import ids
from ferrymq.errors import InvalidAction, SqsError
from ferrymq.frontend.actions import ACTIONS
from ferrymq.frontend.auth import Authenticator
from ferrymq.frontend.context import RequestContext, Services
from ferrymq.frontend.dashboard.errors import RecentErrors
from ferrymq.frontend.http import HttpRequest
from ferrymq.frontend.metrics.service import GatewayMetrics
from ferrymq.frontend.siblings import Siblings
from ferrymq.frontend.throttle import RequestThrottle, build_request_throttle
from ferrymq.frontend.usage import UsageRecorder
from ferrymq.logs import REQUEST_ID
from ferrymq.protocol.requests import parse_request, response_protocol
from ferrymq.protocol.responses import HttpResponse, render_error, render_result

log = logging.getLogger(__name__)


# Enough of an exception's text to tell failures apart; its arguments may echo a client's input at any length.
_MAX_LOGGED_DETAIL = 200


def _log_failure(level: int, request_id: str, what: str, cause: BaseException | None) -> None:
    """One line per failed request, with the traceback only at DEBUG: any client can repeat a request that
    fails, and SDKs retry every 5xx, so a traceback per failure would flood the log."""
    detail = ""
    if cause is not None:
        try:
            text = str(cause)
        except Exception:  # e.g. an int argument past the int-string limit
            text = "?"
        if len(text) > _MAX_LOGGED_DETAIL:
            text = f"{text[:_MAX_LOGGED_DETAIL]}..."
        detail = f" ({type(cause).__name__}: {text})"
    log.log(level, "request %s failed: %s%s", request_id, what, detail,
            exc_info=cause if cause is not None and log.isEnabledFor(logging.DEBUG) else None)


def _protocol_of(request: HttpRequest) -> str:
    if "x-amz-target" in request.headers or "json" in request.headers.get("content-type", ""):
        return "json"
    return response_protocol("query", request.headers)


class Frontend:
    def __init__(self, services: Services, authenticator: Authenticator, usage: UsageRecorder | None = None,
                 metrics: GatewayMetrics | None = None, recent_errors: RecentErrors | None = None,
                 siblings: Siblings | None = None) -> None:
        self.services = services
        self._auth = authenticator
        # Also the dashboard's login (functions/frontend/dashboard): one credential check, one cache.
        self.authenticator = authenticator
        # The last failed requests, for the dashboard.
        self.recent_errors = recent_errors if recent_errors is not None else RecentErrors()
        # The other gateway processes on this port (functions/frontend/siblings.py); None: it serves alone.
        self.siblings = siblings
        self.usage = usage
        # /metrics and the metrics' background tasks; the request path feeds services.metrics.
        self.metrics = metrics
        self._recorder = services.metrics
        self._throttle: RequestThrottle | None = build_request_throttle(
            services.settings, services.clock, services.catalog
        )

    async def handle(self, request: HttpRequest) -> HttpResponse:
        request_id = ids.uuid4()
        # Every line logged for this request, here and in the storage workers its RPCs reach, carries this id.
        request_token = REQUEST_ID.set(request_id)
        arrived, started = self.services.clock.now(), self.services.clock.monotonic()
        protocol = _protocol_of(request)
        # What the usage record needs, as far as the request got.
        account: str | None = None
        region: str | None = None
        sqs_request = None
        result: dict | None = None
        error: BaseException | None = None
        try:
            credential = await self._auth.authenticate(request)
            if request.on_authenticated is not None:
                request.on_authenticated()
            account, region = credential.account_id, credential.region or None
            sqs_request = parse_request(
                request.method, request.routed_path, request.query_string, request.headers, request.body
            )
            protocol = response_protocol(sqs_request.protocol, request.headers)
            handler = ACTIONS.get(sqs_request.action)
            if handler is None:
                raise InvalidAction(f"The action {sqs_request.action} is not valid for this endpoint.")
            if self._throttle is not None:
                # Before any metadata lookup or worker call: a throttled request costs next to nothing.
                self._throttle.check(protocol, credential.account_id, region, sqs_request.action,
                                     sqs_request.params, sqs_request.path_queue_url_path)
            ctx = RequestContext(
                services=self.services,
                credential=credential,
                base_url=request.base_url,
                path_queue_url=sqs_request.path_queue_url_path,
                action=sqs_request.action,
                trace_header=request.headers.get("x-amzn-trace-id") or None,
                secure_transport=request.secure_transport,
                source_ip=request.peer,
            )
            result = await handler(ctx, sqs_request.params)
            response = render_result(protocol, sqs_request.action, result, request_id)
        except SqsError as exc:
            if not exc.sender:
                _log_failure(logging.WARNING, request_id, exc.code, exc.__cause__)
            elif log.isEnabledFor(logging.DEBUG):
                _log_failure(logging.DEBUG, request_id, exc.code, exc.__cause__)
            error = exc
            response = render_error(protocol, exc, request_id)
        except Exception as exc:
            _log_failure(logging.ERROR, request_id, "unexpected error", exc)
            error = exc
            response = render_error(protocol, exc, request_id)
        latency = self.services.clock.monotonic() - started
        if error is not None:
            self.recent_errors.add(arrived, account, sqs_request.action if sqs_request else None, error, request_id)
        if self._recorder is not None:
            self._recorder.request(sqs_request.action if sqs_request else None, error, latency)
        if self.usage is not None:
            self.usage.record(
                request, request_id=request_id, arrived=arrived, latency=latency,
                account=account, action=sqs_request.action if sqs_request else None,
                params=sqs_request.params if sqs_request else None,
                path_queue_url=sqs_request.path_queue_url_path if sqs_request else None,
                result=result, error=error, status=response.status, response_bytes=len(response.body), region=region,
            )
        REQUEST_ID.reset(request_token)
        return response

    async def identify(self, request: HttpRequest) -> None:
        """Refuse, before its body is read, a request whose headers carry no valid credentials (raises SqsError)."""
        await self._auth.identify(request)

    def refuse(self, request: HttpRequest, error: SqsError) -> HttpResponse:
        """The answer to a request the gateway refuses before the pipeline runs, in the request's protocol."""
        return render_error(_protocol_of(request), error, ids.uuid4())

    def start(self) -> None:
        """Start the background work of a long-running host (the local gateway; the Lambda entry never does)."""
        if self.metrics is not None:
            self.metrics.start()
        if self.siblings is not None:
            self.siblings.start()

    async def close(self) -> None:
        if self.metrics is not None:
            # First: its last CloudWatch period is published with the connections still open.
            await self.metrics.close()
        if self.siblings is not None:
            await self.siblings.close()
        await self.services.dispatcher.close()
        if self.usage is not None:
            # The final flush uploads (or spools) with blocking boto3 calls: keep them off the event loop.
            await asyncio.to_thread(self.usage.close)
