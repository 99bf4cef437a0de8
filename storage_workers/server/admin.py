"""The worker's admin listener: ``GET /health/live``, ``GET /health/ready`` and ``GET /metrics`` over HTTP.

A port of its own (``Settings.worker_admin_host``/``worker_admin_port``, loopback by default), apart from the
worker RPC, and without authentication, as probes and scrapers expect: keep it off networks clients reach.
``/health/live`` answers 200 while the process serves at all; ``/health/ready`` 200 once every partition the
worker holds is recovered and either led or followed with a known leader, else 503 (both JSON, saying what
each partition is doing); ``/metrics`` is Prometheus text (:mod:`.metrics`).

HTTP here is the least that probes and scrapers need: one request per connection, its head read within
``HEAD_TIMEOUT_SECONDS`` and ``MAX_HEAD_BYTES``, anything but a GET of those paths refused, then closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import orjson
from prometheus_client import CollectorRegistry, generate_latest

from ferrymq.storage.server.metrics import Worker, readiness

log = logging.getLogger(__name__)

LIVE_PATH = "/health/live"
READY_PATH = "/health/ready"
METRICS_PATH = "/metrics"
HEAD_TIMEOUT_SECONDS = 5.0
MAX_HEAD_BYTES = 8192
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


class AdminServer:
    def __init__(self, worker: Worker, registry: CollectorRegistry, host: str, port: int) -> None:
        self._worker = worker
        self._registry = registry
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None
        self.address: tuple[str, int] | None = None
        """Where it listens, once started."""

    async def start(self) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._serve, self._host, self._port, reuse_address=True,
                                                  limit=MAX_HEAD_BYTES)
        self.address = (self._host, int(self._server.sockets[0].getsockname()[1]))
        return self.address

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    def answer(self, method: str, target: str) -> tuple[int, str, bytes]:
        """``(status, content type, body)`` for a request line's method and target."""
        path = target.split("?", 1)[0]
        if path not in (LIVE_PATH, READY_PATH, METRICS_PATH):
            return _json(404, {"error": f"no such path: {path}"})
        if method != "GET":
            return _json(405, {"error": "only GET is served"})
        if path == LIVE_PATH:
            return _json(200, {"status": "live"})
        if path == READY_PATH:
            ready, partitions = readiness(self._worker)
            return _json(200 if ready else 503,
                         {"status": "ready" if ready else "unready", "checks": {"partitions": partitions}})
        return 200, METRICS_CONTENT_TYPE, generate_latest(self._registry)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_SECONDS)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
                return
            parts = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
            if len(parts) != 3 or not parts[2].startswith("HTTP/"):
                status, content_type, body = _json(400, {"error": "not an HTTP request line"})
            else:
                try:
                    status, content_type, body = self.answer(parts[0], parts[1])
                except Exception:  # a broken metric must not take the listener down
                    log.exception("admin request %s %s failed", parts[0], parts[1])
                    status, content_type, body = _json(503, {"error": "internal error"})
            writer.write(
                f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode("latin-1") + body
            )
            with contextlib.suppress(ConnectionError):
                await writer.drain()
        finally:
            writer.close()


def _json(status: int, document: dict[str, object]) -> tuple[int, str, bytes]:
    return status, "application/json", orjson.dumps(document)
