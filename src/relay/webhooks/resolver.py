"""The SSRF check where a connection opens: a resolver that answers only with vetted addresses.

aiohttp connects to the addresses its resolver returns and to no other: the
host name is looked up once here, every address is checked by
`relay.webhooks.guard`, and a name with any refused address fails the
connection. TLS still sends the URL's host as SNI and verifies the
certificate against it. aiohttp never asks the resolver about an IP literal,
so the transport checks those itself before the request.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence

from aiohttp.abc import AbstractResolver, ResolveResult

from relay.webhooks.guard import IPAddress, IPNetwork, Resolver, resolve_permitted

# An IP address, not a name: the connect step must not look anything up again.
_NUMERIC = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV


class GuardedResolver(AbstractResolver):
    """`resolver`'s answer when every address is permitted, else the guard's error."""

    def __init__(self, *, allowed: Sequence[IPNetwork], resolver: Resolver) -> None:
        self._allowed = tuple(allowed)
        self._resolver = resolver

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        addresses = await resolve_permitted(
            host, port, allowed=self._allowed, resolver=self._resolver
        )
        return [
            ResolveResult(
                hostname=host,
                host=str(address),
                port=port,
                family=_family(address),
                proto=0,
                flags=_NUMERIC,
            )
            for address in addresses
            if family in (socket.AF_UNSPEC, _family(address))
        ]

    async def close(self) -> None:
        pass  # nothing held: each lookup is the resolver function's own


def _family(address: IPAddress) -> socket.AddressFamily:
    if isinstance(address, ipaddress.IPv4Address):
        return socket.AF_INET
    return socket.AF_INET6
