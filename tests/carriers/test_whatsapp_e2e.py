"""WhatsApp end to end: Relay over HTTPS sends through the local Cloud API, which calls back.

Verifications ask for WhatsApp, then SMS: the WhatsApp carrier comes first,
then Brazil's SMS route, the sandbox `backup`. The fake's webhooks reach
Relay's real callback route, signed, forged or unsigned, and the App
Dashboard's check of the Callback URL reaches its `GET`.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.carriers.fake_server import Reply
from tests.carriers.live_client import live_client
from tests.carriers.reading import attempts, event_types, settle
from tests.carriers.whatsapp_fake import FakeWhatsApp, graph_error
from tests.harness import RunningServer, ServerThread, free_port, test_settings
from tests.webhooks.receiver import isolated_database

pytestmark = pytest.mark.asyncio(loop_scope="module")

CARRIER = "whatsapp-main"
VERIFY_TOKEN = "relay-e2e-verify-token"
NUMBERS = (f"+55119876{n:05d}" for n in itertools.count(100))


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def meta_server() -> AsyncIterator[FakeWhatsApp]:
    approved = frozenset({("relay_code", "en_US"), ("relay_code", "fr")})
    fake = FakeWhatsApp(
        access_token="EAA-e2e-token", app_secret="e2e-app-secret", templates=approved
    )
    async with fake.running():
        yield fake


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, meta_server: FakeWhatsApp
) -> Iterator[RunningServer]:
    url = isolated_database(database_url, "whatsapp_e2e", tmp_path_factory.mktemp("db"))
    port = free_port()
    table = {
        "kind": "whatsapp",
        "phone_number_id": meta_server.phone_number_id,
        "access_token": meta_server.access_token,
        "app_secret": meta_server.app_secret,
        "verify_token": VERIFY_TOKEN,
        "template": "relay_code",
        "template_language": "en_US",
        "template_languages": ["en_US", "fr"],
        "base_url": meta_server.base_url,
        "timeout": 5.0,
        "throttle_retry_after": 0.2,
    }
    settings = test_settings(
        tmp_path_factory.mktemp("data"),
        url,
        public_url=f"https://localhost:{port}",
        carriers={CARRIER: table, "backup": {"kind": "sandbox"}},
        routes={"BR": ["backup"]},
        channel_routes={"whatsapp": [CARRIER]},
    )
    with ServerThread(settings, port=port) as running:
        # What the operator types as the Callback URL in the App Dashboard.
        meta_server.webhook_url = f"{running.base_url}/v1/carriers/{CARRIER}/status"
        yield running


@pytest_asyncio.fixture(loop_scope="module")
async def live(server: RunningServer) -> AsyncIterator[httpx.AsyncClient]:
    async with live_client(server) as client:
        yield client


@pytest_asyncio.fixture(loop_scope="module")
async def meta(meta_server: FakeWhatsApp) -> AsyncIterator[FakeWhatsApp]:
    yield meta_server
    assert meta_server.end_test() == [], "the carrier broke Meta's documented request"


async def create(live: httpx.AsyncClient, **fields: str) -> dict[str, Any]:
    body = {"to": next(NUMBERS), "channels": ["whatsapp", "sms"], **fields}
    response = await live.post("/v1/verifications", json=body)
    assert response.status_code == 200, response.text
    created: dict[str, Any] = response.json()
    return created


def path(created: dict[str, Any]) -> str:
    return f"/v1/verifications/{created['id']}"


def first_is(status: str) -> Any:
    return lambda body: body["attempts"][0]["status"] == status


def channels(body: dict[str, Any]) -> tuple[str, list[str]]:
    """The verification's channel (its latest attempt's), and each attempt's."""
    return body["channel"], [attempt["channel"] for attempt in body["attempts"]]


def backup_delivered(body: dict[str, Any]) -> bool:
    return len(body["attempts"]) == 2 and body["attempts"][1]["status"] == "delivered"


async def test_the_code_meta_carries_in_the_template_approves_the_verification(
    live: httpx.AsyncClient, meta: FakeWhatsApp
) -> None:
    created = await create(live)
    assert attempts(created) == [(CARRIER, "sent", None)]
    code = meta.code_sent_to(created["to"])
    check = await live.post("/v1/verifications/check", json={"id": created["id"], "code": code})
    assert check.json()["status"] == "approved"


async def test_a_french_verification_gets_the_template_in_french_and_a_german_one_the_default(
    live: httpx.AsyncClient, meta: FakeWhatsApp
) -> None:
    french = await create(live, locale="fr")
    german = await create(live, locale="de")
    sent = {body["to"]: body["template"]["language"]["code"] for body in meta.received}
    assert sent == {french["to"].lstrip("+"): "fr", german["to"].lstrip("+"): "en_US"}
    assert attempts(french) == attempts(german) == [(CARRIER, "sent", None)]


@pytest.mark.parametrize("final", ["delivered", "read"])
async def test_a_signed_delivered_or_read_webhook_delivers_the_attempt_once(
    live: httpx.AsyncClient, meta: FakeWhatsApp, server: RunningServer, final: str
) -> None:
    created = await create(live)
    message_id, tls = meta.id_for(created["to"]), server.tls_context()
    for status in ("sent", final, final):
        assert await meta.send_status(message_id, status, verify=tls) == 200
    body = await settle(live, path(created), first_is("delivered"))
    assert attempts(body) == [(CARRIER, "delivered", None)]
    assert await event_types(live, created["id"]) == ["verification.sent", "verification.delivered"]


