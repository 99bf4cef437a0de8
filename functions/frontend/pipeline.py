"""The request pipeline: authenticate, parse, dispatch to the action, render.

The same object serves the local gateway (ASGI) and the Lambda entry (Chalice); it holds no per-request
state, only caches and connections.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from ferrymq.errors import InvalidAction, SqsError
from ferrymq.protocol.requests import parse_request, response_protocol
from ferrymq.protocol.responses import HttpResponse, render_error, render_result
from functions.frontend.actions import ACTIONS
from functions.frontend.auth import Authenticator
from functions.frontend.context import RequestContext, Services
from functions.frontend.http import HttpRequest
from functions.frontend.usage import UsageRecorder

log = logging.getLogger(__name__)


def _protocol_of(request: HttpRequest) -> str:
    if "x-amz-target" in request.headers or "json" in request.headers.get("content-type", ""):
        return "json"
    return response_protocol("query", request.headers)


class Frontend:
    def __init__(self, services: Services, authenticator: Authenticator, usage: UsageRecorder | None = None) -> None:
        self.services = services
        self._auth = authenticator
        self.usage = usage

    async def handle(self, request: HttpRequest) -> HttpResponse:
        request_id = str(uuid.uuid4())
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
            account, region = credential.account_id, credential.region or None
            sqs_request = parse_request(
                request.method, request.path, request.query_string, request.headers, request.body
            )
            protocol = response_protocol(sqs_request.protocol, request.headers)
            handler = ACTIONS.get(sqs_request.action)
            if handler is None:
                raise InvalidAction(f"The action {sqs_request.action} is not valid for this endpoint.")
            ctx = RequestContext(
                services=self.services,
                credential=credential,
                base_url=request.base_url,
                path_queue_url=sqs_request.path_queue_url_path,
                action=sqs_request.action,
                trace_header=request.headers.get("x-amzn-trace-id") or None,
            )
            result = await handler(ctx, sqs_request.params)
            response = render_result(protocol, sqs_request.action, result, request_id)
        except SqsError as exc:
            if not exc.sender:
                log.warning("request %s failed: %s", request_id, exc.code, exc_info=exc.__cause__ is not None)
            error = exc
            response = render_error(protocol, exc, request_id)
        except Exception as exc:
            log.exception("request %s failed unexpectedly", request_id)
            error = exc
            response = render_error(protocol, exc, request_id)
        if self.usage is not None:
            self.usage.record(
                request, request_id=request_id, arrived=arrived, latency=self.services.clock.monotonic() - started,
                account=account, action=sqs_request.action if sqs_request else None,
                params=sqs_request.params if sqs_request else None,
                path_queue_url=sqs_request.path_queue_url_path if sqs_request else None,
                result=result, error=error, status=response.status, response_bytes=len(response.body), region=region,
            )
        return response

    async def close(self) -> None:
        await self.services.dispatcher.close()
        if self.usage is not None:
            # The final flush uploads (or spools) with blocking boto3 calls: keep them off the event loop.
            await asyncio.to_thread(self.usage.close)
