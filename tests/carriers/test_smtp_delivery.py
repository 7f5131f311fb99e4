"""Email end to end: Relay over HTTPS sends a verification's code through a real SMTP
server over STARTTLS, and records the outcome (delivered at once, refused, or failed over).

Live keys route the `email` channel to the SMTP carrier `mail`, then to a sandbox carrier
of the email channel, `backup-mail`, which delivers whatever it is given.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.carriers.live_client import live_client
from tests.carriers.reading import attempts, event_types
from tests.carriers.smtp_server import SmtpServer, smtp_server
from tests.harness import RunningServer, ServerThread, test_settings
from tests.webhooks.receiver import isolated_database
from tests.webhooks.tls_receiver import ServerIdentity, write_identity

pytestmark = pytest.mark.asyncio(loop_scope="module")

MAILBOXES = (f"ada.{n}@example.org" for n in itertools.count())


@pytest.fixture(scope="module")
def identity(tmp_path_factory: pytest.TempPathFactory) -> ServerIdentity:
    return write_identity(tmp_path_factory.mktemp("smtp-tls"), "Relay SMTP test CA")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def mail_server_once(identity: ServerIdentity) -> AsyncIterator[SmtpServer]:
    async with smtp_server(identity, mode="starttls") as server:
        yield server


@pytest_asyncio.fixture(loop_scope="module")
async def mail_server(mail_server_once: SmtpServer) -> AsyncIterator[SmtpServer]:
    handler = mail_server_once.handler
    handler.mail_reply = handler.rcpt_reply = handler.data_reply = None
    handler.received.clear()
    yield mail_server_once


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory,
    database_url: str,
    identity: ServerIdentity,
    mail_server_once: SmtpServer,
) -> Iterator[RunningServer]:
    url = isolated_database(database_url, "smtp_e2e", tmp_path_factory.mktemp("db"))
    mail = {
        "kind": "smtp",
        "host": mail_server_once.host,
        "port": mail_server_once.port,
        "from": "Acme <no-reply@acme.example>",
        "ca_file": str(identity.ca_path),
        "timeout": 5,
    }
    settings = test_settings(
        tmp_path_factory.mktemp("data"),
        url,
        carriers={"mail": mail, "backup-mail": {"kind": "sandbox", "channel": "email"}},
        channel_routes={"email": ["mail", "backup-mail"]},
    )
    with ServerThread(settings) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="module")
async def live(server: RunningServer) -> AsyncIterator[httpx.AsyncClient]:
    async with live_client(server) as client:
        yield client


async def create(live: httpx.AsyncClient) -> dict[str, Any]:
    body = {"to": next(MAILBOXES), "channel": "email"}
    response = await live.post("/v1/verifications", json=body)
    assert response.status_code == 200, response.text
    created: dict[str, Any] = response.json()
    return created


async def test_the_code_in_an_accepted_emails_subject_approves_the_verification(
    live: httpx.AsyncClient, mail_server: SmtpServer
) -> None:
    created = await create(live)

    assert attempts(created) == [("mail", "delivered", None)]
    assert created["channel"] == "email"
    assert created["country"] is None
    [received] = mail_server.handler.received
    assert received.rcpt_tos == [created["to"]]
    assert received.tls
    code = str(received.message["Subject"]).rsplit(" ", 1)[-1]
    check = await live.post("/v1/verifications/check", json={"id": created["id"], "code": code})
    assert check.json()["status"] == "approved"
    assert await event_types(live, created["id"]) == [
        "verification.sent",
        "verification.delivered",
        "verification.approved",
    ]


async def test_a_refused_email_fails_over_to_the_next_carrier_with_the_smtp_code(
    live: httpx.AsyncClient, mail_server: SmtpServer
) -> None:
    mail_server.handler.rcpt_reply = "550 5.1.1 No such mailbox"

    created = await create(live)

    assert attempts(created) == [
        ("mail", "failed", "carrier_rejected"),
        ("backup-mail", "delivered", None),
    ]
    error = created["attempts"][0]["error"]
    assert error["carrier_code"] == "smtp_550"
    assert "No such mailbox" not in str(error)
    assert [attempt["channel"] for attempt in created["attempts"]] == ["email", "email"]


async def test_a_server_asking_to_try_later_is_unavailable_and_fails_over(
    live: httpx.AsyncClient, mail_server: SmtpServer
) -> None:
    mail_server.handler.mail_reply = "451 4.3.0 Try again later"

    created = await create(live)

    assert attempts(created) == [
        ("mail", "failed", "carrier_unavailable"),
        ("backup-mail", "delivered", None),
    ]
    assert created["attempts"][0]["error"]["carrier_code"] == "smtp_451"
    assert mail_server.handler.received == []


async def test_the_email_goes_to_the_address_as_given_and_a_resend_by_its_mailbox_too(
    live: httpx.AsyncClient, mail_server: SmtpServer, server: RunningServer
) -> None:
    body = {"to": "Grace.Hopper+Signup@Example.ORG", "channel": "email"}
    created = (await live.post("/v1/verifications", json=body)).json()
    server.clock.advance(30)
    body["to"] = "grace.hopper@example.org"
    resent = (await live.post("/v1/verifications", json=body)).json()

    assert resent["id"] == created["id"]
    assert [received.rcpt_tos for received in mail_server.handler.received] == [
        ["Grace.Hopper+Signup@example.org"],
        ["Grace.Hopper+Signup@example.org"],
    ]
