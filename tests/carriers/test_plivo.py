"""The Plivo carrier against a local Plivo that speaks its documented Message API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
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
from relay.carriers.callbacks import CallbackSignatureError, StatusCallback
from relay.carriers.http_carrier import HttpCarrier
from relay.carriers.plivo import PlivoSettings
from relay.carriers.providers import http_carrier
from tests.carriers.fake_server import Hang, Reply, billed_segments
from tests.carriers.plivo_fake import INVALID_DST, FakePlivo, Version, plivo_error
from tests.carriers.reading import reports_of

AUTH_ID, AUTH_TOKEN = "MAXXXXXXXXXXXXXXXXXX", "plivo-auth-token"
NOW = datetime.now(UTC).replace(microsecond=0)
CALLBACK_URL = "https://relay.example.com/v1/carriers/plivo-main/status"
SECRET_BODY = "Your Relay code is 482916"
SMS = OutboundSms(attempt_id="att_1", to="+14155550123", sender="Relay", body=SECRET_BODY)

pytestmark = pytest.mark.asyncio(loop_scope="module")


def settings(fake: FakePlivo, **changes: Any) -> PlivoSettings:
    base = PlivoSettings(
        name="plivo-main",
        auth_id=AUTH_ID,
        auth_token=AUTH_TOKEN,
        sender="14155550100",
        base_url=fake.base_url or "http://127.0.0.1:9",
        status_callback_url=CALLBACK_URL,
        timeout=1.5,
        throttle_retry_after=2.5,
    )
    return replace(base, **changes)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def plivo_server() -> AsyncIterator[FakePlivo]:
    fake = FakePlivo(AUTH_ID, AUTH_TOKEN)
    async with fake.running():
        yield fake


@pytest_asyncio.fixture(loop_scope="module")
async def plivo(plivo_server: FakePlivo) -> AsyncIterator[FakePlivo]:
    yield plivo_server
    assert plivo_server.end_test() == [], "the carrier broke Plivo's documented request"


@pytest_asyncio.fixture(loop_scope="module")
async def carrier(plivo: FakePlivo) -> AsyncIterator[HttpCarrier]:
    built = http_carrier(settings(plivo), clock=lambda: NOW)
    yield built
    await built.close()


async def test_a_submitted_sms_is_named_by_the_message_uuid_plivo_returns(
    plivo: FakePlivo, carrier: HttpCarrier
) -> None:
    receipt = await carrier.submit(SMS)
    assert receipt.carrier_message_id == plivo.id_for(SMS.to)
    assert plivo.received == [
        {
            "src": "14155550100",
            "dst": "14155550123",
            "text": SECRET_BODY,
            "url": CALLBACK_URL,
            "method": "POST",
        }
    ]


@pytest.mark.parametrize("body", ["a" * 160, "a" * 161, "Código 123456", "Ж" * 71])
async def test_multipart_and_unicode_texts_count_the_units_plivo_bills(
    plivo: FakePlivo, carrier: HttpCarrier, body: str
) -> None:
    receipt = await carrier.submit(replace(SMS, body=body))
    billed = plivo.callback(receipt.carrier_message_id, "delivered")["Units"]
    assert receipt.segments == int(billed) == billed_segments(body)


async def test_an_invalid_dst_is_rejected(carrier: HttpCarrier) -> None:
    with pytest.raises(CarrierRejected) as refused:
        await carrier.submit(replace(SMS, to="+" + INVALID_DST))
    assert (refused.value.code, refused.value.message) == (
        "plivo_http_400",
        "invalid 'dst' parameter",
    )


async def test_too_many_requests_throttles_for_its_retry_after_or_the_default(
    plivo: FakePlivo, carrier: HttpCarrier
) -> None:
    plivo.then(Reply(429, plivo_error("too many requests"), {"Retry-After": "6"}), Reply(429))
    waits = []
    for _ in range(2):
        with pytest.raises(CarrierThrottled) as throttled:
            await carrier.submit(SMS)
        waits.append(throttled.value.retry_after)
    assert waits == [6.0, 2.5]


async def test_wrong_credentials_a_server_error_or_silence_make_the_carrier_unavailable(
    plivo: FakePlivo,
) -> None:
    wrong = http_carrier(settings(plivo, auth_token="not-it"))
    with pytest.raises(CarrierUnavailable) as unauthorized:
        await wrong.submit(SMS)
    await wrong.close()
    built = http_carrier(settings(plivo, timeout=0.3))
    plivo.then(Reply(500, plivo_error("internal error")), Hang())
    codes = [unauthorized.value.code]
    for _ in range(2):
        with pytest.raises(CarrierUnavailable) as unavailable:
            await built.submit(SMS)
        codes.append(unavailable.value.code)
    plivo.script.release.set()
    await built.close()
    assert codes == ["plivo_http_401", "plivo_http_500", "plivo_timeout"]


async def signed_callback(
    plivo: FakePlivo,
    carrier: HttpCarrier,
    status: str,
    *,
    at: datetime = NOW,
    versions: tuple[Version, ...] = ("v2", "v3"),
) -> tuple[str, StatusCallback]:
    message_id = (await carrier.submit(SMS)).carrier_message_id
    form = plivo.callback(message_id, status, error_code="300", at=at)
    signed = plivo.headers(CALLBACK_URL, form, versions=versions)
    headers = {k.lower(): v for k, v in signed.items()}
    return message_id, StatusCallback(CALLBACK_URL, urlencode(form).encode(), headers)


@pytest.mark.parametrize(
    ("status", "report"),
    [
        ("delivered", ("delivered", None)),
        ("undelivered", ("failed", "plivo_300")),
        ("failed", ("failed", "plivo_300")),
        ("rejected", ("failed", "plivo_300")),
        ("queued", None),
        ("sent", None),
    ],
)
async def test_only_final_statuses_of_a_signed_callback_become_reports(
    plivo: FakePlivo, carrier: HttpCarrier, status: str, report: tuple[str, str | None] | None
) -> None:
    sink = await reports_of(carrier)
    message_id, callback = await signed_callback(plivo, carrier, status)
    await carrier.receive_status(callback)
    expected = [] if report is None else [DeliveryReport("plivo-main", message_id, *report, NOW)]  # type: ignore[arg-type]
    assert sink.reports == expected


async def test_a_forged_altered_unsigned_or_stale_callback_is_refused(
    plivo: FakePlivo, carrier: HttpCarrier
) -> None:
    sink = await reports_of(carrier)
    _, callback = await signed_callback(plivo, carrier, "undelivered")
    form = callback.form()
    forged = plivo.headers(CALLBACK_URL, form, token="guess")
    refused = [
        replace(callback, headers={k.lower(): v for k, v in forged.items()}),
        replace(callback, body=callback.body.replace(b"undelivered", b"delivered")),
        (await signed_callback(plivo, carrier, "delivered", at=NOW - timedelta(hours=2)))[1],
    ]
    for callback_refused in refused:
        with pytest.raises(CallbackSignatureError):
            await carrier.receive_status(callback_refused)
    assert sink.reports == []


async def test_one_matching_signature_among_several_is_enough(
    plivo: FakePlivo, carrier: HttpCarrier
) -> None:
    sink = await reports_of(carrier)
    _, callback = await signed_callback(plivo, carrier, "delivered")
    header = "bm90LWl0," + callback.headers["x-plivo-signature-v3"]
    await carrier.receive_status(
        replace(callback, headers={**callback.headers, "x-plivo-signature-v3": header})
    )
    assert len(sink.reports) == 1


async def test_a_receipt_signed_with_v2_alone_is_taken_unless_only_v3_is_accepted(
    plivo: FakePlivo, carrier: HttpCarrier
) -> None:
    sink = await reports_of(carrier)
    message_id, callback = await signed_callback(plivo, carrier, "delivered", versions=("v2",))
    strict = http_carrier(settings(plivo, signature_versions=("v3",)), clock=lambda: NOW)
    await reports_of(strict)

    with pytest.raises(CallbackSignatureError, match="x-plivo-signature-v3"):
        await strict.receive_status(callback)
    await carrier.receive_status(callback)

    await strict.close()
    assert sink.reports == [DeliveryReport("plivo-main", message_id, "delivered", None, NOW)]


async def test_a_callback_carrying_v3_is_judged_by_v3_alone(
    plivo: FakePlivo, carrier: HttpCarrier
) -> None:
    """V2 covers no body: with V3 present, an altered body must not pass on V2's word."""
    sink = await reports_of(carrier)
    _, callback = await signed_callback(plivo, carrier, "undelivered")
    altered = replace(callback, body=callback.body.replace(b"undelivered", b"delivered"))

    with pytest.raises(CallbackSignatureError, match="x-plivo-signature-v3"):
        await carrier.receive_status(altered)
    assert sink.reports == []


