"""Destination email addresses: syntax checked without DNS, normalized, at most 254;
the mailbox an address counts as; a domain's xn-- form."""

from __future__ import annotations

import pytest

from relay.email_address import ascii_domain, mailbox_of, parse_email, parse_mailbox
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


@pytest.mark.parametrize(
    ("raw", "mailbox"),
    [
        ("bomb@example.com", "bomb@example.com"),
        ("BOMB@Example.COM", "bomb@example.com"),
        ("bomb+1@example.com", "bomb@example.com"),
        ("Bomb+a+b@example.com", "bomb@example.com"),
        ("bomb@xn--bcher-kva.example", "bomb@bücher.example"),
        ("BOMB@BÜCHER.example", "bomb@bücher.example"),
        ("Straße@example.com", "strasse@example.com"),
        # Dots are the mailbox's own at most providers: kept.
        ("b.o.m.b@gmail.com", "b.o.m.b@gmail.com"),
        # Nothing before the "+": the local part is kept whole.
        ("+tag@example.com", "+tag@example.com"),
    ],
)
def test_an_address_counts_as_its_mailbox(raw: str, mailbox: str) -> None:
    assert parse_mailbox(raw) == mailbox
    assert mailbox_of(mailbox) == mailbox


def test_the_mailbox_is_checked_as_the_address_is() -> None:
    with pytest.raises(ParameterInvalid):
        parse_mailbox("bomb+1@")


@pytest.mark.parametrize(
    ("domain", "encoded"),
    [
        ("example.com", "example.com"),
        ("bücher.example", "xn--bcher-kva.example"),
        # A Cyrillic a: reads as example.com, is not.
        ("ex\u0430mple.com", "xn--exmple-4nf.com"),
    ],
)
def test_a_domain_shows_its_xn_form(domain: str, encoded: str) -> None:
    assert ascii_domain(domain) == encoded


def test_a_mailbox_that_folds_longer_still_fits_the_column() -> None:
    # Each ligature is 3 UTF-8 bytes and folds to 3 letters: 254 bytes, 212 characters.
    address = parse_email("\ufb03" * 21 + "@" + ("a" * 60 + ".") * 2 + "b" * 63 + ".coma")
    assert len(address) == 212
    assert mailbox_of(address) == "ffi" * 21 + address[21:]
    assert len(mailbox_of(address)) == 254
