"""The WhatsApp carrier against a local Cloud API that speaks as Meta documents it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
import pytest_asyncio

from relay.carriers.base import (
    CarrierError,
    CarrierRejected,
    CarrierThrottled,
    CarrierUnavailable,
    OutboundSms,
    Passcode,
)
from relay.carriers.callbacks import StatusCallback
from relay.carriers.whatsapp import WhatsAppCarrier, WhatsAppSettings
from tests.carriers.fake_server import Hang, Reply, closed_port
from tests.carriers.reading import reports_of
from tests.carriers.whatsapp_fake import FakeWhatsApp, graph_error

TOKEN = "EAAJB-relay-test-token"
APP_SECRET = "relay-app-secret-0123"
CODE = "482916"
NOW = datetime.now(UTC).replace(microsecond=0)
PASSCODE = Passcode(CODE, "Relay", "en", NOW + timedelta(minutes=10))
MESSAGE = OutboundSms("att_1", "+14155552671", "Relay", f"Your Relay code is {CODE}", PASSCODE)

pytestmark = pytest.mark.asyncio(loop_scope="module")


def settings(fake: FakeWhatsApp, **changes: object) -> WhatsAppSettings:
    base = WhatsAppSettings(
        name="whatsapp-main",
        phone_number_id=fake.phone_number_id,
        access_token=TOKEN,
        app_secret=APP_SECRET,
        verify_token="relay-verify-token",
        template="relay_code",
        template_language="en_US",
        base_url=fake.base_url or "http://127.0.0.1:9",
        status_callback_url="https://relay.example.com/v1/carriers/whatsapp-main/status",
        timeout=1.5,
        throttle_retry_after=2.5,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def meta_server() -> AsyncIterator[FakeWhatsApp]:
    # Approved in three languages; `es` is listed by the tests' carrier but not approved.
    approved = {("relay_code", language) for language in ("en_US", "fr", "pt_BR")}
    fake = FakeWhatsApp(access_token=TOKEN, app_secret=APP_SECRET, templates=frozenset(approved))
    async with fake.running():
        yield fake


@pytest_asyncio.fixture(loop_scope="module")
async def meta(meta_server: FakeWhatsApp) -> AsyncIterator[FakeWhatsApp]:
    yield meta_server
    assert meta_server.end_test() == [], "the carrier broke Meta's documented request"


@pytest_asyncio.fixture(loop_scope="module")
async def carrier(meta: FakeWhatsApp) -> AsyncIterator[WhatsAppCarrier]:
    built = WhatsAppCarrier(settings(meta), clock=lambda: NOW)
    yield built
    await built.close()


async def test_the_code_goes_in_an_authentication_template_named_by_metas_id(
    meta: FakeWhatsApp, carrier: WhatsAppCarrier
) -> None:
    receipt = await carrier.submit(MESSAGE)
    assert receipt.carrier_message_id in meta.messages
    code = [{"type": "text", "text": CODE}]
    assert meta.received == [
        {
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": "14155552671",
            "type": "template",
            "template": {
                "name": "relay_code",
                "language": {"code": "en_US"},
                "components": [
                    {"type": "body", "parameters": code},
                    {"type": "button", "sub_type": "url", "index": "0", "parameters": code},
                ],
            },
        }
    ]


def in_locale(locale: str) -> OutboundSms:
    return replace(MESSAGE, passcode=replace(PASSCODE, locale=locale))


def languages_sent(meta: FakeWhatsApp) -> list[str]:
    return [body["template"]["language"]["code"] for body in meta.received]


async def test_each_verification_gets_the_template_in_the_best_approved_language(
    meta: FakeWhatsApp,
) -> None:
    listed = ("en_US", "fr", "pt_BR")
    carrier = WhatsAppCarrier(settings(meta, template_languages=listed), clock=lambda: NOW)
    for locale in ("fr", "pt", "pt-BR", "de", "en"):
        await carrier.submit(in_locale(locale))
    await carrier.close()
    assert languages_sent(meta) == ["fr", "pt_BR", "pt_BR", "en_US", "en_US"]


async def test_without_template_languages_a_french_verification_gets_the_one_language(
    meta: FakeWhatsApp, carrier: WhatsAppCarrier
) -> None:
    await carrier.submit(in_locale("fr"))
    assert languages_sent(meta) == ["en_US"]


async def test_a_language_listed_but_not_approved_at_meta_makes_the_carrier_unavailable(
    meta: FakeWhatsApp,
) -> None:
    listed = ("en_US", "es")
    carrier = WhatsAppCarrier(settings(meta, template_languages=listed), clock=lambda: NOW)
    with pytest.raises(CarrierUnavailable) as unavailable:
        await carrier.submit(in_locale("es-MX"))
    await carrier.submit(in_locale("fr"))
    await carrier.close()
    assert unavailable.value.code == "whatsapp_132001"
    assert languages_sent(meta) == ["es", "en_US"]
    assert len(meta.messages) == 1


async def test_a_delivered_template_counts_as_one_billed_message_whatever_its_words(
    carrier: WhatsAppCarrier,
) -> None:
    long_words = replace(MESSAGE, body="é" * 400)
    assert (await carrier.submit(long_words)).segments == 1


async def test_the_carrier_is_on_the_whatsapp_channel(carrier: WhatsAppCarrier) -> None:
    assert carrier.channel == "whatsapp"


async def test_a_message_without_a_passcode_is_refused_before_meta_hears_of_it(
    meta: FakeWhatsApp, carrier: WhatsAppCarrier
) -> None:
    with pytest.raises(CarrierRejected) as refused:
        await carrier.submit(replace(MESSAGE, passcode=None))
    assert (refused.value.code, meta.received) == ("whatsapp_no_passcode", [])


@pytest.mark.parametrize(
    ("reply", "kind", "code"),
    [
        (Reply(400, graph_error(131026, "Message undeliverable")), CarrierRejected, "131026"),
        (Reply(400, graph_error(131049, "Not delivered for ecosystem")), CarrierRejected, "131049"),
        (Reply(400, graph_error(100, "Invalid parameter")), CarrierRejected, "100"),
        (Reply(401, graph_error(190, "Access token has expired")), CarrierUnavailable, "190"),
        (Reply(403, graph_error(10, "Permission denied")), CarrierUnavailable, "10"),
        (Reply(403, graph_error(200, "API Permission")), CarrierUnavailable, "200"),
        (Reply(400, graph_error(131031, "Account has been locked")), CarrierUnavailable, "131031"),
        (Reply(400, graph_error(132015, "Template is paused")), CarrierUnavailable, "132015"),
        (Reply(500, graph_error(131000, "Something went wrong")), CarrierUnavailable, "131000"),
        (Reply(503, graph_error(131016, "Service unavailable")), CarrierUnavailable, "131016"),
        (Reply(502, None), CarrierUnavailable, "http_502"),
        (Reply(418, None), CarrierRejected, "http_418"),
    ],
)
async def test_a_graph_error_is_read_by_its_code(
    carrier: WhatsAppCarrier, meta: FakeWhatsApp, reply: Reply, kind: type, code: str
) -> None:
    meta.then(reply)
    with pytest.raises(CarrierError) as refused:
        await carrier.submit(MESSAGE)
    assert type(refused.value) is kind
    assert refused.value.code == f"whatsapp_{code}"


async def test_an_unknown_template_makes_the_carrier_unavailable_as_meta_answers_it(
    meta: FakeWhatsApp,
) -> None:
    carrier = WhatsAppCarrier(settings(meta, template="no_such_template"))
    with pytest.raises(CarrierUnavailable) as unavailable:
        await carrier.submit(MESSAGE)
    await carrier.close()
    assert unavailable.value.code == "whatsapp_132001"


async def test_a_token_meta_does_not_know_makes_the_carrier_unavailable(
    meta: FakeWhatsApp,
) -> None:
    carrier = WhatsAppCarrier(settings(meta, access_token="EAA-revoked"))
    with pytest.raises(CarrierUnavailable) as unavailable:
        await carrier.submit(MESSAGE)
    await carrier.close()
    assert (unavailable.value.code, meta.received) == ("whatsapp_190", [])


@pytest.mark.parametrize("code", [130429, 131056, 131048, 80007])
async def test_a_rate_limit_in_a_400_throttles_for_the_configured_wait(
    carrier: WhatsAppCarrier, meta: FakeWhatsApp, code: int
) -> None:
    meta.then(Reply(400, graph_error(code, "Rate limit hit")))
    with pytest.raises(CarrierThrottled) as throttled:
        await carrier.submit(MESSAGE)
    assert (throttled.value.code, throttled.value.retry_after) == (f"whatsapp_{code}", 2.5)


async def test_a_429_with_retry_after_throttles_for_that_long(
    carrier: WhatsAppCarrier, meta: FakeWhatsApp
) -> None:
    meta.then(Reply(429, graph_error(4, "Too many calls"), {"Retry-After": "7"}))
    with pytest.raises(CarrierThrottled) as throttled:
        await carrier.submit(MESSAGE)
    assert (throttled.value.code, throttled.value.retry_after) == ("whatsapp_4", 7.0)


async def test_an_acceptance_without_a_message_id_makes_the_carrier_unavailable(
    carrier: WhatsAppCarrier, meta: FakeWhatsApp
) -> None:
    meta.then(Reply(200, {"messaging_product": "whatsapp", "messages": []}))
    with pytest.raises(CarrierUnavailable) as unavailable:
        await carrier.submit(MESSAGE)
    assert unavailable.value.code == "whatsapp_bad_response"


async def test_a_closed_port_or_a_silent_meta_makes_the_carrier_unavailable(
    meta: FakeWhatsApp,
) -> None:
    with closed_port() as url:
        closed = WhatsAppCarrier(settings(meta, base_url=url))
        with pytest.raises(CarrierUnavailable) as unreachable:
            await closed.submit(MESSAGE)
        await closed.close()
    silent = WhatsAppCarrier(settings(meta, timeout=0.3))
    meta.then(Hang())
    with pytest.raises(CarrierUnavailable) as timed_out:
        await silent.submit(MESSAGE)
    meta.script.release.set()
    await silent.close()
    assert (unreachable.value.code, timed_out.value.code) == (
        "whatsapp_unreachable",
        "whatsapp_timeout",
    )


async def test_the_code_and_the_credentials_never_reach_the_logs(
    carrier: WhatsAppCarrier, meta: FakeWhatsApp, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    receipt = await carrier.submit(MESSAGE)
    meta.then(Reply(400, graph_error(131026, "Message undeliverable")))
    with pytest.raises(CarrierRejected):
        await carrier.submit(MESSAGE)
    sink = await reports_of(carrier)
    body = meta.status_webhook((receipt.carrier_message_id, "delivered"))
    await carrier.receive_status(callback(meta, body))
    assert len(sink.reports) == 1
    assert caplog.records
    for secret in (CODE, TOKEN, APP_SECRET):
        assert secret not in caplog.text


def callback(meta: FakeWhatsApp, body: bytes) -> StatusCallback:
    url = "https://relay.example.com/v1/carriers/whatsapp-main/status"
    return StatusCallback(url=url, body=body, headers=meta.headers(body))
