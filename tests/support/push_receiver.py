"""A real HTTP receiver for push deliveries, on loopback port 0, in a thread of the test: it records every POST
(headers, body, parsed event) and answers what the test's ``answer`` function decides."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Push:
    headers: dict[str, str]
    body: bytes

    @property
    def records(self) -> list[dict[str, Any]]:
        return list(json.loads(self.body)["Records"])


Answer = Callable[[Push], tuple[int, bytes]]


class Receiver:
    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.pushes: list[Push] = []
        self.lock = threading.Lock()
        self.url = ""

    def records(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r for p in self.pushes for r in p.records]


@contextmanager
def receiving(answer: Answer = lambda push: (200, b"")) -> Iterator[Receiver]:
    receiver = Receiver(answer)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            push = Push({k: v for k, v in self.headers.items()}, self.rfile.read(int(self.headers["Content-Length"])))
            with receiver.lock:
                receiver.pushes.append(push)
            status, body = receiver.answer(push)
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
