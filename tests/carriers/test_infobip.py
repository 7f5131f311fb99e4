"""The Infobip carrier against a local Infobip that speaks its documented SMS API."""

from __future__ import annotations

import json
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
from relay.carriers.infobip import InfobipSettings
from relay.carriers.providers import http_carrier
from tests.carriers.fake_server import Hang, Reply, billed_segments
from tests.carriers.infobip_fake import REJECTED_TO, FakeInfobip, infobip_error
from tests.carriers.reading import reports_of

API_KEY, URL_SECRET = "infobip-api-key", "infobip-url-secret"
NOW = datetime.now(UTC).replace(microsecond=0)
CALLBACK_URL = "https://relay.example.com/v1/carriers/infobip-main/status"
SECRET_BODY = "Your Relay code is 482916"
SMS = OutboundSms(attempt_id="att_1", to="+4915112345678", sender="Relay", body=SECRET_BODY)

pytestmark = pytest.mark.asyncio(loop_scope="module")


def settings(fake: FakeInfobip, **changes: Any) -> InfobipSettings:
    base = InfobipSettings(
        name="infobip-main",
        api_key=API_KEY,
        sender="Relay",
        callback_secret=URL_SECRET,
        base_url=fake.base_url or "http://127.0.0.1:9",
        status_callback_url=CALLBACK_URL,
        timeout=1.5,
        throttle_retry_after=2.5,
    )
    return replace(base, **changes)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def infobip_server() -> AsyncIterator[FakeInfobip]:
    fake = FakeInfobip(API_KEY)
    async with fake.running():
        yield fake


@pytest_asyncio.fixture(loop_scope="module")
async def infobip(infobip_server: FakeInfobip) -> AsyncIterator[FakeInfobip]:
    yield infobip_server
    assert infobip_server.end_test() == [], "the carrier broke Infobip's documented request"


@pytest_asyncio.fixture(loop_scope="module")
async def carrier(infobip: FakeInfobip) -> AsyncIterator[HttpCarrier]:
    built = http_carrier(settings(infobip), clock=lambda: NOW)
    yield built
    await built.close()


async def test_a_submitted_sms_is_named_by_infobips_message_id(
    infobip: FakeInfobip, carrier: HttpCarrier
) -> None:
    receipt = await carrier.submit(SMS)
    assert receipt.carrier_message_id == infobip.id_for(SMS.to)
    delivery_url = f"{CALLBACK_URL}?{SECRET_PARAM}={URL_SECRET}"
    assert infobip.received == [
        {
            "messages": [
                {
                    "sender": "Relay",
                    "destinations": [{"to": "4915112345678"}],
                    "content": {"text": SECRET_BODY},
                    "webhooks": {"delivery": {"url": delivery_url}},
                }
            ]
        }
    ]


@pytest.mark.parametrize("body", ["a" * 160, "a" * 161, "Código 123456", "Ж" * 71])
async def test_multipart_and_unicode_texts_count_the_messages_infobip_bills(
    infobip: FakeInfobip, carrier: HttpCarrier, body: str
) -> None:
    receipt = await carrier.submit(replace(SMS, body=body))
    report = infobip.report(receipt.carrier_message_id, "DELIVERED_TO_HANDSET")
    assert receipt.segments == report["messageCount"] == billed_segments(body)


async def test_a_message_infobip_takes_but_rejects_is_rejected(carrier: HttpCarrier) -> None:
    with pytest.raises(CarrierRejected) as refused:
        await carrier.submit(replace(SMS, to="+" + REJECTED_TO))
    assert refused.value.code == "infobip_REJECTED_DESTINATION"


async def test_a_bad_request_is_rejected_and_too_many_requests_throttles(
    infobip: FakeInfobip, carrier: HttpCarrier
) -> None:
    infobip.then(
        Reply(400, infobip_error("E400", "Bad request")),
        Reply(429, infobip_error("E429", "Too many requests"), {"Retry-After": "4"}),
    )
    with pytest.raises(CarrierRejected) as refused:
        await carrier.submit(SMS)
    with pytest.raises(CarrierThrottled) as throttled:
        await carrier.submit(SMS)
    assert refused.value.code == "infobip_E400"
    assert (throttled.value.code, throttled.value.retry_after) == ("infobip_E429", 4.0)


async def test_a_bad_key_an_error_or_silence_make_the_carrier_unavailable(
    infobip: FakeInfobip,
) -> None:
    wrong = http_carrier(settings(infobip, api_key="revoked"))
    with pytest.raises(CarrierUnavailable) as unauthorized:
        await wrong.submit(SMS)
    await wrong.close()
    legacy = {"requestError": {"serviceException": {"messageId": "GENERAL_ERROR", "text": "x"}}}
    built = http_carrier(settings(infobip, timeout=0.3))
    infobip.then(Reply(500, legacy), Hang())
    codes = [unauthorized.value.code]
    for _ in range(2):
        with pytest.raises(CarrierUnavailable) as unavailable:
            await built.submit(SMS)
        codes.append(unavailable.value.code)
    infobip.script.release.set()
    await built.close()
    assert codes == ["infobip_E401", "infobip_GENERAL_ERROR", "infobip_timeout"]


def reports(*results: dict[str, Any], secret: str | None = URL_SECRET) -> StatusCallback:
    body = json.dumps({"results": list(results)}).encode()
    query = {} if secret is None else {SECRET_PARAM: secret}
    return StatusCallback(CALLBACK_URL, body, {"content-type": "application/json"}, query)


async def test_one_request_reports_several_messages_and_only_final_ones_count(
    infobip: FakeInfobip, carrier: HttpCarrier
) -> None:
    sink = await reports_of(carrier)
    ids = [(await carrier.submit(SMS)).carrier_message_id for _ in range(5)]
    names = ["DELIVERED_TO_HANDSET", "UNDELIVERABLE_NOT_DELIVERED", "EXPIRED_EXPIRED"]
    names += ["DELIVERED_TO_OPERATOR", "PENDING_ACCEPTED"]
    error = "EC_ABSENT_SUBSCRIBER"
    await carrier.receive_status(
        reports(*(infobip.report(i, name, error=error) for i, name in zip(ids, names, strict=True)))
    )
    assert sink.reports == [
        DeliveryReport("infobip-main", ids[0], "delivered", None, NOW),
        DeliveryReport("infobip-main", ids[1], "failed", "infobip_" + error, NOW),
        DeliveryReport("infobip-main", ids[2], "failed", "infobip_" + error, NOW),
    ]


async def test_a_report_without_the_carriers_secret_is_refused(
    infobip: FakeInfobip, carrier: HttpCarrier
) -> None:
    sink = await reports_of(carrier)
    message_id = (await carrier.submit(SMS)).carrier_message_id
    delivered = infobip.report(message_id, "DELIVERED_TO_HANDSET")
    for secret in (None, "", "infobip-url-secreT", URL_SECRET + "x"):
        with pytest.raises(CallbackSignatureError):
            await carrier.receive_status(reports(delivered, secret=secret))
    assert sink.reports == []
