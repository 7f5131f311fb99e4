"""The email carrier under the delivery layer: a send reaches a real SMTP server over
STARTTLS, and its outcome is recorded (delivered at once, refused, or failed over).

Choosing a channel per send belongs to the API; here a small address book stands in
for it, turning the Send API's phone number into the mailbox the email goes to.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
import pytest_asyncio

from relay.accounts.models import Caller
from relay.carriers.base import OutboundSms, ReportSink, SubmitReceipt
from relay.carriers.smtp import SmtpCarrier
from relay.db.sql import Sql
from relay.messages.models import Message
from relay.messages.service import SendRequest
from relay.services import Services, build_services
from tests.carriers.smtp_server import SmtpServer, smtp_server
from tests.harness import test_settings
from tests.webhooks.receiver import isolated_database
from tests.webhooks.tls_receiver import ServerIdentity, write_identity

PHONE = "+14155550123"
MAILBOX = "ada@example.org"
CODE = "731905"
MESSAGE_IDS = Sql("SELECT carrier_message_id FROM attempts WHERE message_id = :id ORDER BY at")


class AddressBook:
    """The email carrier, given the mailbox a phone number stands for."""

    def __init__(self, inner: SmtpCarrier) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    async def start(self, reports: ReportSink) -> None:
        await self.inner.start(reports)

    async def submit(self, sms: OutboundSms) -> SubmitReceipt:
        return await self.inner.submit(replace(sms, to=MAILBOX))

    async def close(self) -> None:
        await self.inner.close()


@pytest.fixture(scope="module")
def identity(tmp_path_factory: pytest.TempPathFactory) -> ServerIdentity:
    return write_identity(tmp_path_factory.mktemp("smtp-tls"), "Relay SMTP test CA")


@pytest_asyncio.fixture
async def mail_server(identity: ServerIdentity) -> AsyncIterator[SmtpServer]:
    async with smtp_server(identity, mode="starttls") as server:
        yield server


@pytest_asyncio.fixture
async def services(
    tmp_path: Path, database_url: str, identity: ServerIdentity, mail_server: SmtpServer
) -> AsyncIterator[Services]:
    url = await asyncio.to_thread(isolated_database, database_url, "smtp_delivery", tmp_path)
    mail = {
        "kind": "smtp",
        "host": mail_server.host,
        "port": mail_server.port,
        "from": "Acme <no-reply@acme.example>",
        "ca_file": str(identity.ca_path),
        "timeout": 5,
    }
    settings = test_settings(
        tmp_path,
        url,
        carriers={"mail": mail, "backup": {"kind": "sandbox"}},
        routes={"default": ["mail", "backup"]},
    )
    built = build_services(settings)
    carriers = built.delivery.carriers.carriers
    carrier = carriers["mail"]
    assert isinstance(carrier, SmtpCarrier)
    carriers["mail"] = AddressBook(carrier)
    await built.delivery.start(dispatch=True)
    try:
        yield built
    finally:
        await built.close()


async def send(services: Services) -> tuple[Caller, Message]:
    account = await services.accounts.create_account("Acme")
    caller = await services.accounts.authenticate(account.live_key)
    request = SendRequest(to=PHONE, code=CODE, locale="en", metadata={}, webhook_url=None)
    return caller, await services.messages.send(caller, request)


async def message_ids(services: Services, message: Message) -> list[str | None]:
    rows = await services.db.read(lambda tx: tx.fetch(MESSAGE_IDS, {"id": message.id}))
    return [row["carrier_message_id"] for row in rows]


async def test_an_email_the_server_accepts_is_delivered_with_the_send(
    services: Services, mail_server: SmtpServer
) -> None:
    _, message = await send(services)

    assert message.status.value == "delivered"
    assert [(a.carrier, a.status.value) for a in message.attempts] == [("mail", "delivered")]
    [received] = mail_server.handler.received
    assert received.rcpt_tos == [MAILBOX]
    assert str(received.message["Subject"]).endswith(CODE)
    assert await message_ids(services, message) == [received.message["Message-ID"]]


async def test_a_refused_email_fails_over_to_the_next_carrier_with_the_smtp_code(
    services: Services, mail_server: SmtpServer
) -> None:
    mail_server.handler.rcpt_reply = "550 5.1.1 No such mailbox"

    _, message = await send(services)

    assert [(a.carrier, a.status.value) for a in message.attempts] == [
        ("mail", "failed"),
        ("backup", "delivered"),
    ]
    error = message.attempts[0].error
    assert error is not None
    assert error["code"] == "carrier_rejected"
    assert error["carrier_code"] == "smtp_550"
    assert "No such mailbox" not in str(error)


async def test_a_server_asking_to_try_later_is_unavailable_and_fails_over(
    services: Services, mail_server: SmtpServer
) -> None:
    mail_server.handler.mail_reply = "451 4.3.0 Try again later"

    _, message = await send(services)

    assert [(a.carrier, a.status.value) for a in message.attempts] == [
        ("mail", "failed"),
        ("backup", "delivered"),
    ]
    error = message.attempts[0].error
    assert error is not None
    assert error["code"] == "carrier_unavailable"
    assert error["carrier_code"] == "smtp_451"
    assert mail_server.handler.received == []
