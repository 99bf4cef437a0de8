"""Serving an ASGI app with uvicorn (httptools, uvloop) on a socket bound up front.

Binding the socket ourselves means port 0 works and the real port is known before uvicorn starts; the
ready line is printed once uvicorn reports it is serving. SIGTERM and SIGINT stop uvicorn gracefully and the
call returns normally, so callers can persist state afterwards and exit 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any, Literal

import uvicorn
import uvloop

from ferrymq import collector
from ferrymq.orphan_watch import wait_until_orphaned

LifespanMode = Literal["auto", "on", "off"]


def bind_socket(host: str, port: int, backlog: int = 2048, *, reuse_port: bool = False,
                listen: bool = True) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0 picks a free one). With ``reuse_port``, other sockets with
    it may bind the same port, and the kernel spreads new connections over those that listen (``SO_REUSEPORT``);
    without ``listen``, the socket only holds the port for them."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        if listen:
            sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock


def socket_url(sock: socket.socket, scheme: str = "http") -> str:
    host, port = sock.getsockname()[:2]
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


@contextmanager
def _graceful_signals() -> Iterator[None]:
    """Harmless SIGTERM/SIGINT handlers for uvicorn to restore and re-raise after its graceful stop."""

    def ignore(signum: int, frame: FrameType | None) -> None:
        pass

    previous = {sig: signal.signal(sig, ignore) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class _Server(uvicorn.Server):
    """uvicorn's server, deaf to the signals in ``ignored``, and woken once a second while it serves.

    uvicorn looks ten times a second whether it is to stop, and refreshes its ``Date`` header every tenth look: an
    idle gateway or stand-in woke ten times a second for that (about 0.1 % of a core each on this machine's figures).
    Here the loop looks once a second, which is as often as the header changes, and a stop wakes it at once.
    """

    def __init__(self, config: uvicorn.Config, ignored: frozenset[int]) -> None:
        super().__init__(config)
        self._ignored = ignored
        self._stopping: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if sig not in self._ignored:
            super().handle_exit(sig, frame)
            self._wake()

    def stop(self) -> None:
        """Stop serving, as SIGTERM does."""
        self.should_exit = True
        self._wake()

    def _wake(self) -> None:
        # From a signal handler too: only the loop's thread-safe call is safe there.
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)

    async def main_loop(self) -> None:
        self._loop, self._stopping = asyncio.get_running_loop(), asyncio.Event()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            # Ten of uvicorn's ticks a second: each of ours refreshes the Date header, as its tenth does.
            counter = (counter + 10) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), 1.0)
            should_exit = await self.on_tick(counter)


async def _stop_when_orphaned(server: _Server, parent_pid: int) -> None:
    if await wait_until_orphaned(parent_pid, lambda: server.should_exit):
        server.stop()


async def _serve_and_announce(server: _Server, sock: socket.socket, ready_line: str,
                              parent_pid: int | None) -> None:
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    watch = asyncio.create_task(_stop_when_orphaned(server, parent_pid)) if parent_pid is not None else None
    while not server.started and not serving.done():
        await asyncio.sleep(0.005)
    if server.started:
        collector.settle()
        print(ready_line, flush=True)
    try:
        await serving
    finally:
        if watch is not None:
            watch.cancel()


def serve_asgi(app: Any, sock: socket.socket, ready_line: str, lifespan: LifespanMode = "auto",
               parent_pid: int | None = None, *, http_protocol: type[asyncio.Protocol] | None = None,
               tls_files: tuple[Path, Path] | None = None, keep_alive_seconds: float = 5.0,
               ignore_sigint: bool = False) -> None:
    """Serve ``app`` on ``sock`` until SIGTERM/SIGINT, or until ``parent_pid`` is no longer the parent.

    With ``ignore_sigint`` only SIGTERM (or the parent's end) stops it: a terminal's Ctrl-C reaches the whole
    process group, and a service the others still need on their way out must wait for its supervisor's SIGTERM.

    ``ready_line`` is printed once serving. ``http_protocol`` replaces uvicorn's httptools protocol (the
    gateway's adds limits, infra/http_protocol.py); ``tls_files`` (certificate, key) serve HTTPS.  WebSocket
    upgrades are off: an upgrade request is answered as the plain HTTP request it also is.
    """
    config = uvicorn.Config(
        app,
        lifespan=lifespan,
        loop="uvloop",
        http=http_protocol or "httptools",
        ws="none",
        access_log=False,
        log_level="warning",
        # uvicorn's own handlers would print its lines in its own format: they go to ours (ferrymq.logs).
        log_config=None,
        server_header=False,
        # The gateway is the edge of the local stack: a client's X-Forwarded-For must not pass for its address
        # (the policy condition key aws:SourceIp).
        proxy_headers=False,
        # Idle keep-alive connections must not hold a stop up.
        timeout_graceful_shutdown=3,
        timeout_keep_alive=keep_alive_seconds,  # type: ignore[arg-type]
        ssl_certfile=str(tls_files[0]) if tls_files else None,
        ssl_keyfile=str(tls_files[1]) if tls_files else None,
    )
    server = _Server(config, frozenset({signal.SIGINT}) if ignore_sigint else frozenset())
    with _graceful_signals(), asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(_serve_and_announce(server, sock, ready_line, parent_pid))
