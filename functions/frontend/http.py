"""The HTTP request as the pipeline sees it, whichever server or gateway delivered it."""

from __future__ import annotations

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

    @property
    def base_url(self) -> str:
        """Where the client reached us, so the queue URLs we hand out route back here."""
        host = self.headers.get("host", "localhost")
        return f"{self.scheme}://{host}"
