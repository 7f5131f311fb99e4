"""Who is on the other end of a request: the one place that reads a client's address.

The TCP peer is the client unless it is one of `trusted_proxies`; then the
client is the right-most address of `X-Forwarded-For` that is not itself a
trusted proxy (a client may write anything to the left of what its proxy
appends, so only what trusted proxies added is believed).
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Sequence

from starlette.types import Scope

from relay.accounts.access import IpAddress
from relay.config import IpNetwork


def peer_address(scope: Scope) -> IpAddress | None:
    client = scope.get("client")
    if not client:
        return None
    return _address(client[0])


def is_trusted_peer(scope: Scope, trusted_proxies: Sequence[IpNetwork]) -> bool:
    peer = peer_address(scope)
    return peer is not None and _trusted(peer, trusted_proxies)


def client_address(scope: Scope, trusted_proxies: Sequence[IpNetwork]) -> IpAddress | None:
    """The request's client: the peer, or what trusted proxies say it is."""
    peer = peer_address(scope)
    if peer is None or not _trusted(peer, trusted_proxies):
        return peer
    hops = [
        part.strip()
        for name, value in scope["headers"]
        if name == b"x-forwarded-for"
        for part in value.decode("latin-1").split(",")
    ]
    for hop in reversed(hops):
        address = _address(hop)
        if address is None:
            # Unreadable: believe nothing further left, the proxy is the client.
            return peer
        if not _trusted(address, trusted_proxies):
            return address
        peer = address
    return peer


# Every request reads its client's address two or three times (the failure budget, the
# key's allowed networks, the rate limit), and most clients send many: kept per text.
@functools.lru_cache(maxsize=4096)
def limit_key(client: IpAddress | None) -> str:
    """What a per-client limit counts under: the address, or for IPv6 its /64, since one
    host commonly holds a whole /64 and could otherwise pick a fresh address per try."""
    if client is None:
        return "unknown"
    if isinstance(client, ipaddress.IPv6Address):
        if client.ipv4_mapped is not None:
            return str(client.ipv4_mapped)
        return str(ipaddress.IPv6Network((client, 64), strict=False))
    return str(client)


def _trusted(address: IpAddress, networks: Sequence[IpNetwork]) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in network for network in networks)


@functools.lru_cache(maxsize=4096)  # see limit_key; an address is immutable
def _address(text: str) -> IpAddress | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None
