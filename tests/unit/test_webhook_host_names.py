"""A webhook host is an IP literal or a valid DNS name, checked as DNS will read it."""

import ipaddress

import pytest

from relay.webhooks.guard import (
    InvalidHostNameError,
    IPAddress,
    normalised_host,
    resolve_permitted,
    url_problem,
)

LONGEST_LABEL = "a" * 63
# Three labels of 63 and one of 61, with their dots: 253 characters.
LONGEST_NAME = ".".join([LONGEST_LABEL] * 3 + ["c" * 61])

NOT_DNS_NAMES = [
    pytest.param("a" * 64 + ".example", id="label over 63"),
    pytest.param(LONGEST_NAME + "c", id="name over 253"),
    pytest.param("hooks..example", id="empty label"),
    pytest.param(".hooks.example", id="leading dot"),
    pytest.param("hooks_1.example", id="underscore"),
    pytest.param("ho!oks.example", id="punctuation"),
    pytest.param("ho*oks.example", id="asterisk"),
    pytest.param("hooks%2eexample", id="percent-encoded dot"),
    pytest.param("-hooks.example", id="leading hyphen"),
    pytest.param("hooks-.example", id="trailing hyphen"),
    pytest.param("xn--abc.example", id="A-label that is not Punycode"),
    pytest.param("x\u200dy.example", id="zero-width joiner"),
    pytest.param("\U0001f4a9.example", id="emoji"),
]


@pytest.mark.parametrize("host", NOT_DNS_NAMES)
def test_a_host_that_is_not_a_dns_name_is_refused(host: str) -> None:
    with pytest.raises(InvalidHostNameError):
        normalised_host(host)


@pytest.mark.parametrize("host", NOT_DNS_NAMES)
def test_a_url_whose_host_is_not_a_dns_name_is_refused_with_that_reason(host: str) -> None:
    assert url_problem(f"https://{host}/relay") == "invalid_host"


@pytest.mark.parametrize(
    ("host", "normalised"),
    [
        ("hooks.example.com", "hooks.example.com"),
        ("Hooks.EXAMPLE.com", "hooks.example.com"),
        ("b\u00fccher.example", "xn--bcher-kva.example"),
        ("\uff45\uff58\uff41\uff4d\uff50\uff4c\uff45.com", "example.com"),
        ("hooks\u3002example\u3002com", "hooks.example.com"),
        ("hooks.example.com.", "hooks.example.com."),
        (LONGEST_LABEL + ".example", LONGEST_LABEL + ".example"),
        (LONGEST_NAME, LONGEST_NAME),
        ("123.example.com", "123.example.com"),
    ],
)
def test_a_dns_name_is_normalised_as_dns_looks_it_up(host: str, normalised: str) -> None:
    assert normalised_host(host) == normalised
    assert url_problem(f"https://{host}/relay") is None


@pytest.mark.parametrize(
    "host",
    [
        "127\uff0e0\uff0e0\uff0e1",  # full-width full stops
        "127\u30020\u30020\u30021",  # ideographic full stops
        "\u2460\u2461\u2466.0.0.1",  # circled digits: 127.0.0.1 once folded
        "\uff11\uff10.0.0.1",  # full-width digits: 10.0.0.1
        "169\uff61254\uff61169\uff61254",  # half-width ideographic full stops
    ],
)
def test_a_name_that_normalises_to_a_private_address_is_refused(host: str) -> None:
    assert url_problem(f"https://{host}/relay") == "refused_address"


def test_an_ip_literal_is_left_to_the_address_rules() -> None:
    assert url_problem("https://[2606:4700:4700::1111]/relay") is None
    assert url_problem("https://8.8.8.8/relay") is None


async def test_a_name_that_is_not_a_dns_name_never_reaches_the_resolver() -> None:
    asked: list[str] = []

    async def resolver(host: str, port: int) -> list[IPAddress]:
        asked.append(host)
        return [ipaddress.ip_address("93.184.216.34")]

    with pytest.raises(InvalidHostNameError):
        await resolve_permitted("a" * 64 + ".example", 443, allowed=(), resolver=resolver)
    assert asked == []
