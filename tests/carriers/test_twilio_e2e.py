"""The HTTP carrier end to end: Relay sends through a local Twilio, which calls Relay back.

The fake speaks Twilio's documented Messages API and posts signed status
callbacks to Relay's real callback route over HTTPS.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.carriers.live_client import live_client
from tests.carriers.provider_cases import http_table
from tests.carriers.reading import attempts, event_types, settle
from tests.carriers.twilio_fake import VALID_FROM, FakeTwilio
from tests.harness import RunningServer, ServerThread, count_rows, free_port, test_settings
from tests.webhooks.receiver import isolated_database

pytestmark = pytest.mark.asyncio(loop_scope="module")

ACCOUNT_SID = "AC00112233445566778899aabbccddeeff"
AUTH_TOKEN = "relay-e2e-auth-token"
_numbers = itertools.count(3000)


def number() -> str:
    return f"+1415558{next(_numbers) % 10000:04d}"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def twilio() -> AsyncIterator[FakeTwilio]:
    fake = FakeTwilio(account_sid=ACCOUNT_SID, auth_token=AUTH_TOKEN)
    async with fake.running():
        yield fake


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, twilio: FakeTwilio
) -> Iterator[RunningServer]:
    url = isolated_database(database_url, "twilio_e2e", tmp_path_factory.mktemp("db"))
    port = free_port()
    settings = test_settings(
        tmp_path_factory.mktemp("data"),
        url,
        public_url=f"https://localhost:{port}",
        carriers={
            "twilio-main": http_table(
                "twilio",
                twilio,
                account_sid=ACCOUNT_SID,
                auth_token=AUTH_TOKEN,
                from_number=VALID_FROM,
            ),
            "backup": {"kind": "sandbox"},
        },
        routes={"default": ["twilio-main", "backup"]},
    )
    with ServerThread(settings, port=port) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="module")
async def live(server: RunningServer) -> AsyncIterator[httpx.AsyncClient]:
    async with live_client(server) as client:
        yield client


async def create(live: httpx.AsyncClient) -> dict[str, Any]:
    response = await live.post("/v1/verifications", json={"to": number()})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def sid_for(twilio: FakeTwilio, to: str) -> str:
    [sid] = [sid for sid, message in twilio.messages.items() if message.form["To"] == to]
    return sid


async def test_twilio_takes_the_sms_with_a_status_callback_to_relay(
    live: httpx.AsyncClient, twilio: FakeTwilio, server: RunningServer
) -> None:
    created = await create(live)
    assert attempts(created) == [("twilio-main", "sent", None)]
    message = twilio.messages[sid_for(twilio, created["to"])]
    assert message.form["StatusCallback"] == f"{server.base_url}/v1/carriers/twilio-main/status"
    assert twilio.violations == []


async def test_a_delivered_callback_marks_the_attempt_delivered_once(
    live: httpx.AsyncClient, twilio: FakeTwilio, server: RunningServer
) -> None:
    created = await create(live)
    sid = sid_for(twilio, created["to"])
    tls = server.tls_context()
    assert await twilio.send_status(sid, "sent", verify=tls) == 204
    assert await twilio.send_status(sid, "delivered", verify=tls) == 204
    assert await twilio.send_status(sid, "delivered", verify=tls) == 204  # Twilio may repeat
    body = await settle(
        live,
        f"/v1/verifications/{created['id']}",
        lambda b: b["attempts"][0]["status"] == "delivered",
    )
    assert attempts(body) == [("twilio-main", "delivered", None)]
    assert await event_types(live, created["id"]) == [
        "verification.sent",
        "verification.delivered",
    ]


async def test_an_undelivered_callback_fails_over_to_the_next_carrier(
    live: httpx.AsyncClient, twilio: FakeTwilio, server: RunningServer
) -> None:
    created = await create(live)
    sid = sid_for(twilio, created["to"])
    status = await twilio.send_status(
        sid, "undelivered", error_code=30003, verify=server.tls_context()
    )
    assert status == 204
    body = await settle(
        live,
        f"/v1/verifications/{created['id']}",
        lambda b: len(b["attempts"]) == 2 and b["attempts"][1]["status"] == "delivered",
    )
    assert attempts(body) == [
        ("twilio-main", "failed", "sms_undeliverable"),
        ("backup", "delivered", None),
    ]
    assert body["attempts"][0]["error"]["carrier_code"] == "twilio_30003"


async def test_a_callback_with_a_wrong_signature_changes_nothing(
    live: httpx.AsyncClient, twilio: FakeTwilio, server: RunningServer
) -> None:
    created = await create(live)
    sid = sid_for(twilio, created["to"])
    status = await twilio.send_status(
        sid, "delivered", token="someone-else", verify=server.tls_context()
    )
    assert status == 401
    body = (await live.get(f"/v1/verifications/{created['id']}")).json()
    assert attempts(body) == [("twilio-main", "sent", None)]


async def test_a_callback_for_an_unknown_carrier_is_404(server: RunningServer) -> None:
    async with httpx.AsyncClient(verify=server.tls_context()) as client:
        response = await client.post(
            f"{server.base_url}/v1/carriers/nobody/status", data={"MessageSid": "SM1"}
        )
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "resource_missing"


async def test_the_callback_route_takes_forms_but_other_routes_still_refuse_them(
    server: RunningServer, live: httpx.AsyncClient
) -> None:
    response = await live.post("/v1/verifications", data={"to": number()})
    assert response.status_code == 415


async def test_a_receipt_for_an_erased_attempt_is_dropped_and_kept_nowhere(
    live: httpx.AsyncClient, twilio: FakeTwilio, server: RunningServer
) -> None:
    created = await create(live)
    sid = sid_for(twilio, created["to"])
    erased = await live.post("/v1/erasures", json={"to": created["to"]})
    assert erased.status_code == 200, erased.text
    assert erased.json()["deleted"]["attempts"] == 1

    assert await twilio.send_status(sid, "delivered", verify=server.tls_context()) == 204

    parked = "SELECT count(*) AS n FROM early_reports WHERE carrier_message_id = :sid"
    assert await asyncio.to_thread(count_rows, server.settings, parked, sid=sid) == 0
    assert (await live.get(f"/v1/verifications/{created['id']}")).status_code == 404
    assert await event_types(live, created["id"]) == []
