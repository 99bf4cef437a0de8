"""The request pipeline: authenticate, parse, dispatch to the action, render.

The same object serves the local gateway (ASGI) and the Lambda entry (Chalice); it holds no per-request
state, only caches and connections.
"""

from __future__ import annotations

import logging
import uuid

from ferrymq.errors import InvalidAction, SqsError
from ferrymq.protocol.requests import parse_request
from ferrymq.protocol.responses import HttpResponse, render_error, render_result
from functions.frontend.actions import ACTIONS
from functions.frontend.auth import Authenticator
from functions.frontend.context import RequestContext, Services
from functions.frontend.http import HttpRequest

log = logging.getLogger(__name__)


def _protocol_of(request: HttpRequest) -> str:
    if "x-amz-target" in request.headers or "json" in request.headers.get("content-type", ""):
        return "json"
    return "query"


class Frontend:
    def __init__(self, services: Services, authenticator: Authenticator) -> None:
        self.services = services
        self._auth = authenticator

    async def handle(self, request: HttpRequest) -> HttpResponse:
        request_id = str(uuid.uuid4())
        protocol = _protocol_of(request)
        try:
            credential = await self._auth.authenticate(request)
            sqs_request = parse_request(
                request.method, request.path, request.query_string, request.headers, request.body
            )
            protocol = sqs_request.protocol
            handler = ACTIONS.get(sqs_request.action)
            if handler is None:
                raise InvalidAction(f"The action {sqs_request.action} is not valid for this endpoint.")
            ctx = RequestContext(
                services=self.services,
                credential=credential,
                base_url=request.base_url,
                path_queue_url=sqs_request.path_queue_url_path,
                action=sqs_request.action,
            )
            result = await handler(ctx, sqs_request.params)
            return render_result(protocol, sqs_request.action, result, request_id)
        except SqsError as exc:
            if not exc.sender:
                log.warning("request %s failed: %s", request_id, exc.code, exc_info=exc.__cause__ is not None)
            return render_error(protocol, exc, request_id)
        except Exception as exc:
            log.exception("request %s failed unexpectedly", request_id)
            return render_error(protocol, exc, request_id)

    async def close(self) -> None:
        await self.services.dispatcher.close()
