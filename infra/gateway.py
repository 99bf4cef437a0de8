"""``python -m ferrymq.infra.gateway --host H --port P``: the SQS front end served locally by uvicorn.

The front end's ASGI app (:func:`ferrymq.frontend.asgi.create_gateway`) runs in uvicorn with uvloop and
httptools, access logs off, and the transport limits of :mod:`ferrymq.infra.http_protocol` (header timeout,
connections per client) and :mod:`ferrymq.frontend.transport_limits` (body size, budget and timeout, credentials
checked before the body is read); small requests read whole are answered without the ASGI cycle
(:mod:`ferrymq.infra.http_protocol`). With TLS settings (:mod:`ferrymq.infra.tls`) it serves HTTPS. The socket is
bound before uvicorn starts so ``--port 0`` works; once serving, the gateway prints ``FERRYMQ_GATEWAY_READY URL``.
With ``FERRYMQ_GATEWAY_PROCESSES`` above 1 it is one of that many processes bound to the port with
``SO_REUSEPORT``: it takes its share of the port's limits (:func:`process_share`) and shares its counts with the
others (:mod:`ferrymq.frontend.siblings`).
"""

from __future__ import annotations

import argparse
import sys

from ferrymq import logs
from ferrymq.infra import asgi_serving, tls
from ferrymq.infra.http_protocol import guarded_protocol
from ferrymq.settings import Settings

READY_PREFIX = "FERRYMQ_GATEWAY_READY"


def process_share(settings: Settings) -> Settings:
    """The settings of one of ``gateway_processes`` processes serving one port: each takes its share of the
    limits that hold for the port (throttling, the connections of one client, the bodies buffered before their
    signature is checked), so that together they keep them."""
    n = settings.gateway_processes
    if n <= 1:
        return settings
    return settings.with_(
        throttle_frontends=settings.throttle_frontends * n,
        # The kernel spreads one client's connections over the processes by their ports: each takes its share,
        # rounded up, so a client near the cap may be refused by one process a little before it reaches it.
        max_connections_per_client=-(-settings.max_connections_per_client // n),
        unauthenticated_buffer_bytes=max(1, settings.unauthenticated_buffer_bytes // n),
    )


def run(settings: Settings, host: str, port: int, parent_pid: int | None = None) -> None:
    """Serve the front end on ``host:port`` until SIGTERM/SIGINT, or until ``parent_pid`` is gone; one of
    ``settings.gateway_processes`` processes on that port when there are several."""
    from ferrymq.frontend.asgi import create_gateway

    settings = process_share(settings)
    tls_files = tls.tls_files(settings.with_(host=host))
    sock = asgi_serving.bind_socket(host, port, reuse_port=settings.gateway_processes > 1)
    try:
        url = asgi_serving.socket_url(sock, "https" if tls_files else "http")
        gateway = create_gateway(settings)
        asgi_serving.serve_asgi(
            gateway.app, sock, f"{READY_PREFIX} {url}", lifespan="on", parent_pid=parent_pid,
            http_protocol=guarded_protocol(settings.header_timeout_seconds, settings.max_connections_per_client,
                                           gateway),
            tls_files=tls_files,
            keep_alive_seconds=settings.keep_alive_seconds,
        )
    finally:
        sock.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ferrymq.infra.gateway",
                                     description="Serve FerryMQ's SQS front end.")
    parser.add_argument("--host", help="address to listen on (default FERRYMQ_HOST)")
    parser.add_argument("--port", type=int, help="port to listen on, 0 for any free one (default FERRYMQ_PORT)")
    parser.add_argument("--parent-pid", type=int, help="stop (cleanly) once this process is no longer the parent")
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    logs.configure("gateway", settings)
    run(settings, args.host or settings.host, settings.port if args.port is None else args.port, args.parent_pid)
    return 0


if __name__ == "__main__":
    sys.exit(main())