@pytest.mark.parametrize("versions", [("v2",), ("v3",)], ids=["V2", "V3"])
async def test_a_nonce_seen_twice_within_the_window_is_refused_whatever_the_body(
    plivo: FakePlivo, carrier: HttpCarrier, versions: tuple[Version, ...]
) -> None:
    sink = await reports_of(carrier)
    _, callback = await signed_callback(plivo, carrier, "undelivered", versions=versions)
    await carrier.receive_status(callback)
    without_times = replace(
        callback, body=b"&".join(part for part in callback.body.split(b"&") if b"Time=" not in part)
    )

    for replay in (callback, replace(callback, body=callback.body + b"&Extra=1"), without_times):
        with pytest.raises(CallbackSignatureError):
            await carrier.receive_status(replay)
    assert len(sink.reports) == 1


async def test_a_v3_callback_without_a_time_field_is_taken_once(
    plivo: FakePlivo, carrier: HttpCarrier
) -> None:
    sink = await reports_of(carrier)
    message_id = (await carrier.submit(SMS)).carrier_message_id
    form = {"MessageUUID": message_id, "Status": "delivered"}
    headers = {k.lower(): v for k, v in plivo.headers(CALLBACK_URL, form, versions=("v3",)).items()}
    callback = StatusCallback(CALLBACK_URL, urlencode(form).encode(), headers)

    await carrier.receive_status(callback)
    with pytest.raises(CallbackSignatureError, match="replay"):
        await carrier.receive_status(callback)
    assert len(sink.reports) == 1


@pytest.mark.parametrize("nonce", ["", "n" * 129, "nonce\u00e9", "a b\x00"])
async def test_a_nonce_that_is_no_nonce_is_refused_before_the_signature(
    plivo: FakePlivo, carrier: HttpCarrier, nonce: str
) -> None:
    _, callback = await signed_callback(plivo, carrier, "delivered", versions=("v2",))
    headers = {**callback.headers, "x-plivo-signature-v2-nonce": nonce}

    with pytest.raises(CallbackSignatureError, match="nonce"):
        await carrier.receive_status(replace(callback, headers=headers))


async def test_a_nonce_is_given_back_when_its_report_cannot_be_recorded(
    plivo: FakePlivo, carrier: HttpCarrier
) -> None:
    """So the provider's retry of the same callback is taken, not refused as a replay."""
    _, callback = await signed_callback(plivo, carrier, "delivered", versions=("v2",))
    sink = await reports_of(carrier)

    async def down(report: DeliveryReport) -> None:
        raise RuntimeError("the database is down")

    await carrier.start(down)
    with pytest.raises(RuntimeError):
        await carrier.receive_status(callback)
    await carrier.start(sink)
    await carrier.receive_status(callback)
    assert len(sink.reports) == 1
