"""Email over SMTP as a carrier: one verification code per message, through a relay.

The client is aiosmtplib (asyncio, typed, maintained). Each submit opens its
own connection, says EHLO, secures it, authenticates when asked to, sends one
message and quits: an OTP email is rare next to the cost of a handshake, and a
pool of idle connections is a later lever, not a need.

What the carrier promises:

* TLS unless `security = "none"` (which the settings refuse without
  `allow_plaintext = true`): `tls` wraps the connection from its first byte,
  `starttls` upgrades it and gives up, sending nothing, when the server does
  not offer STARTTLS. The server's certificate and name are always checked,
  against `ca_file` when it is set, else against the system's authorities.
  AUTH is only ever sent over TLS.
* A message the server accepts after DATA is delivered at once: SMTP has no
  receipt, and a bounce comes back, if ever, as another email to `from`.
* A 5xx reply to MAIL, RCPT or DATA refuses this message:
  `CarrierRejected("smtp_<code>")`. A 4xx reply anywhere, a refused login
  or one the server requires (530, 534, 535, 538), a connection, TLS or
  timeout failure, or a 5xx greeting or EHLO is `CarrierUnavailable`: the
  carrier, not the message, is the trouble.
* The code and the body are never logged, and are cut out of any reply text
  kept in an error.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import secrets
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.message import EmailMessage
from pathlib import Path
from typing import Literal

import aiosmtplib

from relay.carriers.base import (
    CarrierError,
    CarrierRejected,
    CarrierUnavailable,
    DeliveryReport,
    OutboundSms,
    ReportSink,
    SubmitReceipt,
)
from relay.carriers.email_message import InvalidAddress, build_message, parse_sender

__all__ = ["SmtpCarrier", "SmtpSettings"]

log = logging.getLogger(__name__)

Security = Literal["starttls", "tls", "none"]
_DEFAULT_PORTS: dict[str, int] = {"tls": 465, "starttls": 587, "none": 25}
_HELO_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]")
# The Message-ID is kept as the attempt's carrier_message_id (128 characters).
_MAX_DOMAIN = 80
_MAX_REPLY = 200
# Authentication required (530), too weak (534), or needing encryption (538): this
# carrier's set-up is wrong whatever the message, as with a refused login (535).
_AUTH = frozenset({530, 534, 538})


@dataclass(frozen=True, kw_only=True)
class SmtpSettings:
    """One `[carriers.NAME]` table with `kind = "smtp"`; `from` is `sender` here."""

    name: str
    host: str
    sender: str
    port: int | None = None
    security: Security = "starttls"
    allow_plaintext: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    timeout: float = 10.0
    ca_file: str | None = None
    helo_name: str | None = None

    def __post_init__(self) -> None:
        for message, passed in self._checks().items():
            if not passed:
                raise ValueError(message)

    @property
    def server_port(self) -> int:
        return self.port if self.port is not None else _DEFAULT_PORTS[self.security]

    def _checks(self) -> dict[str, bool]:
        domain = _sender_domain(self.sender)
        return {
            "host must be a non-empty string": isinstance(self.host, str) and bool(self.host),
            "port must be between 1 and 65535": self.port is None or _is_port(self.port),
            "security must be 'starttls', 'tls' or 'none'": self.security in _DEFAULT_PORTS,
            "security = 'none' sends codes in clear text: set allow_plaintext = true to"
            " mean it": self.security != "none" or self.allow_plaintext is True,
            "username and password go together": (self.username is None) == (self.password is None),
            "username and password need TLS (security 'starttls' or 'tls')": (
                self.username is None or self.security != "none"
            ),
            "from must be an email address, optionally with a display name": domain is not None,
            f"from's domain must be at most {_MAX_DOMAIN} characters": len(domain or "")
            <= _MAX_DOMAIN,
            "timeout must be positive": _is_positive(self.timeout),
            "ca_file must be a readable PEM file of certificates": self.ca_file is None
            or _loads_as_ca(self.ca_file),
            "helo_name must be a host name": self.helo_name is None
            or _HELO_NAME.fullmatch(self.helo_name) is not None,
        }


class SmtpCarrier:
    """Sends each code as an email; a message the server accepts is delivered."""

    def __init__(
        self, settings: SmtpSettings, *, clock: Callable[[], datetime] | None = None
    ) -> None:
        self._settings = settings
        self._sender = parse_sender(settings.sender)
        self._clock = clock or (lambda: datetime.now(UTC))
        self._tls = tls_context(settings.ca_file) if settings.security != "none" else None
        self._helo_name = settings.helo_name

    @property
    def name(self) -> str:
        return self._settings.name

    @property
    def channel(self) -> Literal["email"]:
        return "email"

    async def start(self, reports: ReportSink) -> None:
        """Nothing to start: every submit has its own connection and knows its outcome."""

    async def close(self) -> None:
        """Nothing held open between submits."""

    async def submit(self, sms: OutboundSms) -> SubmitReceipt:
        passcode = sms.passcode
        if passcode is None:
            raise CarrierRejected("smtp_no_passcode", "An email carries a passcode; none given.")
        now = self._clock()
        message_id = f"<{secrets.token_hex(16)}@{self._sender.domain}>"
        try:
            message = build_message(
                passcode, to=sms.to, sender=self._sender, message_id=message_id, now=now
            )
        except InvalidAddress as exc:
            raise CarrierRejected("smtp_invalid_address", str(exc)) from exc
        await self._send(message, secret=passcode.code)
        log.info("smtp.accepted carrier=%s attempt=%s", self.name, sms.attempt_id)
        final = DeliveryReport(
            carrier=self.name,
            carrier_message_id=message_id,
            status="delivered",
            error_code=None,
            at=self._clock(),
        )
        return SubmitReceipt(carrier_message_id=message_id, final=final)

    async def _send(self, message: EmailMessage, *, secret: str) -> None:
        settings = self._settings
        if self._helo_name is None:
            # Looked up once: a reverse DNS query per email would slow every send.
            self._helo_name = await asyncio.to_thread(socket.getfqdn)
        client = aiosmtplib.SMTP(
            hostname=settings.host,
            port=settings.server_port,
            timeout=settings.timeout,
            use_tls=settings.security == "tls",
            start_tls=settings.security == "starttls",
            tls_context=self._tls,
            local_hostname=self._helo_name,
        )
        try:
            # One bound for the whole exchange, so a server that answers each command
            # just in time cannot hold the attempt past its dispatch lease.
            async with asyncio.timeout(settings.timeout):
                await client.connect()
                if settings.username is not None and settings.password is not None:
                    await client.login(settings.username, settings.password)
                await client.send_message(message)
        except (aiosmtplib.SMTPException, OSError) as exc:
            client.close()
            # Not chained: the server's raw reply stays out of any logged traceback.
            raise outcome(exc, secret=secret) from None
        except asyncio.CancelledError:
            client.close()
            raise
        await _quit(client)


def tls_context(ca_file: str | None) -> ssl.SSLContext:
    """Certificates and host names checked; `ca_file` replaces the system's authorities."""
    context = ssl.create_default_context(cafile=ca_file)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def outcome(exc: Exception, *, secret: str) -> CarrierError:
    """What a failed SMTP exchange means for routing."""
    if isinstance(exc, aiosmtplib.SMTPRecipientsRefused) and exc.recipients:
        exc = exc.recipients[0]
    refused_here = (
        aiosmtplib.SMTPSenderRefused,
        aiosmtplib.SMTPRecipientRefused,
        aiosmtplib.SMTPDataError,
    )
    if isinstance(exc, aiosmtplib.SMTPResponseException):
        reply = _reply_text(exc.message, secret=secret)
        code = f"smtp_{exc.code}"
        if isinstance(exc, refused_here) and 500 <= exc.code < 600 and exc.code not in _AUTH:
            return CarrierRejected(code, f"The SMTP server refused the message: {reply}")
        return CarrierUnavailable(code, f"The SMTP server answered {exc.code}: {reply}")
    if isinstance(exc, aiosmtplib.SMTPNotSupported):
        # An address that needs SMTPUTF8 on a server without it: another may take it.
        return CarrierRejected("smtp_not_supported", _reply_text(str(exc), secret=secret))
    if isinstance(exc, TimeoutError):
        return CarrierUnavailable("smtp_timeout", "The SMTP server did not answer in time.")
    if isinstance(exc, ssl.SSLError) or isinstance(exc.__cause__, ssl.SSLError):
        return CarrierUnavailable("smtp_tls_failed", "TLS with the SMTP server failed.")
    if isinstance(exc, aiosmtplib.SMTPConnectError | ConnectionError | OSError):
        return CarrierUnavailable("smtp_connect_failed", "The SMTP server cannot be reached.")
    # STARTTLS not offered, AUTH not offered, and the like: nothing was sent.
    return CarrierUnavailable("smtp_failed", _reply_text(str(exc), secret=secret))


async def _quit(client: aiosmtplib.SMTP) -> None:
    # The message is accepted already: a QUIT that fails changes nothing.
    try:
        await client.quit()
    except (aiosmtplib.SMTPException, OSError):
        client.close()


def _reply_text(text: str, *, secret: str) -> str:
    """A server's reply as kept in an error: one line, short, without the code."""
    line = " ".join(text.split())
    if secret:
        line = line.replace(secret, "…")
    return line[:_MAX_REPLY]


def _loads_as_ca(path: object) -> bool:
    if not isinstance(path, str) or not Path(path).is_file():
        return False
    try:
        tls_context(path)
    except (OSError, ssl.SSLError):
        return False
    return True


def _sender_domain(sender: object) -> str | None:
    if not isinstance(sender, str):
        return None
    try:
        return parse_sender(sender).domain
    except InvalidAddress:
        return None


def _is_port(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536


def _is_positive(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )
