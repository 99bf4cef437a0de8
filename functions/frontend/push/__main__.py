"""``python -m ferrymq.frontend.push``: a push host (:mod:`.host`) with the front end's services.

Serves its Prometheus series (:mod:`.metrics`) on ``--metrics-host``:``--metrics-port`` and prints
``FERRYMQ_PUSH_READY <host id> <metrics URL>`` once it runs; stops on SIGTERM/SIGINT, or once ``--parent-pid`` is no
longer its parent, giving its leases up.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from prometheus_client import start_http_server

from ferrymq import collector, logs
from ferrymq.frontend.push.host import PushHost
from ferrymq.frontend.push.metrics import PushMetrics
from ferrymq.frontend.wiring import build_frontend
from ferrymq.metadata import event_source_mappings
from ferrymq.metadata.event_source_mappings import MappingStore
from ferrymq.metadata.mapping_leases import MappingLeases
from ferrymq.orphan_watch import wait_until_orphaned
from ferrymq.settings import Settings

READY_PREFIX = "FERRYMQ_PUSH_READY"


async def serve(settings: Settings, lease_seconds: float, parent_pid: int | None, metrics_host: str,
                metrics_port: int) -> None:
    frontend = build_frontend(settings, usage_thread=False)
    services = frontend.services
    assert services.mappings is not None
    dynamodb = services.mappings.client
    metrics = PushMetrics()
    server, _ = start_http_server(metrics_port, metrics_host, metrics.registry)
    metrics_url = f"http://{metrics_host}:{server.server_address[1]}/metrics"
    host = PushHost(services, MappingStore(dynamodb, event_source_mappings.table_name(settings)),
                    MappingLeases(dynamodb, event_source_mappings.table_name(settings)), lease_seconds=lease_seconds,
                    metrics=metrics, metrics_url=metrics_url)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    watch = None
    if parent_pid is not None:
        async def orphaned() -> None:
            if await wait_until_orphaned(parent_pid, stop.is_set):
                stop.set()

        watch = asyncio.create_task(orphaned())
    collector.settle()
    print(f"{READY_PREFIX} {host.owner} {metrics_url}", flush=True)
    try:
        await host.run(stop)
    finally:
        if watch is not None:
            watch.cancel()
        await services.dispatcher.close()
        server.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ferrymq.frontend.push",
                                     description="Deliver queues' messages to their event-source mappings' targets.")
    parser.add_argument("--lease-seconds", type=float,
                        help="how long a mapping's lease lasts without renewal (default FERRYMQ_PUSH_LEASE_SECONDS)")
    parser.add_argument("--metrics-host", default="127.0.0.1", help="address of /metrics (default %(default)s)")
    parser.add_argument("--metrics-port", type=int, default=0, help="port of /metrics, 0 for any free one")
    parser.add_argument("--parent-pid", type=int, help="stop (cleanly) once this process is no longer the parent")
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    logs.configure("push", settings)
    asyncio.run(serve(settings, args.lease_seconds or settings.push_lease_seconds, args.parent_pid,
                      args.metrics_host, args.metrics_port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
