"""The email carrier against a real SMTP server on loopback (aiosmtpd), over real TLS."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from typing import Any

import pytest
import pytest_asyncio

from relay.carriers.base import CarrierRejected, CarrierUnavailable, OutboundSms, Passcode
from relay.carriers.smtp import SmtpCarrier, SmtpSettings
from tests.carriers.fake_server import closed_port
from tests.carriers.smtp_server import Accounts, SmtpServer, silent_server, smtp_server
from tests.webhooks.tls_receiver import ServerIdentity, write_identity

NOW = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)
CODE = "482916"
TO = "ada@example.org"


@pytest.fixture(scope="module")
def identity(tmp_path_factory: pytest.TempPathFactory) -> ServerIdentity:
    return write_identity(tmp_path_factory.mktemp("smtp-tls"), "Relay SMTP test CA")


@pytest.fixture(scope="module")
def stranger(tmp_path_factory: pytest.TempPathFactory) -> ServerIdentity:
    """Another authority, which never signed the server's certificate."""
    return write_identity(tmp_path_factory.mktemp("smtp-other"), "Someone else's CA")


@pytest_asyncio.fixture
async def starttls(identity: ServerIdentity) -> AsyncIterator[SmtpServer]:
    async with smtp_server(identity, mode="starttls") as server:
        yield server


def settings_for(
    server_port: int, identity: ServerIdentity, *, host: str = "127.0.0.1", **changes: Any
) -> SmtpSettings:
    base = SmtpSettings(
        name="mail",
        host=host,
        port=server_port,
        sender="Acme <no-reply@acme.example>",
        ca_file=str(identity.ca_path),
        timeout=5.0,
        helo_name="relay.acme.example",
    )
    return replace(base, **changes)


def carrier(settings: SmtpSettings) -> SmtpCarrier:
    return SmtpCarrier(settings, clock=lambda: NOW)


def outbound(
    to: str = TO, *, locale: str = "en", brand: str = "Acme", own_text: str | None = None
) -> OutboundSms:
    passcode = Passcode(
        code=CODE,
        brand=brand,
        locale=locale,
        expires_at=NOW + timedelta(minutes=10),
        templates={} if own_text is None else {"email": own_text},
    )
    return OutboundSms(attempt_id="att_1", to=to, sender="Acme", body="unused", passcode=passcode)


def parts(message: EmailMessage) -> dict[str, str]:
    found: dict[str, str] = {}
    for part in message.walk():
        if not part.is_multipart():
            assert isinstance(part, EmailMessage)
            found[part.get_content_type()] = str(part.get_content())
    return found


# --- delivered -----------------------------------------------------------------


async def test_an_accepted_message_is_delivered_at_once_under_its_message_id(
    starttls: SmtpServer, identity: ServerIdentity
) -> None:
    receipt = await carrier(settings_for(starttls.port, identity)).submit(outbound())

    [received] = starttls.handler.received
    assert received.tls
    assert received.helo_name == "relay.acme.example"
    assert received.mail_from == "no-reply@acme.example"
    assert received.rcpt_tos == [TO]
    assert receipt.carrier_message_id == received.message["Message-ID"]
    assert receipt.carrier_message_id.endswith("@acme.example>")
    assert receipt.final is not None
    assert (receipt.final.status, receipt.final.carrier) == ("delivered", "mail")
    assert receipt.final.carrier_message_id == receipt.carrier_message_id


async def test_the_message_has_a_text_and_an_html_part_from_the_same_words(
    starttls: SmtpServer, identity: ServerIdentity
) -> None:
    await carrier(settings_for(starttls.port, identity)).submit(outbound(brand="Tom & <Jerry>"))

    message = starttls.handler.received[0].message
    found = parts(message)
    assert message.get_content_type() == "multipart/alternative"
    assert found["text/plain"].strip() == (
        f"Your Tom & <Jerry> verification code is {CODE}. Do not share it."
    )
    html = found["text/html"]
    assert "Tom &amp; &lt;Jerry&gt;" in html
    assert f"<strong>{CODE}</strong>" in html
    assert "<Jerry>" not in html


async def test_the_accounts_own_email_text_is_the_body_of_both_parts(
    starttls: SmtpServer, identity: ServerIdentity
) -> None:
    own = "Sign in to {brand} with {code}; it works for {minutes} minutes."
    await carrier(settings_for(starttls.port, identity)).submit(outbound(own_text=own))

    found = parts(starttls.handler.received[0].message)
    assert found["text/plain"].strip() == f"Sign in to Acme with {CODE}; it works for 10 minutes."
    assert "it works for 10 minutes." in found["text/html"]


