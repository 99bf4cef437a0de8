"""``python -m ferrymq.frontend.push``: a push host (:mod:`.host`) with the front end's services.

Prints ``FERRYMQ_PUSH_READY <host id>`` once it runs; stops on SIGTERM/SIGINT, or once ``--parent-pid`` is no
longer its parent, giving its leases up.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from ferrymq import logs
from ferrymq.frontend.push.host import PushHost
from ferrymq.frontend.wiring import build_frontend
from ferrymq.metadata import event_source_mappings
from ferrymq.metadata.event_source_mappings import MappingStore
from ferrymq.metadata.mapping_leases import MappingLeases
from ferrymq.orphan_watch import wait_until_orphaned
from ferrymq.settings import Settings

READY_PREFIX = "FERRYMQ_PUSH_READY"


async def serve(settings: Settings, lease_seconds: float, parent_pid: int | None) -> None:
    frontend = build_frontend(settings, usage_thread=False)
    services = frontend.services
    assert services.mappings is not None
    dynamodb = services.mappings.client
    host = PushHost(services, MappingStore(dynamodb, event_source_mappings.table_name(settings)),
                    MappingLeases(dynamodb, event_source_mappings.table_name(settings)), lease_seconds=lease_seconds)
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
    print(f"{READY_PREFIX} {host.owner}", flush=True)
    try:
        await host.run(stop)
    finally:
        if watch is not None:
            watch.cancel()
        await services.dispatcher.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ferrymq.frontend.push",
                                     description="Deliver queues' messages to their event-source mappings' targets.")
    parser.add_argument("--lease-seconds", type=float,
                        help="how long a mapping's lease lasts without renewal (default FERRYMQ_PUSH_LEASE_SECONDS)")
    parser.add_argument("--parent-pid", type=int, help="stop (cleanly) once this process is no longer the parent")
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    logs.configure("push", settings)
    asyncio.run(serve(settings, args.lease_seconds or settings.push_lease_seconds, args.parent_pid))
    return 0


if __name__ == "__main__":
    sys.exit(main())
