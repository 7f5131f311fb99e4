"""Destination email addresses: the syntax check of the `email` channel, and the
mailbox an address reaches.

`email-validator` checks the address as RFC 5321/5322 and the IDNA rules say
(local part, domain labels, lengths), without a DNS lookup: a request never
waits on a resolver, and whether mail reaches the domain is the carrier's
answer (`carrier_rejected`, or undeliverable), as a phone number's reach is.

An email goes to the address as given; limits count by its mailbox
(`mailbox_of`), so that `Ada@x`, `ada@x` and `ada+1@x` cannot each get their
own share of them (docs/decisions/0044-one-mailbox-one-destination.md).
"""

from __future__ import annotations

import unicodedata

import idna
from email_validator import EmailNotValidError, validate_email

from relay.errors import ParameterInvalid

MAX_LENGTH = 254


def parse_email(raw: str, *, param: str = "to") -> str:
    """The address in its normalized form (domain in lower case and Unicode NFC), or
    400 parameter_invalid: at most 254 characters, a domain required."""
    if len(raw) > MAX_LENGTH:
        raise ParameterInvalid(
            f"An email address has at most {MAX_LENGTH} characters.", param=param
        )
    if "@" not in raw:
        raise ParameterInvalid(
            "The email channel needs an email address, such as ada@example.com.", param=param
        )
    try:
        # strict: the RFC length limits too (a local part of at most 64 characters).
        checked = validate_email(raw, check_deliverability=False, strict=True)
    except EmailNotValidError as exc:
        raise ParameterInvalid(f"Invalid email address: {exc}", param=param) from exc
    normalized = str(checked.normalized)
    if len(normalized) > MAX_LENGTH:
        raise ParameterInvalid(
            f"An email address has at most {MAX_LENGTH} characters.", param=param
        )
    return normalized


def mailbox_of(address: str) -> str:
    """The mailbox a `parse_email` address reaches, as limits and the one pending
    verification count it: the local part without its `+tag` and case-folded, the domain
    as `parse_email` left it (IDNA UTS #46 mapped, lower case, NFC: one form per domain,
    whether it came as Unicode or `xn--`). Dots stay: they matter at most providers."""
    local, _, domain = address.rpartition("@")
    # "+tag@x" has nothing before its "+": kept whole rather than made empty.
    local = local.partition("+")[0] or local
    if local.isascii():
        return f"{local.lower()}@{domain}"
    # Case folding may undo NFC (a folded letter may decompose): composed again. A
    # folded letter has no more code points than the original has UTF-8 bytes, which
    # email-validator bounds to 254; cut anyway, as the column holds no more.
    folded = unicodedata.normalize("NFC", local.casefold())
    return f"{folded}@{domain}"[:MAX_LENGTH]


def parse_mailbox(raw: str, *, param: str = "to") -> str:
    """`raw` checked as `parse_email` does, as its mailbox (`mailbox_of`)."""
    return mailbox_of(parse_email(raw, param=param))


def ascii_domain(domain: str) -> str:
    """A domain in the `xn--` form DNS resolves: what tells `example.com` spelled with a
    Cyrillic a (`xn--exmple-4nf.com`) from `example.com`. A domain not IDNA-valid is
    returned as it is."""
    if domain.isascii():
        return domain
    try:
        return idna.encode(domain).decode("ascii")
    except (idna.IDNAError, UnicodeError):
        return domain