async def test_a_failed_webhook_fails_over_with_metas_error_code(
    live: httpx.AsyncClient, meta: FakeWhatsApp, server: RunningServer
) -> None:
    created = await create(live)
    message_id = meta.id_for(created["to"])
    status = await meta.send_status(
        message_id, "failed", error_code=131026, verify=server.tls_context()
    )
    assert status == 200
    body = await settle(live, path(created), backup_delivered)
    assert attempts(body) == [
        (CARRIER, "failed", "sms_undeliverable"),
        ("backup", "delivered", None),
    ]
    assert body["attempts"][0]["error"]["carrier_code"] == "whatsapp_131026"
    assert channels(body) == ("sms", ["whatsapp", "sms"])
    assert await event_types(live, created["id"]) == [
        "verification.sent",
        "verification.failed",
        "verification.sent",
        "verification.delivered",
    ]


async def test_one_webhook_settles_every_message_it_reports(
    live: httpx.AsyncClient, meta: FakeWhatsApp, server: RunningServer
) -> None:
    first, second = await create(live), await create(live)
    updates = ((meta.id_for(first["to"]), "read"), (meta.id_for(second["to"]), "delivered"))
    body = meta.status_webhook(*updates, incoming=True)
    assert await meta.post_webhook(body, verify=server.tls_context()) == 200
    for created in (first, second):
        settled = await settle(live, path(created), first_is("delivered"))
        assert attempts(settled) == [(CARRIER, "delivered", None)]


@pytest.mark.parametrize("signing", ["forged", "unsigned"])
async def test_a_webhook_meta_did_not_sign_is_refused_and_changes_nothing(
    live: httpx.AsyncClient, meta: FakeWhatsApp, server: RunningServer, signing: Any
) -> None:
    created = await create(live)
    body = meta.status_webhook((meta.id_for(created["to"]), "failed", 131026))
    async with httpx.AsyncClient(verify=server.tls_context()) as client:
        answer = await client.post(
            meta.webhook_url, content=body, headers=meta.headers(body, signing)
        )
    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "authentication_failed"
    assert attempts((await live.get(path(created))).json()) == [(CARRIER, "sent", None)]


async def test_a_webhook_for_a_message_relay_never_sent_changes_nothing(
    live: httpx.AsyncClient, meta: FakeWhatsApp, server: RunningServer
) -> None:
    created = await create(live)
    status = await meta.send_status(
        "wamid.unknown", "failed", error_code=131026, verify=server.tls_context()
    )
    assert status == 200
    assert attempts((await live.get(path(created))).json()) == [(CARRIER, "sent", None)]


async def test_a_refusal_by_meta_fails_over_at_once(
    live: httpx.AsyncClient, meta: FakeWhatsApp
) -> None:
    meta.then(Reply(400, graph_error(131026, "Message undeliverable")))
    created = await create(live)
    body = await settle(live, path(created), backup_delivered)
    assert attempts(body) == [
        (CARRIER, "failed", "carrier_rejected"),
        ("backup", "delivered", None),
    ]
    assert channels(body) == ("sms", ["whatsapp", "sms"])
    assert await event_types(live, created["id"]) == [
        "verification.failed",
        "verification.sent",
        "verification.delivered",
    ]


async def test_an_expired_token_fails_over_as_unavailable(
    live: httpx.AsyncClient, meta: FakeWhatsApp
) -> None:
    meta.then(Reply(401, graph_error(190, "Access token has expired")))
    created = await create(live)
    body = await settle(live, path(created), backup_delivered)
    assert attempts(body)[0] == (CARRIER, "failed", "carrier_unavailable")


async def test_a_rate_limit_keeps_the_message_queued_for_whatsapp_again(
    live: httpx.AsyncClient, meta: FakeWhatsApp
) -> None:
    meta.then(Reply(400, graph_error(130429, "Rate limit hit")))
    created = await create(live)
    assert attempts(created) == [(CARRIER, "queued", None)]
    body = await settle(live, path(created), first_is("sent"))
    assert attempts(body) == [(CARRIER, "sent", None)]
    assert len(meta.received) == 2


async def test_the_dashboards_check_of_the_callback_url_gets_its_challenge_back(
    meta: FakeWhatsApp, server: RunningServer
) -> None:
    answer = await meta.verify_callback_url(VERIFY_TOKEN, verify=server.tls_context())
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    assert answer.text == answer.request.url.params["hub.challenge"]


async def test_a_check_with_another_verify_token_is_refused(
    meta: FakeWhatsApp, server: RunningServer
) -> None:
    answer = await meta.verify_callback_url("guessed-token", verify=server.tls_context())
    assert answer.status_code == 401
    assert answer.request.url.params["hub.challenge"] not in answer.text


async def test_a_carrier_without_a_handshake_answers_404(server: RunningServer) -> None:
    async with httpx.AsyncClient(verify=server.tls_context()) as client:
        answer = await client.get(
            f"{server.base_url}/v1/carriers/backup/status",
            params={
                "hub.mode": "subscribe",
                "hub.verify_token": VERIFY_TOKEN,
                "hub.challenge": "1",
            },
        )
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "resource_missing"
