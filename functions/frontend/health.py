"""Health checks of the gateway, on paths no SQS request uses and without a signature (load balancers and
orchestrators cannot sign): ``GET /health/live`` answers while the process serves requests at all, and
``GET /health/ready`` while it can serve SQS requests: its metadata store answers, and every partition new
queues may go to has a leader that answers. A ``GET`` on those paths with a query string or a signature is an
SQS request, and left to the pipeline.
"""

from __future__ import annotations

import asyncio

import orjson

from ferrymq.errors import SqsError
from ferrymq.frontend.context import Services
from ferrymq.protocol.responses import HttpResponse

LIVE_PATH = "/health/live"
READY_PATH = "/health/ready"
_CHECK_SECONDS = 3.0
"""How long readiness waits for any one check: a probe that hangs is worse than one that says no."""


def is_health_check(method: str, path: str, query_string: str, headers: dict[str, str]) -> bool:
    return method == "GET" and path in (LIVE_PATH, READY_PATH) and not query_string and "authorization" not in headers


async def answer(path: str, services: Services) -> HttpResponse:
    if path == LIVE_PATH:
        return _json(200, {"status": "live"})
    checks: dict[str, object] = {}
    try:
        partitions = await asyncio.wait_for(services.catalog.placement.partitions(), _CHECK_SECONDS)
        checks["metadata"] = "ok"
    except (SqsError, TimeoutError) as exc:
        checks["metadata"] = _failure(exc)
        return _json(503, {"status": "unready", "checks": checks})
    results = await asyncio.gather(*(_leader(services, p) for p in partitions))
    checks["partitions"] = dict(zip(map(str, partitions), results, strict=True))
    ready = all(r == "ok" for r in results)
    return _json(200 if ready else 503, {"status": "ready" if ready else "unready", "checks": checks})


async def _leader(services: Services, partition: int) -> str:
    try:
        await asyncio.wait_for(services.dispatcher.ping_leader(partition), _CHECK_SECONDS)
    except (SqsError, TimeoutError) as exc:
        return _failure(exc)
    return "ok"


def _failure(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer within {_CHECK_SECONDS:g} s"
    return exc.message if isinstance(exc, SqsError) and exc.message else type(exc).__name__


def _json(status: int, document: dict[str, object]) -> HttpResponse:
    return HttpResponse(status, [("Content-Type", "application/json")], orjson.dumps(document))