async def test_the_html_part_loads_nothing_from_anywhere(
    starttls: SmtpServer, identity: ServerIdentity
) -> None:
    await carrier(settings_for(starttls.port, identity)).submit(outbound())

    html = parts(starttls.handler.received[0].message)["text/html"].lower()
    for outside in ("http:", "https:", "src=", "href=", "url(", "@import"):
        assert outside not in html


async def test_the_headers_say_who_when_and_that_no_one_should_answer(
    starttls: SmtpServer, identity: ServerIdentity
) -> None:
    await carrier(settings_for(starttls.port, identity)).submit(outbound(locale="fr"))

    message = starttls.handler.received[0].message
    assert str(message["From"]) == "Acme <no-reply@acme.example>"
    assert str(message["To"]) == TO
    assert str(message["Subject"]) == f"Votre code de vérification Acme : {CODE}"
    assert message["Date"].datetime == NOW
    assert str(message["Auto-Submitted"]) == "auto-generated"


async def test_implicit_tls_delivers_from_the_first_byte(identity: ServerIdentity) -> None:
    async with smtp_server(identity, mode="tls") as server:
        settings = settings_for(server.port, identity, security="tls")
        receipt = await carrier(settings).submit(outbound())

    assert str(server.handler.received[0].message["Subject"]).endswith(CODE)
    assert receipt.final is not None
    assert receipt.final.status == "delivered"


async def test_every_message_has_its_own_message_id(
    starttls: SmtpServer, identity: ServerIdentity
) -> None:
    mail = carrier(settings_for(starttls.port, identity))
    first = await mail.submit(outbound())
    second = await mail.submit(outbound())

    assert first.carrier_message_id != second.carrier_message_id
    assert len(starttls.handler.received) == 2


# --- refused and unavailable ----------------------------------------------------


async def test_a_550_to_the_recipient_is_a_refusal_with_the_servers_reason(
    starttls: SmtpServer, identity: ServerIdentity
) -> None:
    starttls.handler.rcpt_reply = "550 5.1.1 <ada@example.org>: Recipient address rejected"

    with pytest.raises(CarrierRejected) as refused:
        await carrier(settings_for(starttls.port, identity)).submit(outbound())

    assert refused.value.code == "smtp_550"
    assert "Recipient address rejected" in refused.value.message
    assert "DATA" not in starttls.handler.commands


async def test_a_554_after_the_data_is_a_refusal(
    starttls: SmtpServer, identity: ServerIdentity
) -> None:
    starttls.handler.data_reply = "554 5.7.1 Message refused as spam"

    with pytest.raises(CarrierRejected) as refused:
        await carrier(settings_for(starttls.port, identity)).submit(outbound())

    assert refused.value.code == "smtp_554"


async def test_a_refusal_keeps_no_code_the_server_echoes(
    starttls: SmtpServer, identity: ServerIdentity
) -> None:
    starttls.handler.data_reply = f"550 5.7.1 Content {CODE} looks like a one-time code"

    with pytest.raises(CarrierRejected) as refused:
        await carrier(settings_for(starttls.port, identity)).submit(outbound())

    assert CODE not in refused.value.message
    assert "looks like a one-time code" in refused.value.message


@pytest.mark.parametrize("stage", ["mail_reply", "rcpt_reply", "data_reply"])
async def test_a_451_at_any_stage_is_unavailable_so_another_carrier_is_tried(
    starttls: SmtpServer, identity: ServerIdentity, stage: str
) -> None:
    setattr(starttls.handler, stage, "451 4.3.0 Try again later")

    with pytest.raises(CarrierUnavailable) as unavailable:
        await carrier(settings_for(starttls.port, identity)).submit(outbound())

    assert unavailable.value.code == "smtp_451"
    assert starttls.handler.received == []


async def test_a_server_that_is_down_is_unavailable(identity: ServerIdentity) -> None:
    with closed_port() as url:
        port = int(url.rsplit(":", 1)[1])
        with pytest.raises(CarrierUnavailable) as unavailable:
            await carrier(settings_for(port, identity)).submit(outbound())

    assert unavailable.value.code == "smtp_connect_failed"


async def test_a_server_that_never_greets_is_unavailable_after_the_timeout(
    identity: ServerIdentity,
) -> None:
    async with silent_server() as port:
        settings = settings_for(port, identity, timeout=0.3)
        with pytest.raises(CarrierUnavailable) as unavailable:
            await carrier(settings).submit(outbound())

    assert unavailable.value.code == "smtp_timeout"


@pytest.mark.parametrize("login", [{}, {"username": "relay", "password": "pw"}])
async def test_without_starttls_on_offer_nothing_is_sent_in_clear(
    identity: ServerIdentity, login: dict[str, str]
) -> None:
    async with smtp_server(identity, mode="plain") as server:
        settings = settings_for(server.port, identity, **login)
        with pytest.raises(CarrierUnavailable):
            await carrier(settings).submit(outbound())

    assert server.handler.commands == []
    assert server.handler.received == []


