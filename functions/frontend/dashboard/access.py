"""Who may reach the dashboard at all: loopback peers (unless the settings open it), under a loopback Host."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def is_loopback(address: str | None) -> bool:
    if not address:
        return False
    try:
        ip = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def host_is_loopback(host_header: str | None) -> bool:
    """Whether a Host header names this machine's loopback: ``localhost`` or a loopback address, any port."""
    if not host_header:
        return False
    host = urlsplit(f"//{host_header}").hostname or ""
    return host == "localhost" or host.endswith(".localhost") or is_loopback(host)


def same_origin(origin: str | None, host_header: str | None) -> bool:
    """An Origin header, when the browser sent one, must be the dashboard's own."""
    if origin is None:
        return True
    return urlsplit(origin).netloc.lower() == (host_header or "").lower()
