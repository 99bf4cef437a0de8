"""A TCP proxy a test can switch off: while off it accepts and at once closes every connection, so a client
sees the service as down (connection reset), without touching the service itself.

The target is looked up on every connection, so it can follow a service that restarts on a new port.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable


class SwitchableProxy:
    def __init__(self, target: Callable[[], tuple[str, int]], port: int = 0) -> None:
        """Listen on ``port`` (0: any free one) and forward to ``target()``."""
        self._target = target
        self.enabled = True
        self._listener = socket.create_server(("127.0.0.1", port))
        self.port = self._listener.getsockname()[1]
        self._closed = False
        self._thread = threading.Thread(target=self._accept, name="test-proxy", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self.enabled:
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                client.close()
                continue
            try:
                upstream = socket.create_connection(self._target(), timeout=5)
            except OSError:
                client.close()
                continue
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                if not self.enabled:
                    break
                sink.sendall(chunk)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
