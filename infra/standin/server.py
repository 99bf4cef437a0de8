"""Running the durable stand-in: recover state, listen, announce, and snapshot on a clean stop."""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ferrymq.infra import asgi_serving
from ferrymq.infra.standin import model_registry, replay_clock
from ferrymq.infra.standin.access_keys import KeyPair
from ferrymq.infra.standin.asgi_bridge import StandinAsgiApp
from ferrymq.infra.standin.durable_app import DEFAULT_JOURNAL_LIMIT_BYTES, REPLAY_BUDGET_SECONDS, DurableApp
from ferrymq.infra.standin.layout import LOCK_FILE, READY_PREFIX
from ferrymq.infra.standin.request_auth import RequestVerifier
from ferrymq.infra.standin.snapshot import DURABLE_SERVICES
from ferrymq.infra.standin.ttl_sweeper import DEFAULT_INTERVAL_SECONDS, TtlSweeper
from ferrymq.private_files import private_dir

log = logging.getLogger(__name__)

# moto's handlers block; reads run in parallel on these threads, writes queue for the write lock.
WORKER_THREADS = 32


@contextmanager
def exclusive_data_dir(data_dir: Path) -> Iterator[None]:
    """Hold an advisory lock on ``data_dir`` so two stand-ins never share one journal; the OS drops it on exit."""
    private_dir(data_dir)
    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SystemExit(f"another stand-in is using {data_dir}") from None
        yield
    finally:
        os.close(fd)


def _dispatcher() -> Any:
    """moto's host-based dispatcher, with the host -> service lookup memoised.

    moto's own lookup lists moto's package directory and tries every URL pattern on each request, which
    costs more than a DynamoDB GetItem itself. The hosts it is asked about are inferred service hosts, a
    small set, and the answer for each never changes.
    """
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    class Dispatcher(DomainDispatcherApplication):
        def __init__(self) -> None:
            super().__init__(create_backend_app)
            self._backend_for_host = functools.lru_cache(maxsize=1024)(super().get_backend_for_host)

        def get_backend_for_host(self, host: str | None) -> Any:
            return self._backend_for_host(host)

    return Dispatcher()


def build_durable_app(data_dir: Path, journal_limit_bytes: int = DEFAULT_JOURNAL_LIMIT_BYTES,
                      replay_budget_seconds: float = REPLAY_BUDGET_SECONDS) -> DurableApp:
    """moto's dispatcher wrapped in a :class:`DurableApp`, with the durable services loaded up front.

    Loading them first means their modules exist before moto's clock is rerouted for replay. moto is told
    to stop keeping every model object it creates (:mod:`ferrymq.infra.standin.model_registry`) before recovery
    creates any.
    """
    from moto.backends import get_backend

    dispatcher = _dispatcher()
    for service in DURABLE_SERVICES:
        get_backend(service)  # type: ignore[call-overload]
    model_registry.install()
    clock = replay_clock.install()
    return DurableApp(dispatcher, data_dir, clock, journal_limit_bytes, replay_budget_seconds=replay_budget_seconds)


def serve(host: str, port: int, data_dir: Path, key_pair: KeyPair,
          journal_limit_bytes: int = DEFAULT_JOURNAL_LIMIT_BYTES, parent_pid: int | None = None,
          ttl_sweep_seconds: float = DEFAULT_INTERVAL_SECONDS, fd: int | None = None) -> None:
    """Recover state from ``data_dir``, serve requests signed with ``key_pair`` until SIGTERM/SIGINT (or
    ``parent_pid`` is gone; with a parent, SIGINT is left to it), then snapshot. ``fd``: a listening socket to
    serve, inherited, instead of one bound on ``host:port``.

    Expired items of DynamoDB tables with TTL enabled are deleted every ``ttl_sweep_seconds``
    (:mod:`ferrymq.infra.standin.ttl_sweeper`)."""
    with exclusive_data_dir(data_dir):
        durable = build_durable_app(data_dir, journal_limit_bytes)
        replayed = durable.recover()
        log.info("recovered %s: %d journal records replayed", data_dir, replayed)
        sock = socket.socket(fileno=fd) if fd is not None else asgi_serving.bind_socket(host, port)
        executor = ThreadPoolExecutor(max_workers=WORKER_THREADS, thread_name_prefix="standin")
        sweeper = TtlSweeper(durable, ttl_sweep_seconds)
        sweeper.start()
        try:
            app = StandinAsgiApp(durable, executor, RequestVerifier(key_pair))
            # Under `up` (a parent to watch) the stand-in stops last, on up's SIGTERM, not on a Ctrl-C that reaches
            # the gateway and the workers too: they still write their last usage, metrics and leases to it.
            asgi_serving.serve_asgi(app, sock, f"{READY_PREFIX} {asgi_serving.socket_url(sock)}", lifespan="off",
                                    parent_pid=parent_pid, ignore_sigint=parent_pid is not None)
        finally:
            sock.close()
            sweeper.stop()
            executor.shutdown(wait=True)
            durable.close()
