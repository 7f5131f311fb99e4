"""A flood of badly signed callbacks never costs a real receipt, over real HTTPS from real
client addresses: failures count per carrier, past the budget they are answered 429, and
a correctly signed callback is processed whatever came before it."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
import pytest_asyncio

from tests.carriers.every_provider import CARRIERS
from tests.carriers.live_client import live_client
from tests.carriers.provider_cases import http_table
from tests.carriers.reading import attempts, settle
from tests.carriers.telnyx_fake import VALID_FROM, FakeTelnyx
from tests.harness import RunningServer, ServerThread, count_rows, free_port, test_settings
from tests.webhooks.receiver import isolated_database

pytestmark = pytest.mark.asyncio(loop_scope="module")

API_KEY = "KEY-callback-budget"
# One carrier per test, each with a budget of its own: Telnyx in the US, and in Canada.
ROUTES = {"US": "telnyx-us", "CA": "telnyx-ca"}
_numbers = itertools.count(100)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def telnyx() -> AsyncIterator[FakeTelnyx]:
    fake = FakeTelnyx(api_key=API_KEY)
    async with fake.running():
        yield fake


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, telnyx: FakeTelnyx
) -> Iterator[RunningServer]:
    url = isolated_database(database_url, "callback_budget", tmp_path_factory.mktemp("db"))
    port = free_port()
    table = http_table("telnyx", telnyx, api_key=API_KEY, public_key=telnyx.public_key)
    settings = test_settings(
        tmp_path_factory.mktemp("data"),
        url,
        public_url=f"https://localhost:{port}",
        carriers={
            **{name: {**table, "sender": VALID_FROM} for name in ROUTES.values()},
            "whatsapp-meta": CARRIERS["whatsapp-signed"],
        },
        routes={country: [name] for country, name in ROUTES.items()},
    )
    with ServerThread(settings, port=port) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="module")
async def live(server: RunningServer) -> AsyncIterator[httpx.AsyncClient]:
    async with live_client(server) as client:
        yield client


async def sent_sms(live: httpx.AsyncClient, telnyx: FakeTelnyx, country: str) -> tuple[str, str]:
    """A verification sent through the country's Telnyx carrier: its path and message id."""
    to = {"US": "+1415556{:04d}", "CA": "+1604212{:04d}"}[country].format(next(_numbers))
    created = (await live.post("/v1/verifications", json={"to": to})).json()
    assert attempts(created) == [(ROUTES[country], "sent", None)], created
    return f"/v1/verifications/{created['id']}", telnyx.id_for(to)


def refused_in_shape(answer: httpx.Response) -> None:
    error = answer.json()["error"]
    assert (error["type"], error["code"]) == ("rate_limit_error", "rate_limited")
    assert error["message"].startswith("Too many callbacks to this carrier failed")
    assert int(answer.headers["retry-after"]) >= 1


async def test_310_badly_signed_callbacks_then_a_genuine_one_from_the_same_address_delivers(
    live: httpx.AsyncClient, telnyx: FakeTelnyx, server: RunningServer
) -> None:
    """As a provider's address sees it: the failures of others sent through the same
    provider must spend neither the carrier's budget for valid receipts nor the API
    key failure budget of the address (`relay.web.ratelimit` leaves callbacks alone)."""
    path, message_id = await sent_sms(live, telnyx, "US")
    url = telnyx.callback_url(message_id)
    body = telnyx.webhook(message_id, "delivered")
    forged = FakeTelnyx(api_key=API_KEY).signed(body)

    async with server.async_from_address("127.0.0.2") as provider_address:
        answers = [
            await provider_address.post(url, content=body, headers=forged) for _ in range(310)
        ]
        genuine = await provider_address.post(url, content=body, headers=telnyx.signed(body))

    assert Counter(a.status_code for a in answers) == {401: 300, 429: 10}
    refused_in_shape(answers[-1])
    assert genuine.status_code == 204, genuine.text
    body_after = await settle(live, path, lambda b: b["attempts"][0]["status"] == "delivered")
    assert attempts(body_after) == [("telnyx-us", "delivered", None)]


async def test_failures_from_many_addresses_spend_the_carriers_budget_never_a_valid_signature(
    live: httpx.AsyncClient,
    telnyx: FakeTelnyx,
    server: RunningServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    path, message_id = await sent_sms(live, telnyx, "CA")
    url = telnyx.callback_url(message_id)
    body = telnyx.webhook(message_id, "delivered")
    forged = FakeTelnyx(api_key=API_KEY).signed(body)

    answers = []
    async with (
        server.async_from_address("127.0.0.3") as one,
        server.async_from_address("127.0.0.4") as two,
    ):
        for client in itertools.islice(itertools.cycle([one, two]), 310):
            answers.append(await client.post(url, content=body, headers=forged))
    async with server.async_from_address("127.0.0.5") as provider_address:
        genuine = await provider_address.post(url, content=body, headers=telnyx.signed(body))

    assert Counter(a.status_code for a in answers) == {401: 300, 429: 10}
    refused_in_shape(answers[-1])
    assert genuine.status_code == 204, genuine.text
    body_after = await settle(live, path, lambda b: b["attempts"][0]["status"] == "delivered")
    assert attempts(body_after) == [("telnyx-ca", "delivered", None)]
    # 310 refusals, one line: the first, at once; the rest wait for the next minute's.
    lines = [r for r in caplog.records if r.getMessage() == "carrier.callback_refused"]
    assert [(r.carrier, r.refused) for r in lines] == [("telnyx-ca", 1)]  # type: ignore[attr-defined]
    assert [r for r in caplog.records if r.exc_info] == []
    parked = "SELECT count(*) AS n FROM early_reports"
    assert await asyncio.to_thread(count_rows, server.settings, parked) == 0


async def test_wrong_verify_tokens_spend_the_budget_and_the_right_one_is_still_answered(
    server: RunningServer,
) -> None:
    path = f"{server.base_url}/v1/carriers/whatsapp-meta/status"
    token = CARRIERS["whatsapp-signed"]["verify_token"]
    guess = {"hub.mode": "subscribe", "hub.verify_token": "guess", "hub.challenge": "1"}

    answers = []
    async with (
        server.async_from_address("127.0.0.6") as meta,
        server.async_from_address("127.0.0.7") as other,
    ):
        for client in itertools.islice(itertools.cycle([meta, other]), 310):
            answers.append(await client.get(path, params=guess))
        right = await meta.get(path, params={**guess, "hub.verify_token": token})

    assert Counter(a.status_code for a in answers) == {401: 300, 429: 10}
    refused_in_shape(answers[-1])
    assert (right.status_code, right.text) == (200, "1")
