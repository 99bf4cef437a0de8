"""``python -m ferrymq.storage``: build Settings, wire the worker, run it."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import socket
import sys
from pathlib import Path

from ferrymq import logs
from ferrymq.private_files import restrict_umask
from ferrymq.settings import Settings
from ferrymq.storage.server import WorkerConfig, run_worker
from ferrymq.storage.server.exit_guard import exit_within


def main(argv: list[str] | None = None) -> int:
    # Segments hold message bodies: nobody but the worker's own user may read them.
    restrict_umask()
    parser = argparse.ArgumentParser(prog="python -m ferrymq.storage", description="Run a FerryMQ storage worker.")
    served = parser.add_mutually_exclusive_group()
    served.add_argument(
        "--partitions",
        type=_partition_list,
        help="partitions to serve, e.g. 0,1,2 (default 0); empty for a spare worker of a cluster",
    )
    served.add_argument("--partition", type=int, help="a single partition to serve (same as --partitions N)")
    parser.add_argument(
        "--host",
        help="address to listen on, and the one published to the cluster; 'auto' for this machine's own address "
        "(a container's: the task's) (default FERRYMQ_WORKER_HOST)",
    )
    parser.add_argument("--port", type=int, help="port to listen on, 0 for any free one (default FERRYMQ_WORKER_PORT)")
    parser.add_argument(
        "--replication-port",
        type=int,
        help="port followers fetch from, when not the one listened on: a proxy or replication network in front "
        "(default FERRYMQ_WORKER_REPLICATION_PORT; 0: the listening port)",
    )
    parser.add_argument(
        "--admin-port",
        type=int,
        help="port of the admin HTTP listener (/health/live, /health/ready, /metrics), 0 for any free one "
        "(default FERRYMQ_WORKER_ADMIN_PORT)",
    )
    parser.add_argument("--admin-host", help="address of the admin HTTP listener (default FERRYMQ_WORKER_ADMIN_HOST)")
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="data directory, with a log directory p<partition> per partition "
        "(default FERRYMQ_DATA_DIR/workers/<worker id>)",
    )
    parser.add_argument("--worker-id", help="this worker's name (default FERRYMQ_WORKER_ID)")
    parser.add_argument("--cluster", help="the cluster this worker belongs to (default FERRYMQ_CLUSTER)")
    parser.add_argument("--segment-bytes", type=int, help="roll log segments at this size")
    parser.add_argument("--compact-min-bytes", type=int, help="compact the log only once it is this large")
    parser.add_argument(
        "--transfer-hold-seconds",
        type=int,
        help="how long messages being handed to another worker stay invisible (default 10)",
    )
    parser.add_argument(
        "--no-register", action="store_true", help="do not register in the partition map (benchmarks, experiments)"
    )
    parser.add_argument("--parent-pid", type=int, help="stop (cleanly) once this process is no longer the parent")
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    logs.configure("worker", settings)
    if args.cluster:
        settings = settings.with_(cluster=args.cluster)
    host = args.host or settings.worker_host
    if host == AUTO_HOST:
        host = own_address()
    config = WorkerConfig.from_settings(
        settings,
        partitions=args.partitions if args.partitions is not None else (args.partition or 0,),
        host=host,
        port=args.port,
        replication_port=args.replication_port,
        admin_host=args.admin_host,
        admin_port=args.admin_port,
        data_dir=args.data_dir,
        worker_id=args.worker_id,
        segment_bytes=args.segment_bytes,
        compact_min_bytes=args.compact_min_bytes,
        transfer_hold_seconds=args.transfer_hold_seconds,
        register=not args.no_register,
    )
    async def serve() -> int:
        code = await run_worker(config, settings, parent_pid=args.parent_pid)
        exit_within(code)
        return code

    serving = serve()
    try:
        import uvloop
    except ImportError:
        return asyncio.run(serving)
    return uvloop.run(serving)


AUTO_HOST = "auto"
"""A host that names this machine's own address: a container learns its address only when it starts."""


def own_address() -> str:
    """The address others reach this machine at: its host name's, unless that is loopback (as on many hosts
    without a name in DNS), else the one of the interface a route out leaves by (no packet is sent)."""
    try:
        address = socket.gethostbyname(socket.gethostname())
    except OSError:
        address = "127.0.0.1"
    if not ipaddress.ip_address(address).is_loopback:
        return address
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError:
            return address
        return str(probe.getsockname()[0])


def _partition_list(text: str) -> tuple[int, ...]:
    if text == "":
        return ()
    try:
        partitions = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of partitions: {text!r}") from None
    if any(p < 0 for p in partitions) or len(set(partitions)) != len(partitions):
        raise argparse.ArgumentTypeError(f"partitions must be distinct and not negative: {text!r}")
    return partitions


if __name__ == "__main__":
    sys.exit(main())
