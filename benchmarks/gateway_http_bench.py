"""CPU per request of the gateway's HTTP layer alone: uvicorn with the gateway's protocol, ASGI app and direct way,
in front of a front end that answers at once.

    python benchmarks/gateway_http_bench.py --runs 3

Two servers are started as processes of their own, on the gateway's uvicorn configuration (``serve_asgi``) and
its protocol class (``guarded_protocol``): ``asgi`` answers every request through the ASGI app
(``create_app``), as the gateway did before it had a direct way; ``direct`` is the gateway as it runs now, where
a small request read whole skips the ASGI cycle. The front end behind both answers SendMessage with a canned
result, so what is measured is the HTTP layer and the glue to the front end. They are loaded in turn with
:mod:`sqs_bench`'s SendMessage on ``--connections`` connections, and the growth of each server's utime + stime is
divided by the requests answered. It prints each run and the medians, and asserts nothing.

    python benchmarks/gateway_http_bench.py --against base=../ferrymq-base

adds the ``direct`` server of another checkout (run by its own ``.venv``), for an A/B check of a change.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from soak import own_cpu_seconds
from sqs_bench import Target, _run_process

READY = "HTTP_BENCH_READY"


class CannedFrontend:
    """What the ASGI app and the direct way need of a front end; every request is a successful SendMessage."""

    metrics = None
    services = None

    def __init__(self) -> None:
        from ferrymq.protocol.responses import render_result

        self._render = render_result

    async def handle(self, request: Any) -> Any:
        if request.on_authenticated is not None:
            request.on_authenticated()
        result = {"MD5OfMessageBody": "0" * 32, "MessageId": "00000000-0000-0000-0000-000000000000"}
        return self._render("json", "SendMessage", result, "00000000-0000-0000-0000-000000000000")

    async def identify(self, request: Any) -> None:
        pass

    def refuse(self, request: Any, error: Any) -> Any:
        from ferrymq.protocol.responses import render_error

        return render_error("json", error, "refused")

    def start(self) -> None:
        pass

    async def close(self) -> None:
        pass


def serve(direct: bool) -> None:
    """One server (in a child process): prints ``READY url`` and serves until terminated."""
    from ferrymq.frontend.asgi import create_gateway
    from ferrymq.infra import asgi_serving
    from ferrymq.infra.http_protocol import guarded_protocol
    from ferrymq.settings import Settings

    settings = Settings(dashboard_enabled=False)
    gateway = create_gateway(settings, CannedFrontend())  # type: ignore[arg-type]
    sock = asgi_serving.bind_socket("127.0.0.1", 0)
    protocol = guarded_protocol(settings.header_timeout_seconds, settings.max_connections_per_client,
                                gateway if direct else None)
    asgi_serving.serve_asgi(gateway.app, sock, f"{READY} {asgi_serving.socket_url(sock)}", lifespan="on",
                            http_protocol=protocol, keep_alive_seconds=settings.keep_alive_seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--against", action="append", default=[], help="NAME=PATH of a checkout with a .venv")
    parser.add_argument("--serve", choices=["asgi", "direct"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve == "direct")
        return
    servers: dict[str, tuple[subprocess.Popen[str], str]] = {}
    commands = {name: [sys.executable, __file__, "--serve", name] for name in ("asgi", "direct")}
    for name, path in (a.split("=", 1) for a in args.against):
        checkout = Path(path).resolve()
        commands[name] = [str(checkout / ".venv" / "bin" / "python"),
                          str(checkout / "benchmarks" / "gateway_http_bench.py"), "--serve", "direct"]
    try:
        for name, command in commands.items():
            process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
            assert process.stdout is not None
            line = process.stdout.readline()
            if not line.startswith(READY):
                raise RuntimeError(f"{name} did not start")
            servers[name] = (process, line.split()[-1])
        figures: dict[str, list[float]] = {name: [] for name in servers}
        with multiprocessing.Pool(1) as pool:
            for run in range(args.runs + 1):
                order = list(servers) if run % 2 == 0 else list(servers)[::-1]
                for name in order:
                    process, url = servers[name]
                    target = Target(url, "test", "test", "us-east-1")
                    before, started = own_cpu_seconds(process.pid), time.monotonic()
                    seconds = 1.0 if run == 0 else args.seconds  # the first round warms up
                    _, moved = pool.apply(_run_process, ((target, f"{url}/000000000000/q", "SendMessage", seconds,
                                                          args.connections),))
                    cpu = (own_cpu_seconds(process.pid) - before) * 1e6 / max(moved, 1)
                    if run:
                        figures[name].append(cpu)
                        print(f"run {run} {name:<7} {cpu:6.1f} µs/request  {moved / (time.monotonic() - started):6.0f}"
                              " requests/s", flush=True)
        for name, cpus in figures.items():
            print(f"{name:<7} median {statistics.median(cpus):6.1f} µs/request (min {min(cpus):.1f}, "
                  f"max {max(cpus):.1f})")
    finally:
        for process, _ in servers.values():
            process.terminate()
            process.wait(10)


if __name__ == "__main__":
    main()
