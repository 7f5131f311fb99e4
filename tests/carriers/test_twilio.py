"""The Twilio carrier against a local Twilio that enforces Twilio's published contract."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest
import pytest_asyncio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from relay.carriers.base import (
    CarrierRejected,
    CarrierThrottled,
    CarrierUnavailable,
    DeliveryReport,
    OutboundSms,
)
from relay.carriers.callbacks import StatusCallback
from relay.carriers.http_carrier import HttpCarrier
from relay.carriers.providers import http_carrier
from relay.carriers.twilio import (
    CallbackPayloadError,
    CallbackSignatureError,
    TwilioSettings,
)
from tests.carriers.fake_server import closed_port, serve
from tests.carriers.twilio_fake import (
    INVALID_TO,
    VALID_FROM,
    CreatedAs,
    FakeTwilio,
    Hang,
    Reply,
    contract,
    twilio_error,
)

ACCOUNT_SID = "AC0123456789abcdef0123456789abcdef"
SERVICE_SID = "MG0123456789abcdef0123456789abcdef"
AUTH_TOKEN = "test-auth-token"
NOW = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
TIMEOUT = 1.5  # seconds; generous, as the fake Twilio shares this test process
CALLBACK_PATH = "/carriers/twilio-main/status"
SECRET_BODY = "Your Relay code is 482916"
SMS = OutboundSms(attempt_id="att_1", to="+15558675310", sender="Relay", body=SECRET_BODY)


@dataclass
class Relay:
    """Relay's side of one test: the carrier and the reports its sink received."""

    carrier: HttpCarrier
    reports: list[DeliveryReport] = field(default_factory=list)

    async def sink(self, report: DeliveryReport) -> None:
        self.reports.append(report)


def settings(base_url: str, callback_url: str = "http://127.0.0.1:9/cb") -> TwilioSettings:
    return TwilioSettings(
        name="twilio-main",
        account_sid=ACCOUNT_SID,
        auth_token=AUTH_TOKEN,
        from_number=VALID_FROM,
        base_url=base_url,
        status_callback_url=callback_url,
        timeout=TIMEOUT,
        throttle_retry_after=2.5,
    )


@dataclass
class CallbackRoute:
    """What Relay's real callback route must do: hand the request to the carrier."""

    url: str = ""
    relay: Relay | None = None

    @property
    def app(self) -> Starlette:
        return Starlette(routes=[Route(CALLBACK_PATH, self.status, methods=["POST"])])

    async def status(self, request: Request) -> Response:
        assert self.relay is not None
        headers = {key.lower(): value for key, value in request.headers.items()}
        callback = StatusCallback(str(request.url), await request.body(), headers)
        try:
            await self.relay.carrier.receive_status(callback)
        except CallbackSignatureError:
            return Response(status_code=403)
        except CallbackPayloadError:
            return Response(status_code=400)
        return Response(status_code=204)


# The loopback servers live for the module (uvicorn needs ~0.2 s to stop);
# each test gets a fresh fake account state and a fresh carrier.


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def twilio_server() -> AsyncIterator[FakeTwilio]:
    fake = FakeTwilio(account_sid=ACCOUNT_SID, auth_token=AUTH_TOKEN)
    async with fake.running():
        yield fake


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def callback_server() -> AsyncIterator[CallbackRoute]:
    route = CallbackRoute()
    async with serve(route.app) as base_url:
        route.url = base_url + CALLBACK_PATH
        yield route


@pytest_asyncio.fixture(loop_scope="module")
async def twilio(twilio_server: FakeTwilio) -> AsyncIterator[FakeTwilio]:
    yield twilio_server
    assert twilio_server.end_test() == [], "the carrier broke Twilio's published contract"


@pytest_asyncio.fixture(loop_scope="module")
async def relay(twilio: FakeTwilio, callback_server: CallbackRoute) -> AsyncIterator[Relay]:
    carrier = http_carrier(settings(twilio.base_url, callback_server.url), clock=lambda: NOW)
    callback_server.relay = Relay(carrier)
    await carrier.start(callback_server.relay.sink)
    yield callback_server.relay
    await carrier.close()


