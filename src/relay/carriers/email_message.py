"""The email that carries a passcode: headers, a text part and an HTML part.

Pure: the caller gives the time and the Message-ID, so the same inputs build
the same message. The HTML part is the text part escaped, with the code set
apart in large type; it loads nothing from outside (no image, font, stylesheet
or link) so opening it tells nobody anything.
"""

from __future__ import annotations

import html
from datetime import datetime
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime

from relay.carriers.base import Passcode
from relay.sms.custom import render_text
from relay.sms.text import render_subject


class InvalidAddress(ValueError):
    """An address that cannot stand in a `From` or `To` header."""


def email_text(passcode: Passcode, *, now: datetime) -> str:
    """The words of the email's body: the account's own email text for the locale, else
    the SMS template without its WebOTP line, which means nothing in a mailbox."""
    return render_text(passcode, "email", now=now)


def email_subject(passcode: Passcode) -> str:
    """The subject, ending with the code so that a notification's first line shows it."""
    return render_subject(locale=passcode.locale, brand=passcode.brand, code=passcode.code)


def parse_sender(value: str) -> Address:
    """`from` as configured: `relay@example.com` or `Example <relay@example.com>`."""
    address = _parse(value)
    if not address.username or not address.domain:
        raise InvalidAddress("from must be an email address with a domain")
    if not address.addr_spec.isascii():
        # It names every Message-ID, which must be ASCII; IDNA's xn-- form is.
        raise InvalidAddress("from must be ASCII (an international domain in its xn-- form)")
    return address


def build_message(
    passcode: Passcode, *, to: str, sender: Address, message_id: str, now: datetime
) -> EmailMessage:
    """The whole message for `to`; raises InvalidAddress when `to` is not one."""
    recipient = _parse(to)
    if not recipient.username or not recipient.domain or recipient.display_name:
        raise InvalidAddress("to must be a bare email address with a domain")
    text = email_text(passcode, now=now)
    message = EmailMessage()
    message["From"] = sender
    message["To"] = recipient
    message["Subject"] = email_subject(passcode)
    message["Date"] = format_datetime(now)
    message["Message-ID"] = message_id
    # RFC 3834: no vacation responder or list should answer a machine's message.
    message["Auto-Submitted"] = "auto-generated"
    message.set_content(text + "\n", cte="quoted-printable")
    message.add_alternative(_html(text, passcode.code, lang=passcode.locale), subtype="html")
    return message


def _parse(value: str) -> Address:
    # The header parser is lenient: it records defects instead of raising, so a
    # round trip through a header is the check that the value is one address.
    probe = EmailMessage()
    try:
        probe["To"] = value
        addresses = probe["To"].addresses
    except (ValueError, IndexError, TypeError) as exc:
        raise InvalidAddress("not an email address") from exc
    if len(addresses) != 1 or probe["To"].defects:
        raise InvalidAddress("not exactly one email address")
    found: Address = addresses[0]
    return found


def _html(text: str, code: str, *, lang: str) -> str:
    shown = html.escape(code)
    # The code usually follows the brand, which could hold the same characters.
    before, found, after = html.escape(text).rpartition(shown)
    paragraph = f"{before}<strong>{found}</strong>{after}" if found else html.escape(text)
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="{html.escape(lang)}">\n'
        '<head><meta charset="utf-8"></head>\n'
        '<body style="font-family: sans-serif; line-height: 1.5;">\n'
        f"<p>{paragraph}</p>\n"
        '<p style="font-size: 2em; font-weight: bold; letter-spacing: 0.2em;'
        f' font-family: monospace;">{shown}</p>\n'
        "</body>\n"
        "</html>\n"
    )
