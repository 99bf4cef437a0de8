"""The push destination policy: which URLs a mapping may name and which addresses a delivery may connect to."""

from __future__ import annotations

import ipaddress
import re
import socket
from typing import Any

import pytest

from ferrymq.push import destinations
from ferrymq.push.destinations import DestinationPolicy, DestinationRefused
from ferrymq.settings import Settings

PUBLIC = DestinationPolicy()

FORBIDDEN = [
    ("127.0.0.1", "loopback"), ("127.255.255.254", "loopback"), ("::1", "loopback"),
    ("10.0.0.1", "private"), ("172.16.0.1", "private"), ("172.31.255.255", "private"), ("192.168.1.1", "private"),
    ("100.64.0.1", "carrier-grade NAT"), ("100.127.255.255", "carrier-grade NAT"),
    ("169.254.169.254", "link-local"), ("fe80::1", "link-local"),
    ("fc00::1", "private"), ("fd12:3456::1", "private"),
    ("224.0.0.1", "multicast"), ("239.255.255.250", "multicast"), ("ff02::1", "multicast"),
    ("0.0.0.0", "unspecified"), ("::", "unspecified"), ("0.1.2.3", "private"),
    ("240.0.0.1", "private"), ("255.255.255.255", "private"),
    ("192.0.2.1", "private"), ("198.51.100.1", "private"), ("203.0.113.1", "private"), ("2001:db8::1", "private"),
    ("198.18.0.1", "private"),
    # IPv4 inside IPv6: judged by the IPv4 address
    ("::ffff:127.0.0.1", "loopback"), ("::ffff:169.254.169.254", "link-local"), ("::ffff:10.0.0.1", "private"),
    ("::ffff:100.64.0.1", "carrier-grade NAT"), ("64:ff9b::a9fe:a9fe", "link-local"),
    ("2002:7f00:1::1", "loopback"), ("::7f00:1", "reserved"),
]
PUBLIC_ADDRESSES = ["8.8.8.8", "93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"]


@pytest.mark.parametrize(("address", "why"), FORBIDDEN)
def test_every_non_public_range_is_refused(address: str, why: str) -> None:
    refusal = PUBLIC.refusal(ipaddress.ip_address(address))
    assert refusal is not None and why in refusal


@pytest.mark.parametrize("address", PUBLIC_ADDRESSES)
def test_public_unicast_addresses_are_allowed(address: str) -> None:
    assert PUBLIC.refusal(ipaddress.ip_address(address)) is None


def test_allowed_networks_let_in_their_addresses_only() -> None:
    policy = DestinationPolicy.of("127.0.0.0/8, ::1/128,10.1.0.0/16")
    for allowed in ["127.0.0.1", "127.9.9.9", "::1", "10.1.2.3", "::ffff:127.0.0.1"]:
        assert policy.refusal(ipaddress.ip_address(allowed)) is None, allowed
    for refused in ["10.2.0.1", "169.254.169.254", "192.168.0.1", "::ffff:10.2.0.1", "fe80::1"]:
        assert policy.refusal(ipaddress.ip_address(refused)) is not None, refused


def test_a_bad_allowed_network_is_named() -> None:
    with pytest.raises(ValueError, match=re.escape("'10.0.0.0/33'")):
        destinations.networks("127.0.0.0/8,10.0.0.0/33")


HOSTILE_URLS = [
    ("http://2130706433/", "four decimal numbers"),
    ("http://0x7f.1/", "four decimal numbers"),
    ("http://0x7f000001/", "four decimal numbers"),
    ("http://0177.0.0.1/", "four decimal numbers"),
    ("http://127.1/", "four decimal numbers"),
    ("http://127.0.0.1./", "four decimal numbers"),
    ("http://a.b.0x10/", "four decimal numbers"),
    ("http://[fe80::1%25eth0]/", "zone id"),
    ("http://[::ffff:127.0.0.1%251]/", "zone id"),
    ("http://user@example.com/", "user information"),
    ("http://@example.com/", "user information"),
    ("http://example.com:0/", "port"),
    ("http://example.com:65536/", "port"),
    ("gopher://example.com/", "http or https"),
    ("file:///etc/passwd", "http or https"),
    ("http://exa$mple.com/", "DNS name"),
    ("http://example.com\\@127.0.0.1/", "user information"),
]


