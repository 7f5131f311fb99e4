"""Destination email addresses: syntax checked without DNS, normalized, at most 254."""

from __future__ import annotations

import pytest

from relay.email_address import parse_email
from relay.errors import ParameterInvalid


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("ada@example.com", "ada@example.com"),
        ("Ada@EXAMPLE.COM", "Ada@example.com"),
        ("ada+otp@mail.example.org", "ada+otp@mail.example.org"),
        ("josé@exämple.de", "josé@exämple.de"),
    ],
)
def test_a_valid_address_is_kept_with_its_domain_normalized(raw: str, normalized: str) -> None:
    assert parse_email(raw) == normalized


@pytest.mark.parametrize(
    "raw",
    [
        "ada",
        "ada@",
        "@example.com",
        "ada@localhost",
        "ada@@example.com",
        "ada@exa mple.com",
        "ada..b@example.com",
        "a" * 65 + "@example.com",
        "a" * 64 + "@" + "b" * 63 + "." + "c" * 63 + "." + "d" * 58 + ".com",
    ],
)
def test_an_invalid_address_is_parameter_invalid_on_to(raw: str) -> None:
    with pytest.raises(ParameterInvalid) as raised:
        parse_email(raw)
    assert raised.value.param == "to"


def test_no_dns_lookup_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    import dns.resolver

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a DNS lookup was made")

    monkeypatch.setattr(dns.resolver.Resolver, "resolve", refuse)
    assert parse_email("ada@no-such-domain-anywhere.example") == (
        "ada@no-such-domain-anywhere.example"
    )
