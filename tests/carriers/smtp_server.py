"""A real SMTP server on loopback (aiosmtpd), over implicit TLS, STARTTLS or neither.

Each test scripts the replies to MAIL, RCPT and DATA, and reads back every
command the server saw and every message it accepted, parsed.
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any, Literal

from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from tests.webhooks.tls_receiver import ServerIdentity

Mode = Literal["tls", "starttls", "plain"]


@dataclass
class Received:
    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage
    tls: bool
    authenticated: bool
    helo_name: str | None


@dataclass
class Handler:
    """Replies as scripted (None: accept) and records what it saw."""

    mail_reply: str | None = None
    rcpt_reply: str | None = None
    data_reply: str | None = None
    commands: list[str] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)

    async def handle_MAIL(  # noqa: N802 - aiosmtpd's hook names
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: Any
    ) -> str:
        self.commands.append("MAIL")
        if self.mail_reply is not None:
            return self.mail_reply
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        return "250 OK"

    async def handle_RCPT(  # noqa: N802 - aiosmtpd's hook names
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: Any
    ) -> str:
        self.commands.append("RCPT")
        if self.rcpt_reply is not None:
            return self.rcpt_reply
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(  # noqa: N802 - aiosmtpd's hook names
        self, server: SMTP, session: Session, envelope: Envelope
    ) -> str:
        self.commands.append("DATA")
        if self.data_reply is not None:
            return self.data_reply
        assert isinstance(envelope.original_content, bytes)
        message = email.message_from_bytes(envelope.original_content, policy=email.policy.default)
        assert isinstance(message, EmailMessage)
        self.received.append(
            Received(
                mail_from=envelope.mail_from or "",
                rcpt_tos=list(envelope.rcpt_tos),
                message=message,
                tls=session.ssl is not None,
                authenticated=bool(session.authenticated),
                helo_name=session.host_name,
            )
        )
        return "250 2.0.0 Ok: queued as 4F1A2B"


@dataclass
class SmtpServer:
    host: str
    port: int
    handler: Handler


class Accounts:
    """AUTH LOGIN/PLAIN against one user name and password."""

    def __init__(self, username: str, password: str) -> None:
        self._expected = (username.encode(), password.encode())
        self.attempts = 0

    def __call__(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        self.attempts += 1
        if not isinstance(data, LoginPassword):
            return AuthResult(success=False, handled=False)
        given = (bytes(data.login), bytes(data.password))
        return AuthResult(success=given == self._expected, handled=False)


def server_tls(identity: ServerIdentity) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(identity.cert_path, identity.key_path)
    return context


@asynccontextmanager
async def smtp_server(
    identity: ServerIdentity,
    *,
    mode: Mode,
    host: str = "127.0.0.1",
    accounts: Accounts | None = None,
) -> AsyncIterator[SmtpServer]:
    """`tls`: TLS from the first byte; `starttls`: STARTTLS offered and required before
    mail; `plain`: no TLS offered at all."""
    loop = asyncio.get_running_loop()
    handler = Handler()
    context = server_tls(identity)

    def protocol() -> SMTP:
        return SMTP(
            handler,
            hostname="smtp.test",
            tls_context=context if mode == "starttls" else None,
            require_starttls=mode == "starttls",
            authenticator=accounts,
            auth_required=accounts is not None,
            loop=loop,
        )

    server = await loop.create_server(protocol, host, 0, ssl=context if mode == "tls" else None)
    port = server.sockets[0].getsockname()[1]
    try:
        yield SmtpServer(host, port, handler)
    finally:
        server.close()
        await server.wait_closed()


@asynccontextmanager
async def silent_server() -> AsyncIterator[int]:
    """A port that accepts connections and never says a word: the client's timeout."""
    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()