@pytest.mark.parametrize(("url", "words"), HOSTILE_URLS)
def test_urls_that_could_smuggle_a_host_are_refused(url: str, words: str) -> None:
    with pytest.raises(DestinationRefused, match=words):
        destinations.parse(url)


def test_a_plain_url_is_taken_apart_with_its_host_header() -> None:
    where = destinations.parse("https://Hooks.Example.com:8443/a/b?x=1#frag")
    assert where == destinations.Destination("https", "hooks.example.com", 8443, "Hooks.Example.com:8443", "/a/b?x=1")
    assert destinations.parse("http://[2606:4700::1]/").host == "2606:4700::1"
    assert destinations.parse("http://h.example").target == "/"


def _answers(*addresses: str) -> Any:
    def resolver(host: str, port: int, **_: Any) -> list[tuple[Any, ...]]:
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
                for a in addresses]
    return resolver


def test_a_name_resolving_to_one_bad_address_among_good_ones_is_refused() -> None:
    where = destinations.parse("https://hooks.example.com/")
    with pytest.raises(DestinationRefused, match=re.escape("169.254.169.254")):
        destinations.resolve(where, PUBLIC, _answers("93.184.216.34", "169.254.169.254", "8.8.8.8"))
    with pytest.raises(DestinationRefused, match="::1"):
        destinations.resolve(where, PUBLIC, _answers("2606:4700::1", "::1"))
    assert destinations.resolve(where, PUBLIC, _answers("93.184.216.34", "8.8.8.8")) == [
        ipaddress.ip_address("93.184.216.34"), ipaddress.ip_address("8.8.8.8")]


def test_a_name_that_does_not_resolve_is_refused_at_delivery() -> None:
    def nowhere(host: str, port: int, **_: Any) -> list[tuple[Any, ...]]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with pytest.raises(DestinationRefused, match="does not resolve"):
        destinations.resolve(destinations.parse("https://hooks.example.com/"), PUBLIC, nowhere)
    with pytest.raises(DestinationRefused, match="no address"):
        destinations.resolve(destinations.parse("https://hooks.example.com/"), PUBLIC, _answers())


def test_numeric_hosts_resolving_to_loopback_are_caught_by_the_address_check_too() -> None:
    # getaddrinfo reads these as 127.0.0.1 without DNS: the resolved-address check refuses them whatever the parse.
    for host in ["2130706433", "0x7f.1", "0177.0.0.1", "127.1"]:
        where = destinations.Destination("http", host, 80, host, "/")
        with pytest.raises(DestinationRefused, match=re.escape("127.0.0.1, a loopback address")):
            destinations.resolve(where, PUBLIC)


def test_literal_addresses_are_checked_without_resolving() -> None:
    def never(*_: Any, **__: Any) -> list[tuple[Any, ...]]:
        raise AssertionError("a literal address is not resolved")

    with pytest.raises(DestinationRefused, match="link-local"):
        destinations.resolve(destinations.parse("http://[::ffff:169.254.169.254]/"), PUBLIC, never)
    assert destinations.resolve(destinations.parse("http://8.8.8.8/"), PUBLIC, never) == [
        ipaddress.ip_address("8.8.8.8")]


def test_the_setting_takes_cidrs_and_stops_at_a_bad_one() -> None:
    assert Settings.from_env({}).push_allowed_networks == ()
    taken = Settings.from_env({"FERRYMQ_PUSH_ALLOWED_NETWORKS": " 127.0.0.0/8, ::1/128 ,"}).push_allowed_networks
    assert DestinationPolicy.of(taken) == DestinationPolicy(
        (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128")))
    with pytest.raises(ValueError, match="'localhost' is not a network"):
        Settings.from_env({"FERRYMQ_PUSH_ALLOWED_NETWORKS": "127.0.0.0/8,localhost"})
