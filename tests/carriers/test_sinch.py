"""The Sinch carrier against a local Sinch that speaks its documented SMS REST API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

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
from relay.carriers.sinch import SinchSettings
from tests.carriers.fake_server import Hang, Reply, billed_segments
from tests.carriers.reading import reports_of
from tests.carriers.sinch_fake import INVALID_TO, FakeSinch, sinch_error

PLAN, TOKEN, SIGNING = "a1b2c3d4e5", "sinch-api-token", "sinch-callback-secret"
NOW = datetime.now(UTC).replace(microsecond=0)
CALLBACK_URL = "https://relay.example.com/v1/carriers/sinch-main/status"
SECRET_BODY = "Your Relay code is 482916"
SMS = OutboundSms(attempt_id="att_1", to="+46701234567", sender="Relay", body=SECRET_BODY)

pytestmark = pytest.mark.asyncio(loop_scope="module")


def settings(fake: FakeSinch, **changes: Any) -> SinchSettings:
    base = SinchSettings(
        name="sinch-main",
        service_plan_id=PLAN,
        api_token=TOKEN,
        sender="Relay",
        signature_secret=SIGNING,
        base_url=fake.base_url or "http://127.0.0.1:9",
        status_callback_url=CALLBACK_URL,
        timeout=1.5,
        throttle_retry_after=2.5,
    )
    return replace(base, **changes)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def sinch_server() -> AsyncIterator[FakeSinch]:
    fake = FakeSinch(PLAN, TOKEN, signature_secret=SIGNING)
    async with fake.running():
        yield fake


@pytest_asyncio.fixture(loop_scope="module")
async def sinch(sinch_server: FakeSinch) -> AsyncIterator[FakeSinch]:
    yield sinch_server
    assert sinch_server.end_test() == [], "the carrier broke Sinch's documented request"


@pytest_asyncio.fixture(loop_scope="module")
async def carrier(sinch: FakeSinch) -> AsyncIterator[HttpCarrier]:
    built = http_carrier(settings(sinch), clock=lambda: NOW)
    yield built
    await built.close()


async def test_an_sms_goes_as_a_batch_of_one_asking_for_its_final_report(
    sinch: FakeSinch, carrier: HttpCarrier
) -> None:
    receipt = await carrier.submit(SMS)
    assert receipt.carrier_message_id == sinch.id_for(SMS.to)
    assert sinch.received == [
        {
            "from": "Relay",
            "to": [SMS.to],
            "body": SECRET_BODY,
            "delivery_report": "per_recipient_final",
            "callback_url": CALLBACK_URL,
        }
    ]


@pytest.mark.parametrize("body", ["a" * 160, "a" * 161, "Código 123456", "Ж" * 71])
async def test_multipart_and_unicode_texts_count_the_parts_sinch_reports(
    sinch: FakeSinch, carrier: HttpCarrier, body: str
) -> None:
    receipt = await carrier.submit(replace(SMS, body=body))
    assert receipt.segments == billed_segments(body)


async def test_an_invalid_recipient_is_rejected_with_sinchs_code(carrier: HttpCarrier) -> None:
    with pytest.raises(CarrierRejected) as refused:
        await carrier.submit(replace(SMS, to=INVALID_TO))
    assert refused.value.code == "sinch_syntax_invalid_parameter_format"


async def test_too_many_requests_throttles_for_its_retry_after(
    sinch: FakeSinch, carrier: HttpCarrier
) -> None:
    sinch.then(Reply(429, sinch_error("too_many_requests", "Slow down"), {"Retry-After": "5"}))
    with pytest.raises(CarrierThrottled) as throttled:
        await carrier.submit(SMS)
    assert (throttled.value.code, throttled.value.retry_after) == ("sinch_too_many_requests", 5.0)


async def test_a_bad_token_a_forbidden_plan_an_error_or_silence_make_it_unavailable(
    sinch: FakeSinch,
) -> None:
    codes = []
    for changes in ({"api_token": "revoked"}, {"service_plan_id": "other"}):
        built = http_carrier(settings(sinch, **changes))
        with pytest.raises(CarrierUnavailable) as refused:
            await built.submit(SMS)
        await built.close()
        codes.append(refused.value.code)
    built = http_carrier(settings(sinch, timeout=0.3))
    sinch.then(Reply(503), Hang())
    for _ in range(2):
        with pytest.raises(CarrierUnavailable) as unavailable:
            await built.submit(SMS)
        codes.append(unavailable.value.code)
    sinch.script.release.set()
    await built.close()
    assert codes == ["sinch_http_401", "sinch_forbidden", "sinch_http_503", "sinch_timeout"]


async def signed_report(
    sinch: FakeSinch, carrier: HttpCarrier, status: str, **signing: Any
) -> tuple[str, StatusCallback]:
    batch_id = (await carrier.submit(SMS)).carrier_message_id
    body = sinch.report(batch_id, status, code=402)
    headers = sinch.signed(body, **{"at": NOW.timestamp(), **signing})
    return batch_id, StatusCallback(CALLBACK_URL, body, headers)


@pytest.mark.parametrize(
    ("status", "report"),
    [
        ("Delivered", ("delivered", None)),
        ("Failed", ("failed", "sinch_402")),
        ("Expired", ("failed", "sinch_402")),
        ("Rejected", ("failed", "sinch_402")),
        ("Dispatched", None),
        ("Queued", None),
        ("Unknown", None),
    ],
)
async def test_only_final_statuses_of_a_signed_report_become_reports(
    sinch: FakeSinch, carrier: HttpCarrier, status: str, report: tuple[str, str | None] | None
) -> None:
    sink = await reports_of(carrier)
    batch_id, callback = await signed_report(sinch, carrier, status)
    await carrier.receive_status(callback)
    expected = [] if report is None else [DeliveryReport("sinch-main", batch_id, *report, NOW)]  # type: ignore[arg-type]
    assert sink.reports == expected


async def test_a_forged_altered_stale_or_unsigned_report_is_refused(
    sinch: FakeSinch, carrier: HttpCarrier
) -> None:
    sink = await reports_of(carrier)
    _, callback = await signed_report(sinch, carrier, "Failed")
    refused = [
        (await signed_report(sinch, carrier, "Delivered", secret="guess"))[1],
        replace(callback, body=callback.body.replace(b"Failed", b"Delivered")),
        (await signed_report(sinch, carrier, "Delivered", at=NOW.timestamp() - 301))[1],
        replace(callback, headers={"content-type": "application/json"}),
    ]
    for report in refused:
        with pytest.raises(CallbackSignatureError):
            await carrier.receive_status(report)
    assert sink.reports == []


async def test_without_signing_the_callback_url_carries_the_carriers_secret(
    sinch: FakeSinch,
) -> None:
    built = http_carrier(settings(sinch, signature_secret=None, callback_secret="url-secret"))
    sink = await reports_of(built)
    batch_id = (await built.submit(SMS)).carrier_message_id
    assert sinch.callback_url(batch_id) == f"{CALLBACK_URL}?{SECRET_PARAM}=url-secret"
    body = sinch.report(batch_id, "Delivered")
    for query in ({}, {SECRET_PARAM: "url-secreT"}):
        with pytest.raises(CallbackSignatureError):
            await built.receive_status(StatusCallback(CALLBACK_URL, body, {}, query))
    await built.receive_status(StatusCallback(CALLBACK_URL, body, {}, {SECRET_PARAM: "url-secret"}))
    await built.close()
    assert [r.status for r in sink.reports] == ["delivered"]
