"""Which destinations an outbound webhook may reach.

A webhook URL comes from an API client, so without this guard Relay would
POST wherever a client points it: the cloud metadata service, the database,
the admin port of a neighbour (SSRF). Only globally reachable unicast
addresses are permitted, unless the operator allows a network by setting.

The address is checked after resolution, on the exact address the transport
then connects to, so a name that resolves to a public address at validation
time and to a private one at delivery time (DNS rebinding) is still refused.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal
from urllib.parse import urlsplit

import idna
from yarl import URL

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Awaitable[Sequence[IPAddress]]]
UrlProblem = Literal[
    "malformed", "not_https", "too_long", "userinfo", "no_host", "invalid_host", "refused_address"
]

MAX_URL_LENGTH = 2048
# RFC 1035: 253 characters in the dotted form, without the root's trailing dot.
MAX_NAME_LENGTH = 253

# IANA special-purpose registries, listed here rather than trusting
# `ipaddress.is_global` alone: its tables differ between Python patch releases
# and it calls multicast "global".
_REFUSED_V4 = tuple(
    ipaddress.IPv4Network(net)
    for net in (
        "0.0.0.0/8",  # "this network", unspecified
        "10.0.0.0/8",
        "100.64.0.0/10",  # carrier-grade NAT
        "127.0.0.0/8",
        "169.254.0.0/16",  # link-local, cloud metadata (169.254.169.254)
        "172.16.0.0/12",
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # documentation
        "192.88.99.0/24",  # deprecated 6to4 relay anycast
        "192.168.0.0/16",
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # documentation
        "203.0.113.0/24",  # documentation
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, limited broadcast
    )
)

# Only global unicast (2000::/3) is permitted for IPv6; inside it these are not
# globally reachable. Teredo (2001::/32) lies in 2001::/23 and is refused
# outright: the IPv4 it reaches is obfuscated and relayed.
_GLOBAL_UNICAST_V6 = ipaddress.IPv6Network("2000::/3")
_REFUSED_V6 = tuple(
    ipaddress.IPv6Network(net)
    for net in (
        "2001::/23",  # IETF protocol assignments, Teredo, benchmarking
        "2001:db8::/32",  # documentation
        "3fff::/20",  # documentation
    )
)
_NAT64_WELL_KNOWN = ipaddress.IPv6Network("64:ff9b::/96")


class GuardError(Exception):
    """The destination of a webhook cannot be used."""


class UnresolvableHostError(GuardError):
    """The webhook host name did not resolve to any address."""


class InvalidHostNameError(GuardError):
    """The webhook host is neither an IP literal nor a valid DNS name."""


class RefusedDestinationError(GuardError):
    """The webhook host resolved to an address that is not permitted."""

    def __init__(self, host: str, address: IPAddress) -> None:
        super().__init__(f"{host} resolves to {address}, which is not a permitted destination")
        self.host = host
        self.address = address


def is_permitted_address(address: IPAddress, allowed: Sequence[IPNetwork] = ()) -> bool:
    """True when a webhook may connect to `address`."""
    if any(address in network for network in allowed):
        return True
    embedded = _embedded_ipv4(address)
    if embedded is not None:
        return is_permitted_address(embedded, allowed)
    if isinstance(address, ipaddress.IPv4Address):
        return address.is_global and not any(address in net for net in _REFUSED_V4)
    return _is_global_unicast_v6(address)


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address a connection to this IPv6 address actually reaches."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64_WELL_KNOWN:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _is_global_unicast_v6(address: ipaddress.IPv6Address) -> bool:
    # IPv4-compatible (::a.b.c.d), the local-use NAT64 prefix 64:ff9b:1::/48
    # (its prefix length, hence where the IPv4 sits, is the operator's
    # choice) and every other block outside 2000::/3 end up refused here.
    return (
        address in _GLOBAL_UNICAST_V6
        and address.is_global
        and not any(address in net for net in _REFUSED_V6)
    )


def url_problem(url: str, *, allowed: Sequence[IPNetwork] = ()) -> UrlProblem | None:
    """Why a client-supplied webhook URL is unusable, or None when it is fine.

    Syntax only, plus a host written as an IP literal; names are checked
    when they are resolved at delivery time.
    """
    if len(url) > MAX_URL_LENGTH:
        return "too_long"
    # Whitespace, control characters and backslashes are read differently by
    # different URL parsers; refusing them keeps this check and httpx agreeing.
    if any(ch <= " " or ch in "\x7f\\" for ch in url):
        return "malformed"
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError when not a number in 0-65535
    except ValueError:
        return "malformed"
    if port == 0:
        return "malformed"
    if parts.scheme.lower() != "https":
        return "not_https"
    if "@" in parts.netloc:
        return "userinfo"
    if not parts.hostname:
        return "no_host"
    host = parts.hostname
    if _ip_literal(host) is None:
        try:
            host = normalised_host(host)
        except InvalidHostNameError:
            return "invalid_host"
    problem = host_problem(host, allowed)
    if problem is not None:
        return problem
    # The client connects to the host as yarl normalises it (IDNA, NFKC), and
    # that can turn a name into an IP literal: "127。0。0。1" is 127.0.0.1.
    try:
        connected = URL(url).raw_host
    except ValueError:
        return "malformed"
    if not connected:
        return "no_host"
    return host_problem(connected, allowed)


def endpoint(url: str) -> str:
    """The receiver a URL names, as written: everything before its path, query or fragment.

    `https://hooks.example:8443/a?b` → `https://hooks.example:8443`. Not
    normalised: the delivery loop matches it against stored URLs as a prefix.
    """
    scheme, separator, rest = url.partition("://")
    if not separator:
        return url
    for index, char in enumerate(rest):
        if char in "/?#":
            return f"{scheme}://{rest[:index]}"
    return url


def normalised_host(host: str) -> str:
    """`host` as DNS looks it up: IDNA 2008 (UTS #46 mapping, so case, full-width
    forms and ideographic dots fold), plain ASCII letters, digits and hyphens.

    InvalidHostNameError when it is not a valid DNS name: an empty label, a
    label over 63 characters or starting or ending with a hyphen, a name over
    253 characters, any other character. A client library would refuse such a
    name only at connect time, or read it differently from this check.
    """
    try:
        encoded = idna.encode(host, uts46=True, std3_rules=True).decode("ascii")
    except (idna.IDNAError, UnicodeError) as exc:
        raise InvalidHostNameError(f"{host!r} is not a valid DNS name: {exc}") from exc
    if len(encoded.removesuffix(".")) > MAX_NAME_LENGTH:
        raise InvalidHostNameError(f"{host!r} is longer than {MAX_NAME_LENGTH} characters")
    return encoded


def host_problem(host: str, allowed: Sequence[IPNetwork] = ()) -> UrlProblem | None:
    """Why a URL's host cannot be connected to as written, or None for a name to resolve.

    An IP literal is connected to without any lookup, so it is checked here;
    numeric spellings that are not literals are refused.
    """
    literal = _ip_literal(host)
    if literal is None:
        return "malformed" if _looks_numeric(host) else None
    if not is_permitted_address(literal, allowed):
        return "refused_address"
    return None


def _looks_numeric(host: str) -> bool:
    # Browsers and the C resolver read "127.1", "2130706433" or "0x7f.1" as
    # IPv4 addresses; Python's ipaddress does not. Such spellings have no
    # honest use, so they are refused rather than left to resolve to anything.
    last_label = host.rstrip(".").rpartition(".")[2].lower()
    return last_label.isdigit() or (last_label.startswith("0x") and last_label.isalnum())


def _ip_literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


async def system_resolver(host: str, port: int) -> list[IPAddress]:
    """Resolve `host` with the operating system resolver, without blocking the loop."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = [ipaddress.ip_address(info[4][0]) for info in infos]
    return list(dict.fromkeys(addresses))


async def resolve_permitted(
    host: str, port: int, *, allowed: Sequence[IPNetwork], resolver: Resolver
) -> list[IPAddress]:
    """Resolve `host` once and return its addresses, all of them permitted.

    The caller must connect to one of the returned addresses, never to the
    name again: a second lookup could answer differently.
    """
    addresses = await _resolve(host, port, resolver)
    for address in addresses:
        # Every address must pass, not just the first: a name answering with
        # one public and one private record would otherwise let a retry or a
        # fallback reach the private one.
        if not is_permitted_address(address, allowed):
            raise RefusedDestinationError(host, address)
    return addresses


async def _resolve(host: str, port: int, resolver: Resolver) -> list[IPAddress]:
    literal = _ip_literal(host)
    if literal is not None:
        return [literal]
    # Never handed to the system resolver unchecked: its IDNA codec raises on
    # names this refuses, and the attempt must fail as an attempt, not crash.
    normalised_host(host)
    try:
        addresses = list(await resolver(host, port))
    except OSError as exc:
        raise UnresolvableHostError(f"cannot resolve {host}: {exc}") from exc
    if not addresses:
        raise UnresolvableHostError(f"{host} resolves to no address")
    return addresses