async def test_a_certificate_from_an_unknown_authority_is_refused(
    starttls: SmtpServer, identity: ServerIdentity, stranger: ServerIdentity
) -> None:
    settings = settings_for(starttls.port, stranger)

    with pytest.raises(CarrierUnavailable) as unavailable:
        await carrier(settings).submit(outbound())

    assert unavailable.value.code == "smtp_tls_failed"
    assert starttls.handler.commands == []


async def test_the_systems_authorities_do_not_trust_a_private_ca(
    starttls: SmtpServer, identity: ServerIdentity
) -> None:
    settings = settings_for(starttls.port, identity, ca_file=None)

    with pytest.raises(CarrierUnavailable) as unavailable:
        await carrier(settings).submit(outbound())

    assert unavailable.value.code == "smtp_tls_failed"


async def test_a_certificate_for_another_host_name_is_refused_over_implicit_tls(
    identity: ServerIdentity,
) -> None:
    # The certificate names localhost and 127.0.0.1, not 127.0.0.2.
    async with smtp_server(identity, mode="tls", host="127.0.0.2") as server:
        settings = settings_for(server.port, identity, host="127.0.0.2", security="tls")
        with pytest.raises(CarrierUnavailable) as unavailable:
            await carrier(settings).submit(outbound())

    assert unavailable.value.code == "smtp_tls_failed"
    assert server.handler.commands == []


# --- authentication -------------------------------------------------------------


@pytest_asyncio.fixture
async def guarded(identity: ServerIdentity) -> AsyncIterator[SmtpServer]:
    async with smtp_server(identity, mode="starttls", accounts=Accounts("relay", "s3cret")) as s:
        yield s


async def test_a_login_over_starttls_sends_the_message(
    guarded: SmtpServer, identity: ServerIdentity
) -> None:
    settings = settings_for(guarded.port, identity, username="relay", password="s3cret")

    await carrier(settings).submit(outbound())

    [received] = guarded.handler.received
    assert received.authenticated
    assert received.tls


async def test_a_refused_login_is_unavailable_and_sends_nothing(
    guarded: SmtpServer, identity: ServerIdentity
) -> None:
    settings = settings_for(guarded.port, identity, username="relay", password="wrong")

    with pytest.raises(CarrierUnavailable) as unavailable:
        await carrier(settings).submit(outbound())

    assert unavailable.value.code == "smtp_535"
    assert guarded.handler.commands == []


async def test_a_server_that_requires_a_login_refuses_an_anonymous_one(
    guarded: SmtpServer, identity: ServerIdentity
) -> None:
    with pytest.raises(CarrierUnavailable) as unavailable:
        await carrier(settings_for(guarded.port, identity)).submit(outbound())

    assert unavailable.value.code == "smtp_530"


# --- what is never sent nor logged ---------------------------------------------


async def test_a_destination_that_is_not_an_address_is_refused_before_connecting(
    identity: ServerIdentity,
) -> None:
    with closed_port() as url:
        port = int(url.rsplit(":", 1)[1])
        for to in ("+33612345678", "a@b.example, c@d.example", "ada@example.org\r\nBcc: x@y.z"):
            with pytest.raises(CarrierRejected) as refused:
                await carrier(settings_for(port, identity)).submit(outbound(to))
            assert refused.value.code == "smtp_invalid_address"


async def test_an_international_address_is_refused_by_a_server_without_smtputf8(
    starttls: SmtpServer, identity: ServerIdentity
) -> None:
    with pytest.raises(CarrierRejected) as refused:
        await carrier(settings_for(starttls.port, identity)).submit(outbound("ada@exämple.org"))

    assert refused.value.code == "smtp_not_supported"
    assert starttls.handler.commands == []


async def test_a_message_without_a_passcode_is_refused() -> None:
    settings = SmtpSettings(name="mail", host="127.0.0.1", sender="no-reply@acme.example")
    sms = OutboundSms(attempt_id="att_1", to=TO, sender="Acme", body="hello")

    with pytest.raises(CarrierRejected):
        await carrier(settings).submit(sms)


async def test_neither_the_code_nor_the_body_is_logged(
    starttls: SmtpServer, identity: ServerIdentity, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    mail = carrier(settings_for(starttls.port, identity))
    await mail.submit(outbound())
    starttls.handler.data_reply = f"550 refused {CODE}"
    with pytest.raises(CarrierRejected):
        await mail.submit(outbound())

    ours = [r for r in caplog.records if r.name.startswith(("relay", "aiosmtplib"))]
    assert any("smtp.accepted" in r.getMessage() for r in ours)
    assert all(CODE not in r.getMessage() for r in ours)


def test_the_carrier_says_it_carries_email(identity: ServerIdentity) -> None:
    assert carrier(settings_for(25, identity)).channel == "email"
