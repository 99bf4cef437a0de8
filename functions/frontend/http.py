"""The HTTP request as the pipeline sees it, whichever server or gateway delivered it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: str
    path: str
    query_string: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    scheme: str = "http"
    # The client's address as the server saw it (usage records); X-Forwarded-For, when present, wins.
    peer: str | None = None
    # Called once the signature has been verified: the gateway stops counting the body against the budget of
    # bytes buffered for requests not yet authenticated (functions/frontend/transport_limits.py).
    on_authenticated: Callable[[], None] | None = None

    @property
    def secure_transport(self) -> bool:
        """Whether the request reached us over TLS: what the policy condition ``aws:SecureTransport`` tests."""
        return self.scheme == "https"

    @property
    def base_url(self) -> str:
        """Where the client reached us, so the queue URLs we hand out route back here."""
        host = self.headers.get("host", "localhost")
        return f"{self.scheme}://{host}"
