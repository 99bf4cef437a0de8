"""A request written to a socket as boto3 often writes it: its head, then its body in a later packet."""

from __future__ import annotations

import socket
import time


def send_request(sock: socket.socket, head: bytes, body: bytes, *, body_apart: bool, pause: float = 0.05) -> None:
    """Write ``head`` and ``body``: in one piece, or with ``body_apart`` the body ``pause`` seconds later."""
    if body_apart:
        sock.sendall(head)
        time.sleep(pause)
        sock.sendall(body)
    else:
        sock.sendall(head + body)
