"""Destination email addresses: the syntax check of the `email` channel.

`email-validator` checks the address as RFC 5321/5322 and the IDNA rules say
(local part, domain labels, lengths), without a DNS lookup: a request never
waits on a resolver, and whether mail reaches the domain is the carrier's
answer (`carrier_rejected`, or undeliverable), as a phone number's reach is.
"""

from __future__ import annotations

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
