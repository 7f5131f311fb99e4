"""Plivo receipts as Plivo may send them, over real HTTPS: V2 alone or V3, each nonce taken
once by whichever Relay process gets it first, and forgotten by the sweeper after its window."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from relay.clock import OffsetClock
from relay.services import build_services
from relay.worker.sweeper import prune_once
from tests.carriers.live_client import live_client
from tests.carriers.plivo_fake import FakePlivo
from tests.carriers.provider_cases import http_table
from tests.carriers.reading import attempts, settle
from tests.harness import RunningServer, ServerThread, count_rows, free_port, test_settings
from tests.webhooks.receiver import isolated_database

pytestmark = pytest.mark.asyncio(loop_scope="module")

AUTH_ID, AUTH_TOKEN = "MAPLIVORECEIPTS00000", "plivo-receipts-token"
NONCES = "SELECT count(*) AS n FROM callback_nonces"
_numbers = itertools.count(100)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def plivo() -> AsyncIterator[FakePlivo]:
    fake = FakePlivo(AUTH_ID, AUTH_TOKEN)
    async with fake.running():
        yield fake


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, plivo: FakePlivo
) -> Iterator[tuple[RunningServer, RunningServer]]:
    """Two Relay processes on one database, as behind a load balancer."""
    url = isolated_database(database_url, "plivo_receipts", tmp_path_factory.mktemp("db"))
    port = free_port()
    table = http_table("plivo", plivo, auth_id=AUTH_ID, auth_token=AUTH_TOKEN, sender="33700000000")
    settings = test_settings(
        tmp_path_factory.mktemp("data"),
        url,
        public_url=f"https://localhost:{port}",
        carriers={"plivo-main": table},
        routes={"FR": ["plivo-main"]},
    )
    with ServerThread(settings, port=port) as first, ServerThread(settings) as second:
        yield first, second


@pytest.fixture(scope="module")
def server(servers: tuple[RunningServer, RunningServer]) -> RunningServer:
    return servers[0]


@pytest_asyncio.fixture(loop_scope="module")
async def live(server: RunningServer) -> AsyncIterator[httpx.AsyncClient]:
    async with live_client(server) as client:
        yield client


@pytest.fixture(autouse=True)
def _plivo_kept_to_its_contract(plivo: FakePlivo) -> Iterator[None]:
    yield
    assert plivo.end_test() == [], "the carrier broke Plivo's documented request"


async def sent(live: httpx.AsyncClient, plivo: FakePlivo) -> tuple[str, str]:
    to = f"+3361234{next(_numbers):04d}"
    created = (await live.post("/v1/verifications", json={"to": to})).json()
    assert attempts(created) == [("plivo-main", "sent", None)], created
    return f"/v1/verifications/{created['id']}", plivo.id_for(to)


async def nonces_kept(server: RunningServer) -> int:
    return await asyncio.to_thread(count_rows, server.settings, NONCES)


def first_is(status: str) -> Callable[[dict[str, Any]], bool]:
    return lambda body: bool(body["attempts"][0]["status"] == status)


async def test_a_receipt_signed_with_v2_alone_delivers_the_attempt(
    live: httpx.AsyncClient, plivo: FakePlivo, server: RunningServer
) -> None:
    path, message_id = await sent(live, plivo)

    status = await plivo.send_status(
        message_id, "delivered", versions=("v2",), verify=server.tls_context()
    )

    assert status == 204
    body = await settle(live, path, first_is("delivered"))
    assert attempts(body) == [("plivo-main", "delivered", None)]


async def test_a_captured_v2_receipt_sent_again_with_another_status_is_refused(
    live: httpx.AsyncClient, plivo: FakePlivo, server: RunningServer
) -> None:
    """V2 signs no body: only its nonce, taken once, stops someone who saw one receipt."""
    path, message_id = await sent(live, plivo)
    tls = server.tls_context()
    assert await plivo.send_status(message_id, "sent", versions=("v2",), verify=tls) == 204

    replayed = await plivo.replay_last(verify=tls, changes={"Status": "undelivered"})

    assert replayed == 401
    body = (await live.get(path)).json()
    assert attempts(body) == [("plivo-main", "sent", None)]


async def test_a_v3_receipt_without_a_time_is_taken_once_across_processes(
    live: httpx.AsyncClient,
    plivo: FakePlivo,
    servers: tuple[RunningServer, RunningServer],
) -> None:
    first, second = servers
    path, message_id = await sent(live, plivo)
    form = {"MessageUUID": message_id, "Status": "delivered"}
    url = plivo.callback_url(message_id)
    headers = plivo.headers(url, form, versions=("v3",))
    other_process = url.replace(first.base_url, second.base_url)

    async with httpx.AsyncClient(verify=first.tls_context()) as provider:
        taken = await provider.post(url, data=form, headers=headers)
        again = await provider.post(other_process, data=form, headers=headers)

    assert (taken.status_code, again.status_code) == (204, 401)
    assert again.json()["error"]["code"] == "authentication_failed"
    await settle(live, path, first_is("delivered"))


async def test_a_forged_receipt_keeps_no_nonce_and_the_sweeper_forgets_them_after_the_window(
    live: httpx.AsyncClient, plivo: FakePlivo, server: RunningServer
) -> None:
    _, message_id = await sent(live, plivo)
    tls = server.tls_context()
    before = await nonces_kept(server)
    forged = await plivo.send_status(message_id, "delivered", signing="forged", verify=tls)
    assert (forged, await nonces_kept(server)) == (401, before)
    assert await plivo.send_status(message_id, "sent", versions=("v2",), verify=tls) == 204
    assert await nonces_kept(server) == before + 1

    async def prune_after_the_window() -> None:
        clock = OffsetClock()
        clock.advance(3600 + 60)  # Plivo's signature_tolerance, and a minute
        services = build_services(server.settings, clock=clock)
        try:
            await prune_once(services)
        finally:
            await services.close()

    await prune_after_the_window()
    assert await nonces_kept(server) == 0


async def test_at_debug_level_each_callback_logs_the_signature_headers_it_carried_never_values(
    live: httpx.AsyncClient,
    plivo: FakePlivo,
    server: RunningServer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """How an operator learns which signatures their Plivo account sends."""
    _, message_id = await sent(live, plivo)

    with caplog.at_level(logging.DEBUG, logger="relay.callbacks"):
        status = await plivo.send_status(
            message_id, "sent", versions=("v2",), verify=server.tls_context()
        )

    assert status == 204
    [line] = [r for r in caplog.records if r.getMessage() == "carrier.callback_headers"]
    assert (line.carrier, line.signature_headers) == (  # type: ignore[attr-defined]
        "plivo-main",
        "x-plivo-signature-ma-v2,x-plivo-signature-v2,x-plivo-signature-v2-nonce",
    )
    assert plivo.last_sent is not None
    values = plivo.last_sent[2].values()
    assert not [v for v in values for r in caplog.records if v in str(r.__dict__)]
