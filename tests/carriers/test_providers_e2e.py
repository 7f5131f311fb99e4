"""HTTP providers end to end: Relay sends through each provider's local fake, which calls back.

One Relay over HTTPS routes each country to one provider, then to the sandbox
`backup`; every test runs once per provider, driving the API and the fake's
callbacks (signed, forged, stale, unsigned) through Relay's real callback route.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.carriers.fake_server import Reply
from tests.carriers.reading import attempts, event_types, settle
from tests.carriers.telnyx_fake import VALID_FROM, FakeTelnyx, telnyx_error
from tests.carriers.vonage_fake import FakeVonage, error_answer
from tests.harness import RunningServer, ServerThread, create_account, free_port, test_settings
from tests.webhooks.receiver import isolated_database

pytestmark = pytest.mark.asyncio(loop_scope="module")

TELNYX_KEY = "KEY-e2e-telnyx"
VONAGE_KEY, VONAGE_SECRET, VONAGE_SIGNING = "e2e12345", "vonage-e2e-secret", "vonage-e2e-sig"


@dataclass
class Case:
    """One provider as the tests drive it: its fake, its words for each status."""

    carrier: str
    fake: Any
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


def _numbers(template: str, start: int) -> Iterator[str]:
    return (template.format(n % 1000) for n in itertools.count(start))


@dataclass
class Providers:
    telnyx: Case
    vonage: Case


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def providers() -> AsyncIterator[Providers]:
    telnyx = FakeTelnyx(api_key=TELNYX_KEY)
    vonage = FakeVonage(VONAGE_KEY, VONAGE_SECRET, signature_secret=VONAGE_SIGNING)
    async with telnyx.running(), vonage.running():
        yield Providers(
            telnyx=Case(
                carrier="telnyx-main",
                fake=telnyx,
                numbers=_numbers("+1415556{:04d}", 100),
                delivered="delivered",
                failed="delivery_failed",
                progress="sent",
                failed_error="40008",
                failed_code="telnyx_40008",
                refusal=Reply(400, telnyx_error("40310", "Invalid 'to' address", "")),
                throttled=Reply(
                    429, telnyx_error("10011", "Too many requests", ""), {"Retry-After": "0.2"}
                ),
            ),
            vonage=Case(
                carrier="vonage-main",
                fake=vonage,
                numbers=_numbers("+44740012{:04d}", 200),
                delivered="delivered",
                failed="failed",
                progress="accepted",
                failed_error="3",
                failed_code="vonage_dlr_3",
                refusal=Reply(200, error_answer("6", "Invalid Message")),
                throttled=Reply(200, error_answer("1", "Throughput Rate Exceeded")),
            ),
        )


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, providers: Providers
) -> Iterator[RunningServer]:
    url = isolated_database(database_url, "providers_e2e", tmp_path_factory.mktemp("db"))
    port = free_port()
    carriers: dict[str, dict[str, Any]] = {
        "telnyx-main": {
            "kind": "http",
            "provider": "telnyx",
            "api_key": TELNYX_KEY,
            "public_key": providers.telnyx.fake.public_key,
            "sender": VALID_FROM,
            "base_url": providers.telnyx.fake.base_url,
            "timeout": 5.0,  # no test here waits it out; generous for loaded CI
            "throttle_retry_after": 0.2,
        },
        "vonage-main": {
            "kind": "http",
            "provider": "vonage",
            "api_key": VONAGE_KEY,
            "api_secret": VONAGE_SECRET,
            "signature_secret": VONAGE_SIGNING,
            "sender": "Relay",
            "base_url": providers.vonage.fake.base_url,
            "timeout": 5.0,
            "throttle_retry_after": 0.2,
        },
        "backup": {"kind": "sandbox"},
    }
    settings = test_settings(
        tmp_path_factory.mktemp("data"),
        url,
        public_url=f"https://localhost:{port}",
        carriers=carriers,
        routes={"US": ["telnyx-main", "backup"], "GB": ["vonage-main", "backup"]},
    )
    with ServerThread(settings, port=port) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="module")
async def live(server: RunningServer) -> AsyncIterator[httpx.AsyncClient]:
    account = await asyncio.to_thread(create_account, server.settings)
    async with httpx.AsyncClient(
        base_url=server.base_url,
        verify=server.tls_context(),
        headers={"Authorization": f"Bearer {account.live_key}"},
        timeout=10,
    ) as client:
        yield client


@pytest.fixture(params=["telnyx", "vonage"])
def case(request: pytest.FixtureRequest, providers: Providers) -> Iterator[Case]:
    chosen: Case = getattr(providers, request.param)
    yield chosen
    violations = list(chosen.fake.violations)
    chosen.fake.reset()
    assert violations == [], "the carrier broke the provider's documented request"


async def create(live: httpx.AsyncClient, case: Case) -> dict[str, Any]:
    response = await live.post("/v1/verifications", json={"to": case.number()})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def path(created: dict[str, Any]) -> str:
    return f"/v1/verifications/{created['id']}"


def backup_delivered(body: dict[str, Any]) -> bool:
    return len(body["attempts"]) == 2 and body["attempts"][1]["status"] == "delivered"


def first_is(status: str) -> Callable[[dict[str, Any]], bool]:
    return lambda body: bool(body["attempts"]) and body["attempts"][0]["status"] == status


async def test_the_provider_takes_the_sms_with_a_callback_to_relay(
    live: httpx.AsyncClient, case: Case, server: RunningServer
) -> None:
    created = await create(live, case)
    assert attempts(created) == [(case.carrier, "sent", None)]
    message_id = case.fake.id_for(created["to"])
    callback = case.fake.callback_url(message_id)
    assert callback.startswith(f"{server.base_url}/v1/carriers/{case.carrier}/status")


async def test_a_final_delivered_callback_delivers_the_attempt_once(
    live: httpx.AsyncClient, case: Case, server: RunningServer
) -> None:
    created = await create(live, case)
    message_id, tls = case.fake.id_for(created["to"]), server.tls_context()
    assert await case.fake.send_status(message_id, case.progress, verify=tls) == 204
    assert await case.fake.send_status(message_id, case.delivered, verify=tls) == 204
    assert await case.fake.send_status(message_id, case.delivered, verify=tls) == 204
    body = await settle(live, path(created), first_is("delivered"))
    assert attempts(body) == [(case.carrier, "delivered", None)]
    assert await event_types(live, created["id"]) == ["verification.sent", "verification.delivered"]


async def test_an_undeliverable_callback_fails_over_to_the_next_carrier(
    live: httpx.AsyncClient, case: Case, server: RunningServer
) -> None:
    created = await create(live, case)
    message_id = case.fake.id_for(created["to"])
    status = await case.fake.send_status(
        message_id, case.failed, error_code=case.failed_error, verify=server.tls_context()
    )
    assert status == 204
    body = await settle(live, path(created), backup_delivered)
    assert attempts(body) == [
        (case.carrier, "failed", "sms_undeliverable"),
        ("backup", "delivered", None),
    ]
    assert body["attempts"][0]["error"]["carrier_code"] == case.failed_code


@pytest.mark.parametrize("signing", ["forged", "stale", "unsigned"])
async def test_a_callback_not_signed_by_the_provider_now_is_refused_and_changes_nothing(
    live: httpx.AsyncClient, case: Case, server: RunningServer, signing: str
) -> None:
    created = await create(live, case)
    message_id = case.fake.id_for(created["to"])
    status = await case.fake.send_status(
        message_id, case.delivered, signing=signing, verify=server.tls_context()
    )
    assert status == 401
    body = (await live.get(path(created))).json()
    assert attempts(body) == [(case.carrier, "sent", None)]


async def test_a_callback_for_a_message_relay_never_sent_changes_nothing(
    live: httpx.AsyncClient, case: Case, server: RunningServer
) -> None:
    created = await create(live, case)
    message_id = case.fake.id_for(created["to"])
    case.fake.messages["0000-unknown"] = case.fake.messages[message_id]
    status = await case.fake.send_status(
        "0000-unknown", case.delivered, verify=server.tls_context()
    )
    assert status == 204
    body = (await live.get(path(created))).json()
    assert attempts(body) == [(case.carrier, "sent", None)]


async def test_a_refused_sms_fails_over_at_once(live: httpx.AsyncClient, case: Case) -> None:
    case.fake.then(case.refusal)
    created = await create(live, case)
    body = await settle(live, path(created), backup_delivered)
    assert [a[:2] for a in attempts(body)] == [(case.carrier, "failed"), ("backup", "delivered")]
    assert attempts(body)[0][2] == "carrier_rejected"


async def test_a_throttled_send_stays_queued_and_goes_to_the_same_provider_again(
    live: httpx.AsyncClient, case: Case
) -> None:
    case.fake.then(case.throttled)
    created = await create(live, case)
    assert attempts(created) == [(case.carrier, "queued", None)]
    body = await settle(live, path(created), first_is("sent"))
    assert attempts(body) == [(case.carrier, "sent", None)]
    assert len(case.fake.received) == 2
