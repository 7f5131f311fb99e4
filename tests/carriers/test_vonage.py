"""The Vonage carrier against a local Vonage that enforces Vonage's published SMS API."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import pytest
import pytest_asyncio

from relay.carriers.base import (
    CarrierRejected,
    CarrierThrottled,
    CarrierUnavailable,
    DeliveryReport,
    OutboundSms,
)
from relay.carriers.callbacks import SECRET_PARAM, CallbackSignatureError, StatusCallback
from relay.carriers.http_carrier import HttpCarrier
from relay.carriers.providers import http_carrier
from relay.carriers.vonage import VonageSettings
from tests.carriers.fake_server import Hang, Reply
from tests.carriers.reading import reports_of
from tests.carriers.vonage_fake import INVALID_TO, FakeVonage, error_answer, sign

API_KEY, API_SECRET = "abcd1234", "s3cr3t-vonage"
SIGNATURE_SECRET = "signature-secret-vonage"
NOW = datetime.now(UTC).replace(microsecond=0)
CALLBACK_URL = "https://relay.example.com/v1/carriers/vonage-main/status"
SECRET_BODY = "Your Relay code is 482916"
SMS = OutboundSms(attempt_id="att_1", to="+447700900123", sender="Relay", body=SECRET_BODY)

pytestmark = pytest.mark.asyncio(loop_scope="module")


def settings(fake: FakeVonage, **changes: Any) -> VonageSettings:
    base = VonageSettings(
        name="vonage-main",
        api_key=API_KEY,
        api_secret=API_SECRET,
        sender="Relay",
        signature_secret=SIGNATURE_SECRET,
        base_url=fake.base_url or "http://127.0.0.1:9",
        status_callback_url=CALLBACK_URL,
        timeout=1.5,
        throttle_retry_after=2.5,
    )
    return replace(base, **changes)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def vonage_server() -> AsyncIterator[FakeVonage]:
    fake = FakeVonage(API_KEY, API_SECRET, signature_secret=SIGNATURE_SECRET)
    async with fake.running():
        yield fake


@pytest_asyncio.fixture(loop_scope="module")
async def vonage(vonage_server: FakeVonage) -> AsyncIterator[FakeVonage]:
    yield vonage_server
    assert vonage_server.end_test() == [], "the carrier broke Vonage's published contract"


@pytest_asyncio.fixture(loop_scope="module")
async def carrier(vonage: FakeVonage) -> AsyncIterator[HttpCarrier]:
    built = http_carrier(settings(vonage), clock=lambda: NOW)
    yield built
    await built.close()


async def test_a_submitted_sms_is_named_by_the_first_parts_message_id(
    vonage: FakeVonage, carrier: HttpCarrier
) -> None:
    receipt = await carrier.submit(SMS)
    assert receipt.carrier_message_id == vonage.id_for(SMS.to)
    assert vonage.received == [
        {
            "api_key": API_KEY,
            "api_secret": API_SECRET,
            "from": "Relay",
            "to": "447700900123",
            "text": SECRET_BODY,
            "type": "text",
            "callback": CALLBACK_URL,
        }
    ]


@pytest.mark.parametrize(
    ("body", "kind", "segments"),
    [
        ("a" * 160, "text", 1),
        ("a" * 161, "text", 2),
        ("Año 123456 è", "text", 1),  # ñ and è are GSM
        ("Código 123456", "unicode", 1),  # ó is not
        ("Код 123456", "unicode", 1),
        ("Ж" * 71, "unicode", 2),
    ],
)
async def test_multipart_and_unicode_texts_go_as_vonage_bills_them(
    vonage: FakeVonage, carrier: HttpCarrier, body: str, kind: str, segments: int
) -> None:
    receipt = await carrier.submit(replace(SMS, body=body))
    assert (vonage.received[0]["type"], receipt.segments) == (kind, segments)


async def test_an_invalid_to_number_is_rejected_with_vonages_status(carrier: HttpCarrier) -> None:
    with pytest.raises(CarrierRejected) as refused:
        await carrier.submit(replace(SMS, to="+" + INVALID_TO))
    assert (refused.value.code, refused.value.message) == ("vonage_3", "Invalid to address")


async def test_status_one_throttles_for_the_configured_wait(
    vonage: FakeVonage, carrier: HttpCarrier
) -> None:
    vonage.then(Reply(200, error_answer("1", "Throughput Rate Exceeded")))
    with pytest.raises(CarrierThrottled) as throttled:
        await carrier.submit(SMS)
    assert (throttled.value.code, throttled.value.retry_after) == ("vonage_1", 2.5)


async def test_an_http_429_throttles_for_its_retry_after(
    vonage: FakeVonage, carrier: HttpCarrier
) -> None:
    vonage.then(Reply(429, None, {"Retry-After": "3"}))
    with pytest.raises(CarrierThrottled) as throttled:
        await carrier.submit(SMS)
    assert (throttled.value.code, throttled.value.retry_after) == ("vonage_http_429", 3.0)


@pytest.mark.parametrize(
    ("status", "text"),
    [("5", "Internal Error"), ("8", "Partner Account Barred"), ("9", "Partner Quota Violation")],
)
async def test_an_account_or_platform_status_makes_the_carrier_unavailable(
    vonage: FakeVonage, carrier: HttpCarrier, status: str, text: str
) -> None:
    vonage.then(Reply(200, error_answer(status, text)))
    with pytest.raises(CarrierUnavailable) as unavailable:
        await carrier.submit(SMS)
    assert unavailable.value.code == f"vonage_{status}"


async def test_wrong_credentials_make_the_carrier_unavailable(vonage: FakeVonage) -> None:
    built = http_carrier(settings(vonage, api_secret="not-the-secret"))
    with pytest.raises(CarrierUnavailable) as unavailable:
        await built.submit(SMS)
    await built.close()
    assert unavailable.value.code == "vonage_4"


async def test_a_server_error_or_silence_makes_the_carrier_unavailable(
    vonage: FakeVonage,
) -> None:
    built = http_carrier(settings(vonage, timeout=0.3))
    vonage.then(Reply(503), Hang())
    codes = []
    for _ in range(2):
        with pytest.raises(CarrierUnavailable) as unavailable:
            await built.submit(SMS)
        codes.append(unavailable.value.code)
    vonage.script.release.set()
    await built.close()
    assert codes == ["vonage_http_503", "vonage_timeout"]


def as_json(params: dict[str, str]) -> StatusCallback:
    body = json.dumps(params).encode()
    return StatusCallback(CALLBACK_URL, body, {"content-type": "application/json"})


async def receipt_for(
    vonage: FakeVonage, carrier: HttpCarrier, status: str, *, at: float | None = None
) -> tuple[str, dict[str, str]]:
    message_id = (await carrier.submit(SMS)).carrier_message_id
    params = vonage.receipt(message_id, status, error_code="0" if status == "delivered" else "6")
    return message_id, vonage.signed(params, at=NOW.timestamp() if at is None else at)


@pytest.mark.parametrize(
    ("status", "report"),
    [
        ("delivered", ("delivered", None)),
        ("failed", ("failed", "vonage_dlr_6")),
        ("rejected", ("failed", "vonage_dlr_6")),
        ("expired", ("failed", "vonage_dlr_6")),
        ("accepted", None),
        ("buffered", None),
        ("unknown", None),
    ],
)
async def test_only_final_statuses_of_a_signed_receipt_become_reports(
    vonage: FakeVonage, carrier: HttpCarrier, status: str, report: tuple[str, str | None] | None
) -> None:
    sink = await reports_of(carrier)
    message_id, params = await receipt_for(vonage, carrier, status)
    await carrier.receive_status(as_json(params))
    expected = [] if report is None else [DeliveryReport("vonage-main", message_id, *report, NOW)]  # type: ignore[arg-type]
    assert sink.reports == expected


async def test_a_receipt_posted_as_a_form_is_read_the_same(
    vonage: FakeVonage, carrier: HttpCarrier
) -> None:
    sink = await reports_of(carrier)
    message_id, params = await receipt_for(vonage, carrier, "delivered")
    form = StatusCallback(CALLBACK_URL, urlencode(params).encode(), {})
    await carrier.receive_status(form)
    assert [r.carrier_message_id for r in sink.reports] == [message_id]


@pytest.mark.parametrize("method", ["md5", "sha1", "sha256", "sha512"])
async def test_receipts_signed_with_the_hmac_the_dashboard_chose_are_believed(
    vonage: FakeVonage, method: str
) -> None:
    built = http_carrier(settings(vonage, signature_method=method), clock=lambda: NOW)
    sink = await reports_of(built)
    message_id = (await built.submit(SMS)).carrier_message_id
    params = {**vonage.receipt(message_id, "delivered"), "timestamp": str(int(NOW.timestamp()))}
    params["sig"] = sign(params, SIGNATURE_SECRET, method)
    await built.receive_status(as_json(params))
    await built.close()
    assert len(sink.reports) == 1


async def test_a_forged_altered_stale_or_unsigned_receipt_is_refused(
    vonage: FakeVonage, carrier: HttpCarrier
) -> None:
    sink = await reports_of(carrier)
    message_id = (await carrier.submit(SMS)).carrier_message_id
    forged = vonage.signed(vonage.receipt(message_id, "delivered"), secret="guess")
    altered = {**(await receipt_for(vonage, carrier, "failed"))[1], "status": "delivered"}
    stale = (await receipt_for(vonage, carrier, "delivered", at=NOW.timestamp() - 301))[1]
    unsigned = vonage.receipt(message_id, "delivered")
    for refused in (forged, altered, stale, unsigned):
        with pytest.raises(CallbackSignatureError):
            await carrier.receive_status(as_json(refused))
    assert sink.reports == []


async def test_without_signing_the_callback_url_carries_the_carriers_secret(
    vonage: FakeVonage,
) -> None:
    unsigned = settings(vonage, signature_secret=None, callback_secret="url-secret")
    built = http_carrier(unsigned, clock=lambda: NOW)
    sink = await reports_of(built)
    message_id = (await built.submit(SMS)).carrier_message_id
    assert vonage.callback_url(message_id) == f"{CALLBACK_URL}?{SECRET_PARAM}=url-secret"
    body = json.dumps(vonage.receipt(message_id, "delivered")).encode()
    headers = {"content-type": "application/json"}
    for query in ({}, {SECRET_PARAM: "url-secreT"}):
        with pytest.raises(CallbackSignatureError):
            await built.receive_status(StatusCallback(CALLBACK_URL, body, headers, query))
    await built.receive_status(
        StatusCallback(CALLBACK_URL, body, headers, {SECRET_PARAM: "url-secret"})
    )
    await built.close()
    assert [r.status for r in sink.reports] == ["delivered"]
