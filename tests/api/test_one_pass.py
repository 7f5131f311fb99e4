"""The API's operations are answered in one pass (`relay.web.front`), and every answer
is the one the chain of ASGI layers and Starlette's router give: the same status,
body and headers, whichever faults a request has. Driven in process, each request
once through the one pass and once with it switched off."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import cast

import httpx
import pytest
import pytest_asyncio
from starlette.responses import Response

from relay.services import Services, build_services
from relay.web.app import API, RelayApp, create_app
from relay.web.dispatch import routes as router_routes
from relay.web.operations import Call, Operation
from relay.web.path_table import PathTable
from tests.harness import test_settings
from tests.webhooks.receiver import isolated_database

NUMBER = "+14155550123"


@pytest_asyncio.fixture
async def services(tmp_path: Path, database_url: str) -> AsyncIterator[Services]:
    url = await asyncio.to_thread(isolated_database, database_url, "one_pass", tmp_path)
    built = build_services(test_settings(tmp_path, url))
    await built.delivery.start(dispatch=False)
    await built.accounts.start()
    try:
        yield built
    finally:
        await built.close()


def client(app: RelayApp, key: str | None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="https://relay.test", headers=headers
    )


def seen(answer: httpx.Response) -> tuple[int, bytes, list[tuple[str, str]]]:
    headers = [(name, value) for name, value in answer.headers.multi_items()]
    return answer.status_code, answer.content, [h for h in headers if h[0] != "request-id"]


async def both(
    app: RelayApp, key: str | None, method: str, path: str, **sent: object
) -> list[tuple[int, bytes, list[tuple[str, str]]]]:
    answers = []
    front = app.front
    for one_pass in (front, None):
        app.front = one_pass
        try:
            async with client(app, key) as made:
                answers.append(seen(await made.request(method, path, **sent)))  # type: ignore[arg-type]
        finally:
            app.front = front
    return answers


@pytest.mark.asyncio
async def test_every_fault_gets_the_answer_the_router_and_its_layers_give(
    services: Services,
) -> None:
    account = await services.accounts.create_account("Acme")
    app = create_app(services, background=False)
    key = account.test_key
    json = {"Content-Type": "application/json"}
    requests: list[tuple[str | None, str, str, dict[str, object]]] = [
        (key, "GET", "/v1/verifications/ver_0000000000000000000000000", {}),
        (key, "GET", "/v1/verifications?limit=nope", {}),
        (key, "GET", "/v1/events?extra=1", {}),
        (None, "GET", "/v1/verifications", {}),
        ("rk_test_wrong", "POST", "/v1/verifications", {"json": {"to": NUMBER}}),
        (key, "POST", "/v1/verifications", {"content": b"{", "headers": json}),
        (key, "POST", "/v1/verifications", {"content": b"{}", "headers": {}}),
        (key, "POST", "/v1/verifications", {"json": {"to": "12"}}),
        (key, "POST", "/v1/verifications", {"json": {}, "headers": {"Idempotency-Key": ""}}),
        (key, "POST", "/v1/verifications/check", {"json": {"id": "ver_x", "code": "1"}}),
        (key, "POST", "/v1/verifications/ver_x/cancel", {}),
        (key, "DELETE", "/v1/verifications", {}),
        (key, "GET", "/v1/verifications/", {}),
        (key, "GET", "/v1/nowhere", {}),
        (None, "GET", "/healthz", {}),
    ]
    for sent_key, method, path, sent in requests:
        through_front, through_router = await both(app, sent_key, method, path, **sent)
        assert through_front == through_router, (method, path)


@pytest.mark.asyncio
async def test_a_create_answered_in_one_pass_is_replayed_byte_for_byte_by_the_layers(
    services: Services,
) -> None:
    account = await services.accounts.create_account("Acme")
    app = create_app(services, background=False)
    idempotency_key = {"Idempotency-Key": str(uuid.uuid4())}
    async with client(app, account.test_key) as made:
        first = await made.post("/v1/verifications", json={"to": NUMBER}, headers=idempotency_key)
        front, app.front = app.front, None
        again = await made.post("/v1/verifications", json={"to": NUMBER}, headers=idempotency_key)
        app.front = front
    assert first.status_code == 200, first.text
    assert again.content == first.content
    assert again.headers["Idempotent-Replayed"] == "true"


@pytest.mark.asyncio
async def test_every_operation_of_the_api_is_found_by_the_one_pass(services: Services) -> None:
    app = create_app(services, background=False)
    assert app.front is not None
    for operation in API:
        path = operation.path.replace("{", "").replace("}", "")
        scope = {"type": "http", "method": operation.method, "path": path}
        found = app.front.find(scope)
        assert found is not None, (operation.method, operation.path)
        assert found[0].path == operation.path


def table(*operations: Operation) -> PathTable:
    return PathTable(router_routes(operations, cast(Services, None)))


async def _handler(call: Call) -> Response:  # pragma: no cover - never called
    raise AssertionError


def test_the_table_leaves_to_the_router_what_it_does_not_answer_the_same() -> None:
    found = table(
        Operation("GET", "/v1/things", _handler, "list"),
        Operation("GET", "/v1/things/{thing_id}", _handler, "get"),
        Operation("POST", "/v1/things/{thing_id}/close", _handler, "close"),
    )
    assert found.find("GET", "/v1/things") is not None
    assert found.find("GET", "/v1/things/t_1") is not None
    assert found.find("POST", "/v1/things/t_1/close") is not None
    for method, path in [
        ("HEAD", "/v1/things"),  # HEAD is the router's
        ("POST", "/v1/things"),  # a 405, with Allow
        ("GET", "/v1/things/"),  # an empty parameter
        ("GET", "/v1/things/t_1/close"),
        ("POST", "/v1/things/t_1/close/"),
        ("GET", "/v1/things\n"),
    ]:
        assert found.find(method, path) is None, (method, path)


def test_routes_one_request_could_take_two_ways_are_refused_at_start_up() -> None:
    with pytest.raises(ValueError, match="overlaps"):
        table(
            Operation("GET", "/v1/things/{thing_id}", _handler, "get"),
            Operation("GET", "/v1/things/latest", _handler, "latest"),
        )