class TestTheCarrierOverLoopback:
    """Submit and callbacks through real sockets, against the fake Twilio."""

    pytestmark = pytest.mark.asyncio(loop_scope="module")

    async def test_a_submitted_sms_is_named_by_the_sid_twilio_returns(
        self, twilio: FakeTwilio, relay: Relay
    ) -> None:
        receipt = await relay.carrier.submit(SMS)

        assert receipt.carrier_message_id in twilio.messages
        assert receipt.carrier_message_id.startswith("SM")

    async def test_the_carrier_sends_only_the_documented_parameters_it_needs(
        self, twilio: FakeTwilio, relay: Relay
    ) -> None:
        await relay.carrier.submit(SMS)

        [sent] = twilio.received
        assert sent == {
            "To": SMS.to,
            "From": VALID_FROM,
            "Body": SECRET_BODY,
            "StatusCallback": relay.carrier.status_callback_url,
        }
        assert sent.keys() <= contract().parameters.keys()

    async def test_a_messaging_service_can_stand_in_for_the_from_number(
        self, twilio: FakeTwilio
    ) -> None:
        base = settings(twilio.base_url)
        carrier = http_carrier(replace(base, from_number=None, messaging_service_sid=SERVICE_SID))

        await carrier.submit(SMS)
        await carrier.close()

        [sent] = twilio.received
        assert sent["MessagingServiceSid"] == SERVICE_SID
        assert "From" not in sent

    async def test_a_delivered_callback_reaches_the_sink_as_delivered(
        self, twilio: FakeTwilio, relay: Relay
    ) -> None:
        sid = (await relay.carrier.submit(SMS)).carrier_message_id

        answer = await twilio.send_status(sid, "delivered")

        assert answer == 204
        assert relay.reports == [DeliveryReport("twilio-main", sid, "delivered", None, NOW)]

    async def test_an_undelivered_callback_reaches_the_sink_as_failed_with_twilios_error_code(
        self, twilio: FakeTwilio, relay: Relay
    ) -> None:
        sid = (await relay.carrier.submit(SMS)).carrier_message_id

        answer = await twilio.send_status(sid, "undelivered", error_code=30003)

        assert answer == 204
        assert relay.reports == [DeliveryReport("twilio-main", sid, "failed", "twilio_30003", NOW)]

    async def test_statuses_on_the_way_to_the_handset_reach_the_sink_as_nothing(
        self, twilio: FakeTwilio, relay: Relay
    ) -> None:
        sid = (await relay.carrier.submit(SMS)).carrier_message_id

        answers = [
            await twilio.send_status(sid, status) for status in ("queued", "sending", "sent")
        ]

        assert answers == [204, 204, 204]
        assert relay.reports == []

    async def test_a_callback_signed_with_another_token_is_refused_and_reaches_no_sink(
        self, twilio: FakeTwilio, relay: Relay
    ) -> None:
        sid = (await relay.carrier.submit(SMS)).carrier_message_id

        answer = await twilio.send_status(sid, "delivered", token="someone-elses-token")

        assert answer == 403
        assert relay.reports == []

    async def test_an_invalid_to_number_is_rejected_with_twilios_error_code(
        self, relay: Relay
    ) -> None:
        with pytest.raises(CarrierRejected) as refused:
            await relay.carrier.submit(replace(SMS, to=INVALID_TO))

        assert refused.value.code == "twilio_21211"
        assert INVALID_TO in refused.value.message

    async def test_an_sms_twilio_creates_as_failed_is_rejected_at_once(
        self, twilio: FakeTwilio, relay: Relay
    ) -> None:
        twilio.then(CreatedAs("failed", error_code=30007))

        with pytest.raises(CarrierRejected) as refused:
            await relay.carrier.submit(SMS)

        assert refused.value.code == "twilio_30007"

    @pytest.mark.parametrize(
        ("retry_after", "seconds"),
        [
            ("7", 7.0),
            (format_datetime(NOW + timedelta(seconds=30), usegmt=True), 30.0),
            (None, 2.5),
            ("soon", 2.5),
        ],
        ids=["delay-seconds", "http-date", "absent-so-default", "unreadable-so-default"],
    )
    async def test_too_many_requests_throttles_for_as_long_as_twilio_asks(
        self, twilio: FakeTwilio, relay: Relay, retry_after: str | None, seconds: float
    ) -> None:
        headers = {} if retry_after is None else {"Retry-After": retry_after}
        twilio.then(Reply(429, twilio_error(429, 20429, "Too Many Requests"), headers))

        with pytest.raises(CarrierThrottled) as throttled:
            await relay.carrier.submit(SMS)

        assert (throttled.value.code, throttled.value.retry_after) == ("twilio_20429", seconds)

    async def test_a_server_error_makes_the_carrier_unavailable(
        self, twilio: FakeTwilio, relay: Relay
    ) -> None:
        twilio.then(Reply(500, twilio_error(500, 20500, "Internal Server Error")))

        with pytest.raises(CarrierUnavailable) as unavailable:
            await relay.carrier.submit(SMS)

        assert unavailable.value.code == "twilio_20500"

    async def test_a_server_error_without_a_json_body_still_makes_the_carrier_unavailable(
        self, twilio: FakeTwilio, relay: Relay
    ) -> None:
        twilio.then(Reply(503))

        with pytest.raises(CarrierUnavailable) as unavailable:
            await relay.carrier.submit(SMS)

        assert unavailable.value.code == "twilio_http_503"

    async def test_an_acceptance_without_a_sid_makes_the_carrier_unavailable(
        self, twilio: FakeTwilio, relay: Relay
    ) -> None:
        twilio.then(Reply(201, {"status": "queued"}))

        with pytest.raises(CarrierUnavailable) as unavailable:
            await relay.carrier.submit(SMS)

        assert unavailable.value.code == "twilio_bad_response"

    async def test_wrong_credentials_make_the_carrier_unavailable_rather_than_the_sms_rejected(
        self, twilio: FakeTwilio
    ) -> None:
        base = settings(twilio.base_url)
        carrier = http_carrier(replace(base, auth_token="not-the-token"))

        with pytest.raises(CarrierUnavailable) as unavailable:
            await carrier.submit(SMS)
        await carrier.close()

        assert unavailable.value.code == "twilio_20003"

    async def test_a_twilio_that_never_answers_makes_the_carrier_unavailable_within_the_timeout(
        self, twilio: FakeTwilio, relay: Relay
    ) -> None:
        twilio.then(Hang())
        started = time.monotonic()

        with pytest.raises(CarrierUnavailable) as unavailable:
            await relay.carrier.submit(SMS)

        assert unavailable.value.code == "twilio_timeout"
        assert time.monotonic() - started < TIMEOUT + 2.0  # loose for loaded CI machines

    @pytest.mark.parametrize(
        ("form", "violation"),
        [
            (
                {"To": SMS.to, "From": VALID_FROM, "Body": "hi", "Priority": "high"},
                "parameter not in CreateMessageRequest: Priority",
            ),
            ({"From": VALID_FROM, "Body": "hi"}, "'To' is a required property"),
            ({"To": SMS.to, "MessagingServiceSid": "MG1", "Body": "hi"}, "'MG1' is too short"),
            (
                {"To": SMS.to, "From": VALID_FROM, "StatusCallback": "http://a_b/"},
                "'http://a_b/' is not a 'uri'",
            ),
        ],
        ids=["unknown-parameter", "no-to", "bad-service-sid", "underscore-in-callback-host"],
    )
    async def test_the_fake_refuses_what_twilios_published_contract_forbids(
        self, twilio: FakeTwilio, form: dict[str, str], violation: str
    ) -> None:
        async with httpx.AsyncClient(auth=(ACCOUNT_SID, AUTH_TOKEN)) as client:
            answer = await client.post(twilio.messages_url, data=form)

        assert answer.status_code == 400
        assert violation in twilio.violations.pop()  # seen and meant: the fixture fails on others

    async def test_the_fake_refuses_a_json_body(self, twilio: FakeTwilio) -> None:
        async with httpx.AsyncClient(auth=(ACCOUNT_SID, AUTH_TOKEN)) as client:
            answer = await client.post(twilio.messages_url, json={"To": SMS.to, "Body": "hi"})

        assert answer.status_code == 400
        assert twilio.violations.pop() == "body is application/json, not form-encoded"

    async def test_the_body_never_reaches_the_logs(
        self, twilio: FakeTwilio, relay: Relay, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.DEBUG)
        twilio.then(CreatedAs("queued"), Reply(400, twilio_error(400, 21610, "Unsubscribed")))

        await relay.carrier.submit(SMS)
        with pytest.raises(CarrierRejected):
            await relay.carrier.submit(SMS)

        assert caplog.records
        assert SECRET_BODY not in caplog.text
        assert AUTH_TOKEN not in caplog.text


async def test_a_closed_port_makes_the_carrier_unavailable() -> None:
    with closed_port() as base_url:
        carrier = http_carrier(settings(base_url))
        with pytest.raises(CarrierUnavailable) as unavailable:
            await carrier.submit(SMS)
        await carrier.close()

    assert unavailable.value.code == "twilio_unreachable"
