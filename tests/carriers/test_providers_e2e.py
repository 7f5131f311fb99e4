"""HTTP providers end to end: Relay sends through each provider's local fake, which calls back.

One Relay over HTTPS routes each country to one provider, then to the sandbox
`backup`; every test runs once per provider, driving the API and the fake's
callbacks (signed, forged, stale, unsigned) through Relay's real callback route.
Canada's route crosses providers (Telnyx, Vonage, Twilio) to show failover
from one to the next with the same code.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.carriers.live_client import live_client
from tests.carriers.provider_cases import FAKES, Case, running_cases, running_twilio
from tests.carriers.reading import attempts, event_types, settle
from tests.carriers.twilio_fake import FakeTwilio
from tests.harness import RunningServer, ServerThread, free_port, test_settings
from tests.webhooks.receiver import isolated_database

pytestmark = pytest.mark.asyncio(loop_scope="module")

CANADA = (f"+1604212{n:04d}" for n in itertools.count(100))

# The route of the failover across providers: one of each, then nothing.
ACROSS = ("telnyx-main", "vonage-main", "twilio-main")


@dataclass
class Providers:
    cases: dict[str, Case]
    twilio: FakeTwilio
    twilio_table: dict[str, Any]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def providers() -> AsyncIterator[Providers]:
    async with running_cases() as cases, running_twilio() as (twilio, table):
        yield Providers(cases, twilio, table)


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, providers: Providers
) -> Iterator[RunningServer]:
    url = isolated_database(database_url, "providers_e2e", tmp_path_factory.mktemp("db"))
    port = free_port()
    cases = providers.cases.values()
    carriers = {case.carrier: case.table for case in cases}
    routes = {case.country: [case.carrier, "backup"] for case in cases}
    settings = test_settings(
        tmp_path_factory.mktemp("data"),
        url,
        public_url=f"https://localhost:{port}",
        carriers={**carriers, "twilio-main": providers.twilio_table, "backup": {"kind": "sandbox"}},
        routes={**routes, "CA": list(ACROSS)},
    )
    with ServerThread(settings, port=port) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="module")
async def live(server: RunningServer) -> AsyncIterator[httpx.AsyncClient]:
    async with live_client(server) as client:
        yield client


@pytest.fixture(params=list(FAKES))
def case(request: pytest.FixtureRequest, providers: Providers) -> Iterator[Case]:
    chosen = providers.cases[request.param]
    yield chosen
    assert chosen.fake.end_test() == [], "the carrier broke the provider's documented request"


async def create(live: httpx.AsyncClient, case: Case) -> dict[str, Any]:
    response = await live.post("/v1/verifications", json={"to": case.number()})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def path(created: dict[str, Any]) -> str:
    return f"/v1/verifications/{created['id']}"


def backup_delivered(body: dict[str, Any]) -> bool:
    return len(body["attempts"]) == 2 and body["attempts"][1]["status"] == "delivered"


def nth_is(index: int, status: str) -> Callable[[dict[str, Any]], bool]:
    return lambda body: (
        len(body["attempts"]) > index and body["attempts"][index]["status"] == status
    )


def first_is(status: str) -> Callable[[dict[str, Any]], bool]:
    return nth_is(0, status)


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


async def test_a_route_across_three_providers_fails_over_to_the_one_that_delivers(
    live: httpx.AsyncClient, providers: Providers, server: RunningServer
) -> None:
    """Telnyx refuses, Vonage's receipt says undeliverable, Twilio delivers."""
    telnyx, vonage = providers.cases["telnyx"], providers.cases["vonage"]
    telnyx.fake.then(telnyx.refusal)
    to, tls = next(CANADA), server.tls_context()
    response = await live.post("/v1/verifications", json={"to": to})
    assert response.status_code == 200, response.text
    created = response.json()
    assert attempts(created)[0] == ("telnyx-main", "failed", "carrier_rejected")
    await settle(live, path(created), nth_is(1, "sent"))
    receipt = vonage.fake.id_for(to)
    assert await vonage.fake.send_status(receipt, "failed", error_code="3", verify=tls) == 204
    await settle(live, path(created), nth_is(2, "sent"))
    [sid] = [sid for sid, m in providers.twilio.messages.items() if m.form["To"] == to]
    assert await providers.twilio.send_status(sid, "delivered", verify=tls) == 204
    body = await settle(live, path(created), nth_is(2, "delivered"))
    assert attempts(body) == [
        ("telnyx-main", "failed", "carrier_rejected"),
        ("vonage-main", "failed", "sms_undeliverable"),
        ("twilio-main", "delivered", None),
    ]
    events = await event_types(live, created["id"])
    assert (events.count("verification.failed"), events.count("verification.delivered")) == (2, 1)
    texts = [
        *(sent["text"] for sent in telnyx.fake.received if sent["to"] == to),
        *(sent["text"] for sent in vonage.fake.received if sent["to"] == to.lstrip("+")),
        *(m.form["Body"] for m in providers.twilio.messages.values() if m.form["To"] == to),
    ]
    codes = {match.group() for text in texts for match in [re.search(r"\d{4,10}", text)] if match}
    assert (len(texts), len(codes)) == (3, 1)
    assert providers.twilio.violations == []


@pytest.mark.parametrize(
    ("body", "media"),
    [(b"{not json", "application/json"), (b"\xff\xfe", "application/x-www-form-urlencoded")],
)
async def test_a_callback_relay_cannot_read_is_refused_in_the_error_shape(
    live: httpx.AsyncClient, case: Case, server: RunningServer, body: bytes, media: str
) -> None:
    created = await create(live, case)
    url = case.fake.callback_url(case.fake.id_for(created["to"]))
    async with httpx.AsyncClient(verify=server.tls_context()) as client:
        answer = await client.post(url, content=body, headers={"content-type": media})
    assert answer.status_code in {400, 401}
    assert answer.json()["error"]["code"] in {"parameter_invalid", "authentication_failed"}
