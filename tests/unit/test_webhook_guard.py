import ipaddress
from collections.abc import Sequence

import pytest

from relay.webhooks.guard import (
    IPAddress,
    RefusedDestinationError,
    UnresolvableHostError,
    host_problem,
    is_permitted_address,
    resolve_permitted,
    system_resolver,
    url_problem,
)

LOOPBACK_V4 = ipaddress.IPv4Network("127.0.0.0/8")


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.255.255.254",
        "::1",
        "10.0.0.1",
        "10.255.255.255",
        "172.16.0.1",
        "172.31.255.255",
        "192.168.1.1",
        "169.254.169.254",
        "169.254.0.1",
        "100.64.0.1",
        "100.127.255.254",
        "0.0.0.0",  # noqa: S104 -- an address under test; nothing binds to it
        "0.1.2.3",
        "224.0.0.1",
        "239.255.255.250",
        "255.255.255.255",
        "240.0.0.1",
        "192.0.0.9",
        "192.0.2.1",
        "198.51.100.7",
        "203.0.113.9",
        "198.18.0.1",
        "198.19.255.255",
        "192.88.99.1",
        "::",
        "fe80::1",
        "fc00::1",
        "fd12:3456::1",
        "fec0::1",
        "ff02::1",
        "ff0e::1",
        "100::1",
        "2001:db8::1",
        "3fff::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        "::ffff:169.254.169.254",
        "::127.0.0.1",
        "::8.8.8.8",
        "2002:7f00:1::",
        "2002:a00:1::1",
        "2002:a9fe:a9fe::",
        "64:ff9b::a00:1",
        "64:ff9b::7f00:1",
        "64:ff9b::a9fe:a9fe",
        "64:ff9b:1::a00:1",
        "64:ff9b:1::808:808",
        "2001::1",
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",
        "2001:2::1",
        "5f00::1",
    ],
)
def test_non_global_destinations_are_refused(address: str) -> None:
    assert not is_permitted_address(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "address",
    [
        "8.8.8.8",
        "1.1.1.1",
        "93.184.216.34",
        "2606:4700:4700::1111",
        "2a00:1450:4001:80b::200e",
        "::ffff:8.8.8.8",
        "2002:808:808::1",
        "64:ff9b::808:808",
    ],
)
def test_global_unicast_destinations_are_permitted(address: str) -> None:
    assert is_permitted_address(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["127.0.0.1", "127.1.2.3", "::ffff:127.0.0.1"])
def test_an_operator_allowed_network_is_exempt(address: str) -> None:
    assert is_permitted_address(ipaddress.ip_address(address), [LOOPBACK_V4])


@pytest.mark.parametrize("address", ["10.0.0.1", "::1", "169.254.169.254"])
def test_an_allowed_network_exempts_nothing_outside_it(address: str) -> None:
    assert not is_permitted_address(ipaddress.ip_address(address), [LOOPBACK_V4])


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://hooks.example.com/relay", "not_https"),
        ("ftp://hooks.example.com/relay", "not_https"),
        ("hooks.example.com/relay", "not_https"),
        ("//hooks.example.com/relay", "not_https"),
        ("https://user:pass@hooks.example.com/relay", "userinfo"),
        ("https://user@hooks.example.com/relay", "userinfo"),
        ("https://evil.example@hooks.example.com/", "userinfo"),
        ("https://hooks.example.com/" + "a" * 2048, "too_long"),
        ("https:///relay", "no_host"),
        ("https://", "no_host"),
        ("https://:443/relay", "no_host"),
        ("https://hooks.example.com:99999/", "malformed"),
        ("https://hooks.example.com:0/", "malformed"),
        ("https://hooks.example.com:http/", "malformed"),
        ("https://[::1/", "malformed"),
        ("https://hooks.example.com/a b", "malformed"),
        ("https://hooks.example.com/\r\nX-Injected: 1", "malformed"),
        ("https://hooks.example.com\\@evil.example/", "malformed"),
        ("https://127.1/relay", "malformed"),
        ("https://2130706433/relay", "malformed"),
        ("https://0x7f000001/relay", "malformed"),
        ("https://0x7f.0.0.1/relay", "malformed"),
        ("https://hooks.example.123/relay", "malformed"),
        ("https://127.0.0.1/relay", "refused_address"),
        ("https://[::1]/relay", "refused_address"),
        ("https://169.254.169.254/latest/meta-data", "refused_address"),
        ("https://[::ffff:10.0.0.1]/relay", "refused_address"),
        # Hosts the HTTP client normalises (IDNA, NFKC) into IP literals or numeric forms.
        ("https://127\u30020\u30020\u30021/relay", "refused_address"),
        ("https://127\uff0e0\uff0e0\uff0e1/relay", "refused_address"),
        ("https://169\uff61254\uff61169\uff61254/latest", "refused_address"),
        ("https://0x7f\u30021/relay", "malformed"),
    ],
)
def test_unusable_webhook_urls_are_refused_with_a_reason(url: str, problem: str) -> None:
    assert url_problem(url) == problem


