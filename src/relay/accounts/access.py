"""Whether a found key may answer a request, pure: revoked, past its roll, or out of range.

The key's row is read in the one lookup of every request; this decides on it
without another statement. A refusal's reason is for the operator (the console,
`relay keys list`), never for the caller, who gets the same 401 as for a key
that does not exist.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from relay.accounts.models import Caller
from relay.config import IpNetwork
from relay.errors import InvalidRequest

# A roll's overlap, in seconds: the previous key keeps working this long.
MAX_OVERLAP = 24 * 3600
DEFAULT_OVERLAP = MAX_OVERLAP
MAX_NETWORKS = 50
IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class FoundKey:
    """What the hot-path lookup returns: the caller and everything that may refuse it."""

    caller: Caller
    revoked_at: datetime | None
    expires_at: datetime | None
    networks: tuple[str, ...] | None


def refusal(found: FoundKey, *, now: datetime, client: IpAddress | None) -> str | None:
    """Why this key may not answer this request, or None when it may."""
    if found.revoked_at is not None:
        return "revoked"
    if found.expires_at is not None and found.expires_at <= now:
        return "expired after roll"
    if found.networks is None:
        return None
    if client is None:
        return "client address unknown, key restricted to " + ", ".join(found.networks)
    client = unmapped(client)
    if admits(found.networks, client):
        return None
    return f"address {client} outside {', '.join(found.networks)}"


def unmapped(client: IpAddress) -> IpAddress:
    """An IPv4 client reached over an IPv6 socket (::ffff:a.b.c.d) is that IPv4 client."""
    if isinstance(client, ipaddress.IPv6Address) and client.ipv4_mapped is not None:
        return client.ipv4_mapped
    return client


def admits(networks: tuple[str, ...], client: IpAddress) -> bool:
    """Whether `client` is inside one of a key's stored ranges."""
    return any(unmapped(client) in network for network in parsed_networks(networks))


@lru_cache(maxsize=1024)
def parsed_networks(stored: tuple[str, ...]) -> tuple[IpNetwork, ...]:
    """Parsing only (the text is the stored one, read on each request): no state outlives it."""
    return tuple(ipaddress.ip_network(text) for text in stored)


def parse_networks(text: str) -> tuple[IpNetwork, ...] | None:
    """`10.0.0.0/8,2001:db8::/32` → those ranges; `any` → None (no restriction)."""
    if text.strip().lower() == "any":
        return None
    return check_networks(part.strip() for part in text.split(",") if part.strip())


def check_networks(texts: Iterable[str]) -> tuple[IpNetwork, ...]:
    """CIDR ranges, each checked; a bare address is its own /32 or /128."""
    found: list[IpNetwork] = []
    for text in texts:
        try:
            network = ipaddress.ip_network(text)
        except ValueError:
            raise InvalidRequest(
                f"{text} is not a CIDR range such as 10.0.0.0/8 or 2001:db8::/32"
                " (host bits must be zero), nor `any`.",
                param="networks",
            ) from None
        if network not in found:
            found.append(network)
    if not found:
        raise InvalidRequest("Give at least one CIDR range, or `any`.", param="networks")
    if len(found) > MAX_NETWORKS:
        raise InvalidRequest(f"A key takes at most {MAX_NETWORKS} ranges.", param="networks")
    return tuple(found)


def stored_networks(networks: Sequence[IpNetwork] | None) -> list[str] | None:
    return None if networks is None else [str(network) for network in networks]


def check_overlap(seconds: float) -> float:
    if not 0 <= seconds <= MAX_OVERLAP:
        raise InvalidRequest(
            f"The overlap is between 0 and {MAX_OVERLAP} seconds (24 h).", param="overlap"
        )
    return seconds
