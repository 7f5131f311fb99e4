"""The Telnyx carrier against a local Telnyx that speaks its documented Messaging API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime

import pytest
import pytest_asyncio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from relay.carriers.base import (
    CarrierRejected,
    CarrierThrottled,
    CarrierUnavailable,
    DeliveryReport,
    OutboundSms,
)
from relay.carriers.callbacks import CallbackSignatureError, StatusCallback
from relay.carriers.http_carrier import HttpCarrier
from relay.carriers.providers import http_carrier
from relay.carriers.telnyx import TelnyxSettings
from tests.carriers.fake_server import Reply
from tests.carriers.reading import reports_of
from tests.carriers.telnyx_fake import INVALID_TO, VALID_FROM, CreatedAs, FakeTelnyx, telnyx_error

API_KEY = "KEY0123456789ABCDEF_test"
NOW = datetime.now(UTC).replace(microsecond=0)
CALLBACK_URL = "https://relay.example.com/v1/carriers/telnyx-main/status"
SECRET_BODY = "Your Relay code is 482916"
SMS = OutboundSms(attempt_id="att_1", to="+15558675310", sender="Relay", body=SECRET_BODY)

pytestmark = pytest.mark.asyncio(loop_scope="module")


def settings(fake: FakeTelnyx, **changes: object) -> TelnyxSettings:
    base = TelnyxSettings(
        name="telnyx-main",
        api_key=API_KEY,
        public_key=fake.public_key,
        sender=VALID_FROM,
        base_url=fake.base_url or "http://127.0.0.1:9",
        status_callback_url=CALLBACK_URL,
        timeout=1.5,
        throttle_retry_after=2.5,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def telnyx_server() -> AsyncIterator[FakeTelnyx]:
    fake = FakeTelnyx(api_key=API_KEY)
    async with fake.running():
        yield fake


@pytest_asyncio.fixture(loop_scope="module")
async def telnyx(telnyx_server: FakeTelnyx) -> AsyncIterator[FakeTelnyx]:
    yield telnyx_server
    assert telnyx_server.end_test() == [], "the carrier broke Telnyx's documented request"


@pytest_asyncio.fixture(loop_scope="module")
async def carrier(telnyx: FakeTelnyx) -> AsyncIterator[HttpCarrier]:
    built = http_carrier(settings(telnyx), clock=lambda: NOW)
    yield built
    await built.close()


async def test_a_submitted_sms_is_named_by_the_id_telnyx_returns(
    telnyx: FakeTelnyx, carrier: HttpCarrier
) -> None:
    receipt = await carrier.submit(SMS)
    assert receipt.carrier_message_id in telnyx.messages
    assert telnyx.received == [
        {"from": VALID_FROM, "to": SMS.to, "text": SECRET_BODY, "webhook_url": CALLBACK_URL}
    ]


async def test_a_messaging_profile_goes_with_the_send_when_set(telnyx: FakeTelnyx) -> None:
    built = http_carrier(settings(telnyx, messaging_profile_id="prof-1"))
    await built.submit(SMS)
    await built.close()
    assert telnyx.received[0]["messaging_profile_id"] == "prof-1"


@pytest.mark.parametrize(
    ("body", "segments"),
    [
        ("a" * 160, 1),
        ("a" * 161, 2),  # 153 septets a part once split
        ("Código 123456", 1),  # ó is not GSM: UCS-2, still one part
        ("Код 123456 ✓", 1),  # UCS-2, 70 units a single part
        ("Ж" * 71, 2),  # 67 units a part once split
    ],
)
async def test_multipart_and_unicode_texts_count_the_parts_telnyx_bills(
    telnyx: FakeTelnyx, carrier: HttpCarrier, body: str, segments: int
) -> None:
    receipt = await carrier.submit(replace(SMS, body=body))
    assert receipt.segments == segments
    assert telnyx.messages[receipt.carrier_message_id]["text"] == body


async def test_an_invalid_to_number_is_rejected_with_telnyx_error_code(
    carrier: HttpCarrier,
) -> None:
    with pytest.raises(CarrierRejected) as refused:
        await carrier.submit(replace(SMS, to=INVALID_TO))
    assert refused.value.code == "telnyx_10002"


async def test_a_message_telnyx_creates_as_failed_is_rejected_at_once(
    telnyx: FakeTelnyx, carrier: HttpCarrier
) -> None:
    telnyx.then(CreatedAs("sending_failed", error_code="40001"))
    with pytest.raises(CarrierRejected) as refused:
        await carrier.submit(SMS)
    assert refused.value.code == "telnyx_40001"


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [({"x-ratelimit-reset": "7"}, 7.0), ({"Retry-After": "4"}, 4.0), ({}, 2.5)],
)
async def test_too_many_requests_throttles_for_as_long_as_telnyx_says(
    telnyx: FakeTelnyx, carrier: HttpCarrier, headers: dict[str, str], seconds: float
) -> None:
    telnyx.then(Reply(429, telnyx_error("10011", "Too many requests", "Slow down"), headers))
    with pytest.raises(CarrierThrottled) as throttled:
        await carrier.submit(SMS)
    assert (throttled.value.code, throttled.value.retry_after) == ("telnyx_10011", seconds)


async def test_a_server_error_makes_the_carrier_unavailable(
    telnyx: FakeTelnyx, carrier: HttpCarrier
) -> None:
    telnyx.then(Reply(500, telnyx_error("10007", "Unexpected error", "")), Reply(503))
    with pytest.raises(CarrierUnavailable) as unavailable:
        await carrier.submit(SMS)
    assert unavailable.value.code == "telnyx_10007"
    with pytest.raises(CarrierUnavailable) as bare:
        await carrier.submit(SMS)
    assert bare.value.code == "telnyx_http_503"


async def test_a_wrong_api_key_makes_the_carrier_unavailable_rather_than_the_sms_rejected(
    telnyx: FakeTelnyx,
) -> None:
    built = http_carrier(settings(telnyx, api_key="KEY-revoked"))
    with pytest.raises(CarrierUnavailable) as unavailable:
        await built.submit(SMS)
    await built.close()
    assert unavailable.value.code == "telnyx_10009"


async def callback_for(
    telnyx: FakeTelnyx, carrier: HttpCarrier, status: str, **signing: float
) -> tuple[str, StatusCallback]:
    message_id = (await carrier.submit(SMS)).carrier_message_id
    body = telnyx.webhook(message_id, status, error_code="40008")
    headers = telnyx.signed(body, at=signing.get("at", NOW.timestamp()))
    return message_id, StatusCallback(CALLBACK_URL, body, headers)


@pytest.mark.parametrize(
    ("status", "report"),
    [
        ("delivered", ("delivered", None)),
        ("delivery_failed", ("failed", "telnyx_40008")),
        ("sending_failed", ("failed", "telnyx_40008")),
        ("expired", ("failed", "telnyx_40008")),
        ("sent", None),
        ("queued", None),
        ("delivery_unconfirmed", None),
    ],
)
async def test_only_final_statuses_of_a_signed_webhook_become_reports(
    telnyx: FakeTelnyx,
    carrier: HttpCarrier,
    status: str,
    report: tuple[str, str | None] | None,
) -> None:
    sink = await reports_of(carrier)
    message_id, callback = await callback_for(telnyx, carrier, status)
    await carrier.receive_status(callback)
    expected = [] if report is None else [DeliveryReport("telnyx-main", message_id, *report, NOW)]  # type: ignore[arg-type]
    assert sink.reports == expected


async def test_a_webhook_signed_with_another_key_is_refused(
    telnyx: FakeTelnyx, carrier: HttpCarrier
) -> None:
    sink = await reports_of(carrier)
    _, callback = await callback_for(telnyx, carrier, "delivered")
    impostor = FakeTelnyx(api_key=API_KEY, signing_key=Ed25519PrivateKey.generate())
    forged = replace(callback, headers=impostor.signed(callback.body, at=NOW.timestamp()))
    with pytest.raises(CallbackSignatureError):
        await carrier.receive_status(forged)
    assert sink.reports == []


@pytest.mark.parametrize("skew", [-301.0, 301.0])
async def test_a_webhook_signed_more_than_five_minutes_away_is_refused(
    telnyx: FakeTelnyx, carrier: HttpCarrier, skew: float
) -> None:
    sink = await reports_of(carrier)
    _, callback = await callback_for(telnyx, carrier, "delivered", at=NOW.timestamp() + skew)
    with pytest.raises(CallbackSignatureError):
        await carrier.receive_status(callback)
    assert sink.reports == []


async def test_a_webhook_altered_after_signing_or_unsigned_is_refused(
    telnyx: FakeTelnyx, carrier: HttpCarrier
) -> None:
    _, callback = await callback_for(telnyx, carrier, "delivery_failed")
    altered = replace(callback, body=callback.body.replace(b"delivery_failed", b"delivered"))
    unsigned = replace(callback, headers={"content-type": "application/json"})
    garbage = replace(callback, headers={**callback.headers, "telnyx-signature-ed25519": "%%"})
    for refused in (altered, unsigned, garbage):
        with pytest.raises(CallbackSignatureError):
            await carrier.receive_status(refused)
