"""Where push deliveries may go (docs/design/push-delivery.md, "Destinations a tenant may name").

A Destination URL is a tenant's input that the service acts on from inside its own network, so it must not reach
what only that network reaches: the workers' ports and the gateway on loopback, private networks, link-local
instance metadata. A destination's host must resolve to public unicast addresses only, every one of them, unless
an address lies in one of the operator's ``FERRYMQ_PUSH_ALLOWED_NETWORKS``. The check runs when a mapping is made
or changed and again at every delivery, which then connects to the very address it checked, never to a second
resolution, so a name that resolves elsewhere later (DNS rebinding) gains nothing.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import socket
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[..., Sequence[tuple[Any, ...]]]

# A DNS name of letters, digits, hyphens and underscores, dot-separated; an IPv4 literal must be dotted-decimal.
_NAME = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,62})(?:\.[a-z0-9_](?:[a-z0-9_-]{0,62}))*\.?")
_NUMERIC_LABEL = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)")
# Forms that carry an IPv4 address inside IPv6, each judged by that IPv4 address.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_SHARED = ipaddress.ip_network("100.64.0.0/10")


class DestinationRefused(ValueError):
    """A destination the policy does not allow; the message says why, for the caller."""


@dataclass(frozen=True, slots=True)
class Destination:
    """A Destination URL taken apart: where to connect and what to say there."""

    scheme: str
    host: str
    """The host as named, without brackets (a DNS name or an IP literal)."""
    port: int
    host_header: str
    """The Host header, and (https) the server name the certificate must carry."""
    target: str
    """The request target: path and query."""


def parse(url: str) -> Destination:
    """``url`` taken apart, or DestinationRefused for forms that could name a host other than the one they show:
    user information, a zone id, an IPv4 address spelt in decimal, octal or hex, a host of other characters."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        raise DestinationRefused("Destination Url must name a port between 1 and 65535.") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise DestinationRefused("Destination Url must be an absolute http or https URL.")
    if "@" in parts.netloc:
        raise DestinationRefused("Destination Url must be without user information.")
    if port is not None and not 1 <= port <= 65535:
        raise DestinationRefused("Destination Url must name a port between 1 and 65535.")
    host = parts.hostname
    bracketed = parts.netloc.startswith("[")
    if "%" in host:
        raise DestinationRefused("Destination Url must not carry an IPv6 zone id.")
    if bracketed:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise DestinationRefused("Destination Url has an invalid IPv6 address.") from None
    elif not _NAME.fullmatch(host):
        raise DestinationRefused("Destination Url's host must be a DNS name or an IP address.")
    elif _NUMERIC_LABEL.fullmatch(host.rstrip(".").rsplit(".", 1)[-1]) and not _dotted_quad(host):
        # A last label that is a number makes the whole host an IPv4 address to getaddrinfo and to browsers
        # alike (2130706433, 0x7f.1, 0177.0.0.1, 127.1): only the plain dotted-decimal form is taken.
        raise DestinationRefused("Destination Url's IPv4 address must be written as four decimal numbers.")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Destination(parts.scheme, host, port or (443 if parts.scheme == "https" else 80), parts.netloc, target)


def _dotted_quad(host: str) -> bool:
    try:
        address = ipaddress.IPv4Address(host)
    except ValueError:
        return False
    return str(address) == host


def literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


@functools.lru_cache(maxsize=16)
def networks(text: str | tuple[str, ...]) -> tuple[IPNetwork, ...]:
    """The networks a comma-separated list (or tuple) of CIDRs names; ValueError names a bad one."""
    items = text.split(",") if isinstance(text, str) else text
    found = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        try:
            found.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ValueError(f"FERRYMQ_PUSH_ALLOWED_NETWORKS: {item!r} is not a network in CIDR form") from None
    return tuple(found)


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


@dataclass(frozen=True, slots=True)
class DestinationPolicy:
    """Public unicast addresses, and any in ``allowed``."""

    allowed: tuple[IPNetwork, ...] = ()

    @classmethod
    def of(cls, allowed: str | tuple[str, ...]) -> DestinationPolicy:
        return cls(networks(allowed))

    def _allowed(self, address: IPAddress) -> bool:
        return any(address.version == n.version and address in n for n in self.allowed)

    def refusal(self, address: IPAddress) -> str | None:
        """Why ``address`` may not be pushed to, or None if it may."""
        if self._allowed(address):
            return None
        if isinstance(address, ipaddress.IPv6Address):
            embedded = _embedded_ipv4(address)
            if embedded is not None:
                if address.ipv4_mapped is not None:
                    return self.refusal(embedded)
                why = self.refusal(embedded)
                if why is not None:
                    return why
        if address.is_loopback:
            return "a loopback address"
        if address.is_unspecified:
            return "the unspecified address"
        if address.is_link_local:
            return "a link-local address"
        if address.is_multicast:
            return "a multicast address"
        if isinstance(address, ipaddress.IPv4Address) and address in _SHARED:
            return "a carrier-grade NAT address"
        if address.is_private:
            return "a private or special-purpose address"
        if address.is_reserved or not address.is_global:
            return "a reserved or non-global address"
        return None

    def check(self, host: str, addresses: Iterable[IPAddress]) -> list[IPAddress]:
        """``addresses`` if every one of them is allowed (and there is one); DestinationRefused otherwise."""
        found = list(dict.fromkeys(addresses))
        if not found:
            raise DestinationRefused(f"Destination host {host} resolves to no address.")
        for address in found:
            why = self.refusal(address)
            if why is not None:
                raise DestinationRefused(
                    f"Destination host {host} resolves to {address}, {why}; push destinations must be public "
                    "addresses (or in FERRYMQ_PUSH_ALLOWED_NETWORKS).")
        return found


def addresses_of(answers: Iterable[tuple[Any, ...]]) -> list[IPAddress]:
    """The addresses of getaddrinfo's answers (any scope id dropped: the policy judges the address alone)."""
    found = []
    for answer in answers:
        text = str(answer[4][0]).split("%", 1)[0]
        found.append(ipaddress.ip_address(text))
    return found


def resolve(destination: Destination, policy: DestinationPolicy,
            resolver: Resolver = socket.getaddrinfo) -> list[IPAddress]:
    """Every address ``destination``'s host resolves to, if all are allowed: the addresses to connect to.
    DestinationRefused if any is not, or if the host does not resolve."""
    address = literal(destination.host)
    if address is not None:
        return policy.check(destination.host, [address])
    try:
        answers = resolver(destination.host, destination.port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise DestinationRefused(f"Destination host {destination.host} does not resolve.") from None
    return policy.check(destination.host, addresses_of(answers))
