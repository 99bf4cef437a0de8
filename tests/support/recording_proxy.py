"""A TCP proxy that keeps a copy of every byte it forwards, both ways: what a test reads to learn what crossed a
connection (the worker RPC, the replication stream)."""

from __future__ import annotations

import contextlib
import socket
import threading

from tests.support.tcp_proxy import SwitchableProxy


class RecordingProxy(SwitchableProxy):
    def __init__(self, *args: object, **kwargs: object) -> None:
        self._seen = bytearray()
        self._seen_lock = threading.Lock()
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    @property
    def seen(self) -> bytes:
        with self._seen_lock:
            return bytes(self._seen)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                with self._seen_lock:
                    self._seen += chunk
                sink.sendall(chunk)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()
