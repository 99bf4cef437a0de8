"""The HTTP request as the pipeline sees it, whichever server or gateway delivered it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    # A prefix of ``path`` that a gateway in front adds (an API Gateway stage, a custom domain's base path): no
    # part of what the client signed is rewritten for it, only the queue URLs handed out carry it.
    base_path: str = ""

    @property
    def secure_transport(self) -> bool:
        """Whether the request reached us over TLS: what the policy condition ``aws:SecureTransport`` tests."""
        return self.scheme == "https"

    @property
    def routed_path(self) -> str:
        """The path below ``base_path``: where a query-protocol request names its queue."""
        if self.base_path and self.path.startswith(self.base_path):
            return self.path[len(self.base_path):] or "/"
        return self.path

    @property
    def base_url(self) -> str:
        """Where the client reached us, so the queue URLs we hand out route back here."""
        host = self.headers.get("host", "localhost")
        return f"{self.scheme}://{host}{self.base_path}"


def headers_of(raw: Sequence[tuple[bytes, bytes]]) -> dict[str, str]:
    """A request's headers as the pipeline reads them: lower-case names, repeated ones joined with commas."""
    headers: dict[str, str] = {}
    for raw_name, raw_value in raw:
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        headers[name] = f"{headers[name]},{value}" if name in headers else value
    return headers
