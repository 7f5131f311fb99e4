"""Meta's webhooks as the WhatsApp carrier reads them: signature, statuses, handshake."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
import pytest_asyncio

from relay.carriers.callbacks import CallbackPayloadError, CallbackSignatureError, StatusCallback
from relay.carriers.whatsapp import WhatsAppCarrier, WhatsAppSettings
from relay.carriers.whatsapp_webhooks import signature
from tests.carriers.fake_server import Signing
from tests.carriers.reading import Reports, reports_of
from tests.carriers.whatsapp_fake import FakeWhatsApp

APP_SECRET = "relay-app-secret-0123"
VERIFY_TOKEN = "relay-verify-token"
NOW = datetime.now(UTC).replace(microsecond=0)
META = FakeWhatsApp(access_token="EAA-unused", app_secret=APP_SECRET)
URL = "https://relay.example.com/v1/carriers/whatsapp-main/status"

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module")
async def carrier() -> AsyncIterator[WhatsAppCarrier]:
    built = WhatsAppCarrier(
        WhatsAppSettings(
            name="whatsapp-main",
            phone_number_id=META.phone_number_id,
            access_token="EAA-unused",
            app_secret=APP_SECRET,
            verify_token=VERIFY_TOKEN,
            template="relay_code",
            template_language="en_US",
            status_callback_url=URL,
        ),
        clock=lambda: NOW,
    )
    yield built
    await built.close()


@pytest_asyncio.fixture(loop_scope="module")
async def sink(carrier: WhatsAppCarrier) -> Reports:
    return await reports_of(carrier)


def callback(body: bytes, signing: Signing = "signed") -> StatusCallback:
    return StatusCallback(url=URL, body=body, headers=META.headers(body, signing))


def reported(sink: Reports) -> list[tuple[str, str, str | None]]:
    return [(r.carrier_message_id, r.status, r.error_code) for r in sink.reports]


async def test_the_signature_is_the_hex_hmac_sha256_of_the_body_under_the_app_secret() -> None:
    """The vector of an independent implementation (hexdocs.pm/whatsapp_sdk, WhatsApp.Webhook)."""
    expected = "0329a06b62cd16b33eb6792be8c60b158d89a2ee3a876fce9a881ebb488c0914"
    assert signature(b"test", "secret") == f"sha256={expected}"


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("delivered", [("wamid.A", "delivered", None)]),
        ("read", [("wamid.A", "delivered", None)]),
        ("sent", []),
    ],
)
async def test_delivered_and_read_deliver_and_sent_says_nothing(
    carrier: WhatsAppCarrier, sink: Reports, status: str, expected: list[object]
) -> None:
    await carrier.receive_status(callback(META.status_webhook(("wamid.A", status))))
    assert reported(sink) == expected


async def test_failed_fails_with_metas_error_code(carrier: WhatsAppCarrier, sink: Reports) -> None:
    await carrier.receive_status(callback(META.status_webhook(("wamid.B", "failed", 131026))))
    assert reported(sink) == [("wamid.B", "failed", "whatsapp_131026")]


async def test_one_webhook_reports_every_status_it_carries_and_ignores_incoming_messages(
    carrier: WhatsAppCarrier, sink: Reports
) -> None:
    body = META.status_webhook(
        ("wamid.C", "delivered"), ("wamid.D", "sent"), ("wamid.E", "failed", 131049), incoming=True
    )
    await carrier.receive_status(callback(body))
    assert reported(sink) == [
        ("wamid.C", "delivered", None),
        ("wamid.E", "failed", "whatsapp_131049"),
    ]


async def test_statuses_of_another_number_of_the_same_app_are_not_this_carriers(
    carrier: WhatsAppCarrier, sink: Reports
) -> None:
    other = FakeWhatsApp(access_token="x", app_secret=APP_SECRET, phone_number_id="999000111")
    await carrier.receive_status(callback(other.status_webhook(("wamid.F", "delivered"))))
    assert reported(sink) == []


@pytest.mark.parametrize("signing", ["forged", "unsigned"])
async def test_a_webhook_the_app_secret_did_not_sign_is_refused_and_reports_nothing(
    carrier: WhatsAppCarrier, sink: Reports, signing: Signing
) -> None:
    with pytest.raises(CallbackSignatureError):
        await carrier.receive_status(callback(META.status_webhook(("wamid.G", "read")), signing))
    assert reported(sink) == []


async def test_a_signature_over_another_body_is_refused(
    carrier: WhatsAppCarrier, sink: Reports
) -> None:
    signed = META.status_webhook(("wamid.H", "failed", 131026))
    swapped = signed.replace(b'"failed"', b'"delivered"')
    forged = StatusCallback(url=URL, body=swapped, headers=META.headers(signed))
    with pytest.raises(CallbackSignatureError):
        await carrier.receive_status(forged)
    assert reported(sink) == []


@pytest.mark.parametrize(
    "body", [b"{not json", json.dumps({"object": "whatsapp_business_account"}).encode()]
)
async def test_a_signed_body_that_is_no_webhook_is_a_payload_error(
    carrier: WhatsAppCarrier, body: bytes
) -> None:
    with pytest.raises(CallbackPayloadError):
        await carrier.receive_status(callback(body))


async def test_another_object_than_a_whatsapp_account_says_nothing(
    carrier: WhatsAppCarrier, sink: Reports
) -> None:
    document = json.loads(META.status_webhook(("wamid.I", "delivered")))
    document["object"] = "page"
    await carrier.receive_status(callback(json.dumps(document).encode()))
    assert reported(sink) == []


async def test_the_handshake_echoes_the_challenge_for_the_verify_token(
    carrier: WhatsAppCarrier,
) -> None:
    query = {
        "hub.mode": "subscribe",
        "hub.verify_token": VERIFY_TOKEN,
        "hub.challenge": "1158201444",
    }
    assert carrier.answer_handshake(query) == "1158201444"


@pytest.mark.parametrize(
    "changes",
    [{"hub.verify_token": "guessed"}, {"hub.verify_token": ""}, {"hub.mode": "unsubscribe"}],
)
async def test_the_handshake_is_refused_without_the_verify_token_and_subscribe(
    carrier: WhatsAppCarrier, changes: dict[str, str]
) -> None:
    query = {"hub.mode": "subscribe", "hub.verify_token": VERIFY_TOKEN, "hub.challenge": "1"}
    with pytest.raises(CallbackSignatureError):
        carrier.answer_handshake(query | changes)


@pytest.mark.parametrize("challenge", ["", "9" * 129, "<script>\n"])
async def test_a_challenge_that_is_none_is_not_echoed(
    carrier: WhatsAppCarrier, challenge: str
) -> None:
    query = {"hub.mode": "subscribe", "hub.verify_token": VERIFY_TOKEN, "hub.challenge": challenge}
    with pytest.raises(CallbackPayloadError):
        carrier.answer_handshake(query)
