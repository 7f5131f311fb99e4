"""The resolver aiohttp connects through: vetted addresses only, or the guard's error."""

import ipaddress
import socket
from collections.abc import Sequence

import pytest

from relay.webhooks.guard import IPAddress, RefusedDestinationError, UnresolvableHostError
from relay.webhooks.resolver import GuardedResolver

PUBLIC_V4 = "93.184.216.34"
PUBLIC_V6 = "2606:2800:220:1:248:1893:25c8:1946"


def answering(*answers: str) -> GuardedResolver:
    async def lookup(host: str, port: int) -> Sequence[IPAddress]:
        return [ipaddress.ip_address(answer) for answer in answers]

    return GuardedResolver(allowed=(), resolver=lookup)


async def test_permitted_addresses_come_back_numeric_with_the_name_kept_for_tls() -> None:
    results = await answering(PUBLIC_V4, PUBLIC_V6).resolve("hooks.example.com", 443, 0)

    assert [(r["host"], r["family"], r["port"]) for r in results] == [
        (PUBLIC_V4, socket.AF_INET, 443),
        (PUBLIC_V6, socket.AF_INET6, 443),
    ]
    assert {r["hostname"] for r in results} == {"hooks.example.com"}
    assert all(r["flags"] & socket.AI_NUMERICHOST for r in results)


async def test_only_the_family_asked_for_is_returned() -> None:
    results = await answering(PUBLIC_V4, PUBLIC_V6).resolve("hooks.example.com", 443)

    assert [r["host"] for r in results] == [PUBLIC_V4]


@pytest.mark.parametrize("private", ["10.0.0.7", "127.0.0.1", "169.254.169.254", "::1"])
async def test_a_name_resolving_to_a_private_address_is_refused(private: str) -> None:
    with pytest.raises(RefusedDestinationError) as refused:
        await answering(private).resolve("hooks.example.com", 443, 0)

    assert refused.value.address == ipaddress.ip_address(private)


async def test_one_private_address_among_public_ones_refuses_the_name() -> None:
    with pytest.raises(RefusedDestinationError):
        await answering(PUBLIC_V4, "192.168.1.10").resolve("hooks.example.com", 443, 0)


async def test_an_allowed_network_lets_a_loopback_receiver_through() -> None:
    async def lookup(host: str, port: int) -> Sequence[IPAddress]:
        return [ipaddress.ip_address("127.0.0.1")]

    allowed = (ipaddress.IPv4Network("127.0.0.0/8"),)
    resolver = GuardedResolver(allowed=allowed, resolver=lookup)

    [result] = await resolver.resolve("localhost", 8443, 0)

    assert (result["host"], result["hostname"]) == ("127.0.0.1", "localhost")


async def test_a_failed_lookup_is_an_unresolvable_host() -> None:
    async def failing(host: str, port: int) -> Sequence[IPAddress]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with pytest.raises(UnresolvableHostError):
        await GuardedResolver(allowed=(), resolver=failing).resolve("nowhere.example", 443, 0)
