"""Each HTTP provider as the end-to-end tests drive it: its fake, its config table, its words.

Adding a provider to the end-to-end suite is one function here returning a
`Case`; `running_cases` starts every fake for the length of a module.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

from tests.carriers.fake_server import Reply
from tests.carriers.infobip_fake import FakeInfobip, infobip_error
from tests.carriers.plivo_fake import FakePlivo, plivo_error
from tests.carriers.sinch_fake import FakeSinch, sinch_error
from tests.carriers.telnyx_fake import VALID_FROM, FakeTelnyx, telnyx_error
from tests.carriers.twilio_fake import VALID_FROM as TWILIO_FROM
from tests.carriers.twilio_fake import FakeTwilio
from tests.carriers.vonage_fake import FakeVonage, error_answer

TWILIO_SID, TWILIO_TOKEN = "AC00112233445566778899aabbccddee01", "relay-providers-e2e"


@dataclass
class Case:
    """One provider: its fake, the carrier table naming it, its words for each status."""

    carrier: str
    country: str
    fake: Any
    table: dict[str, Any]
    numbers: Iterator[str]
    delivered: str
    failed: str
    progress: str
    failed_error: Any  # the provider's error code in the failed callback
    failed_code: str  # what Relay records of it
    refusal: Reply
    throttled: Reply

    def number(self) -> str:
        return next(self.numbers)


def numbers(template: str, start: int) -> Iterator[str]:
    return (template.format(n % 1000) for n in itertools.count(start))


def http_table(provider: str, fake: Any, **credentials: Any) -> dict[str, Any]:
    return {
        "kind": "http",
        "provider": provider,
        "base_url": fake.base_url,
        "timeout": 5.0,  # no test waits it out; generous for loaded CI
        "throttle_retry_after": 0.2,
        **credentials,
    }


def telnyx_case(fake: FakeTelnyx) -> Case:
    return Case(
        carrier="telnyx-main",
        country="US",
        fake=fake,
        table=http_table(
            "telnyx", fake, api_key=fake.api_key, public_key=fake.public_key, sender=VALID_FROM
        ),
        numbers=numbers("+1415556{:04d}", 100),
        delivered="delivered",
        failed="delivery_failed",
        progress="sent",
        failed_error="40008",
        failed_code="telnyx_40008",
        refusal=Reply(400, telnyx_error("40310", "Invalid 'to' address", "")),
        throttled=Reply(
            429, telnyx_error("10011", "Too many requests", ""), {"Retry-After": "0.2"}
        ),
    )


def vonage_case(fake: FakeVonage) -> Case:
    credentials = {"api_key": fake.api_key, "api_secret": fake.api_secret, "sender": "Relay"}
    return Case(
        carrier="vonage-main",
        country="GB",
        fake=fake,
        table=http_table("vonage", fake, signature_secret=fake.signature_secret, **credentials),
        numbers=numbers("+44740012{:04d}", 200),
        delivered="delivered",
        failed="failed",
        progress="accepted",
        failed_error="3",
        failed_code="vonage_dlr_3",
        refusal=Reply(200, error_answer("6", "Invalid Message")),
        throttled=Reply(200, error_answer("1", "Throughput Rate Exceeded")),
    )


def plivo_case(fake: FakePlivo) -> Case:
    credentials = {"auth_id": fake.auth_id, "auth_token": fake.auth_token, "sender": "33700000000"}
    return Case(
        carrier="plivo-main",
        country="FR",
        fake=fake,
        table=http_table("plivo", fake, **credentials),
        numbers=numbers("+3361234{:04d}", 300),
        delivered="delivered",
        failed="undelivered",
        progress="sent",
        failed_error="300",
        failed_code="plivo_300",
        refusal=Reply(400, plivo_error("invalid 'dst' parameter")),
        throttled=Reply(429, plivo_error("too many requests"), {"Retry-After": "0.2"}),
    )


def sinch_case(fake: FakeSinch) -> Case:
    credentials = {"service_plan_id": fake.service_plan_id, "api_token": fake.api_token}
    return Case(
        carrier="sinch-main",
        country="SE",
        fake=fake,
        table=http_table(
            "sinch", fake, sender="Relay", signature_secret=fake.signature_secret, **credentials
        ),
        numbers=numbers("+4670123{:04d}", 400),
        delivered="Delivered",
        failed="Failed",
        progress="Dispatched",
        failed_error=402,
        failed_code="sinch_402",
        refusal=Reply(400, sinch_error("syntax_invalid_parameter_format", "Invalid recipient")),
        throttled=Reply(429, sinch_error("too_many_requests", "Slow down"), {"Retry-After": "0.2"}),
    )


def infobip_case(fake: FakeInfobip) -> Case:
    credentials = {"api_key": fake.api_key, "callback_secret": "e2e-url-secret"}
    return Case(
        carrier="infobip-main",
        country="DE",
        fake=fake,
        table=http_table("infobip", fake, sender="Relay", **credentials),
        numbers=numbers("+491511234{:04d}", 500),
        delivered="DELIVERED_TO_HANDSET",
        failed="UNDELIVERABLE_NOT_DELIVERED",
        progress="DELIVERED_TO_OPERATOR",
        failed_error="EC_ABSENT_SUBSCRIBER",
        failed_code="infobip_EC_ABSENT_SUBSCRIBER",
        refusal=Reply(400, infobip_error("E400", "Bad request")),
        throttled=Reply(429, infobip_error("E429", "Too many requests"), {"Retry-After": "0.2"}),
    )


FAKES: dict[str, tuple[Callable[[], Any], Callable[[Any], Case]]] = {
    "telnyx": (lambda: FakeTelnyx(api_key="KEY-e2e-telnyx"), telnyx_case),
    "vonage": (
        lambda: FakeVonage("e2e12345", "vonage-e2e-secret", signature_secret="e2e-sig"),
        vonage_case,
    ),
    "plivo": (lambda: FakePlivo("MAE2EPLIVO0000000000", "plivo-e2e-token"), plivo_case),
    "sinch": (lambda: FakeSinch("e2eplan01", "sinch-e2e", signature_secret="e2e-hmac"), sinch_case),
    "infobip": (lambda: FakeInfobip("infobip-e2e-key"), infobip_case),
}


@asynccontextmanager
async def running_cases() -> AsyncIterator[dict[str, Case]]:
    """Every provider's fake, started, as cases by provider name."""
    async with AsyncExitStack() as stack:
        cases = {}
        for name, (make, case) in FAKES.items():
            fake = make()
            await stack.enter_async_context(fake.running())
            cases[name] = case(fake)
        yield cases


@asynccontextmanager
async def running_twilio() -> AsyncIterator[tuple[FakeTwilio, dict[str, Any]]]:
    """A Twilio fake and its carrier table, for routes that end with Twilio."""
    fake = FakeTwilio(account_sid=TWILIO_SID, auth_token=TWILIO_TOKEN)
    async with fake.running():
        table = http_table(
            "twilio", fake, account_sid=TWILIO_SID, auth_token=TWILIO_TOKEN, from_number=TWILIO_FROM
        )
        yield fake, table