@pytest.mark.parametrize(
    "url",
    [
        "https://hooks.example.com/relay",
        "HTTPS://hooks.example.com/relay",
        "https://hooks.example.com:8443/relay?source=relay#frag",
        "https://hooks.example.com/" + "a" * (2048 - len("https://hooks.example.com/")),
        "https://8.8.8.8/relay",
        "https://[2606:4700:4700::1111]/relay",
        "https://bücher.example/relay",
        "https://localhost/relay",
        "https://123.example.com/relay",
        "https://0x.example.com/relay",
        "https://hooks.example.com./relay",
    ],
)
def test_usable_webhook_urls_pass(url: str) -> None:
    assert url_problem(url) is None


def test_a_url_naming_an_allowed_address_passes() -> None:
    assert url_problem("https://127.0.0.1:8443/relay", allowed=[LOOPBACK_V4]) is None


def resolver_for(*answers: str) -> "StubResolver":
    return StubResolver([ipaddress.ip_address(a) for a in answers])


class StubResolver:
    def __init__(self, answers: Sequence[IPAddress]) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> list[IPAddress]:
        self.calls.append((host, port))
        return self.answers


async def test_a_name_resolving_to_public_addresses_is_resolved_once() -> None:
    resolver = resolver_for("93.184.216.34", "2606:2800:220:1::1")

    addresses = await resolve_permitted("hooks.example.com", 443, allowed=(), resolver=resolver)

    assert [str(a) for a in addresses] == ["93.184.216.34", "2606:2800:220:1::1"]
    assert resolver.calls == [("hooks.example.com", 443)]


async def test_a_public_looking_name_resolving_to_a_private_address_is_refused() -> None:
    resolver = resolver_for("10.0.0.7")

    with pytest.raises(RefusedDestinationError, match=r"10\.0\.0\.7") as caught:
        await resolve_permitted("hooks.example.com", 443, allowed=(), resolver=resolver)

    assert caught.value.host == "hooks.example.com"


async def test_one_private_address_among_public_ones_refuses_the_name() -> None:
    resolver = resolver_for("93.184.216.34", "169.254.169.254")

    with pytest.raises(RefusedDestinationError):
        await resolve_permitted("hooks.example.com", 443, allowed=(), resolver=resolver)


async def test_an_ip_literal_host_is_not_sent_to_the_resolver() -> None:
    resolver = resolver_for("10.0.0.1")

    addresses = await resolve_permitted("8.8.8.8", 443, allowed=(), resolver=resolver)

    assert addresses == [ipaddress.IPv4Address("8.8.8.8")]
    assert resolver.calls == []


async def test_a_name_that_does_not_resolve_is_a_resolution_failure() -> None:
    async def failing(host: str, port: int) -> list[IPAddress]:
        raise OSError("Name or service not known")

    with pytest.raises(UnresolvableHostError, match="cannot resolve"):
        await resolve_permitted("nowhere.invalid", 443, allowed=(), resolver=failing)


async def test_a_name_with_no_addresses_is_a_resolution_failure() -> None:
    with pytest.raises(UnresolvableHostError, match="no address"):
        await resolve_permitted("empty.example", 443, allowed=(), resolver=resolver_for())


@pytest.mark.parametrize("host", ["127.1", "2130706433", "0x7f000001"])
async def test_numeric_spellings_of_loopback_are_refused_once_resolved(host: str) -> None:
    """The C resolver parses these numerically (no DNS query); the result is checked."""
    with pytest.raises(RefusedDestinationError, match=r"127\.0\.0\.1"):
        await resolve_permitted(host, 443, allowed=(), resolver=system_resolver)


@pytest.mark.parametrize(
    ("host", "problem"),
    [
        ("hooks.example.com", None),
        ("93.184.216.34", None),
        ("127.0.0.1", "refused_address"),
        ("::ffff:10.0.0.1", "refused_address"),
        ("127.1", "malformed"),
        ("2130706433", "malformed"),
    ],
)
def test_a_host_connected_to_as_written_is_checked_without_a_lookup(
    host: str, problem: str | None
) -> None:
    assert host_problem(host) == problem


def test_an_allowed_network_lets_a_literal_host_through() -> None:
    assert host_problem("127.0.0.1", [LOOPBACK_V4]) is None
