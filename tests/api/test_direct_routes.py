"""The busiest routes skip FastAPI's routing, and answer exactly as FastAPI would.

Each request goes to two apps over one database: Relay as it serves, and the
same app with the direct layer taken out, so FastAPI's own routes answer. Every
refusal must come back identical: status, error body, and the headers a client
acts on.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI

from relay.services import build_services
from relay.web.app import create_app
from relay.web.direct import DirectRoutes
from tests.harness import test_settings
from tests.webhooks.receiver import isolated_database

NUMBER = "+14155552671"


def without_direct_routes(app: FastAPI) -> FastAPI:
    # Starlette builds its middleware stack on the first request, from this list.
    app.user_middleware = [m for m in app.user_middleware if m.cls is not DirectRoutes]
    return app


class Pair:
    def __init__(self, direct: httpx.AsyncClient, fastapi: httpx.AsyncClient, key: str) -> None:
        self.direct, self.fastapi, self.key = direct, fastapi, key

    async def both(
        self, method: str, path: str, body: bytes | None = None, *, key: str | None = "default"
    ) -> tuple[httpx.Response, httpx.Response]:
        headers = {"content-type": "application/json"}
        if key is not None:
            headers["authorization"] = f"Bearer {self.key if key == 'default' else key}"
        answers = []
        for client in (self.direct, self.fastapi):
            answers.append(await client.request(method, path, content=body, headers=headers))
        return answers[0], answers[1]


@pytest_asyncio.fixture
async def pair(tmp_path: Path, database_url: str) -> AsyncIterator[Pair]:
    url = await asyncio.to_thread(isolated_database, database_url, "direct_routes", tmp_path)
    services = build_services(test_settings(tmp_path, url))
    key = (await services.accounts.create_account("Direct")).test_key
    direct = create_app(services, background=False)
    fastapi = without_direct_routes(create_app(services, background=False))
    async with AsyncExitStack() as stack:
        await stack.enter_async_context(direct.router.lifespan_context(direct))
        clients = []
        for app in (direct, fastapi):
            transport = httpx.ASGITransport(app=app)
            client = httpx.AsyncClient(transport=transport, base_url="https://relay.test")
            clients.append(await stack.enter_async_context(client))
        yield Pair(clients[0], clients[1], key)


def same_answer(direct: httpx.Response, fastapi: httpx.Response) -> dict[str, Any]:
    assert direct.status_code == fastapi.status_code, (direct.text, fastapi.text)
    assert direct.json() == fastapi.json()
    for header in ("content-type", "www-authenticate", "retry-after"):
        assert direct.headers.get(header) == fastapi.headers.get(header), header
    found: dict[str, Any] = direct.json()
    return found


def body(value: Any) -> bytes:
    return json.dumps(value).encode()


CREATE_REFUSALS: list[tuple[str, bytes, str]] = [
    ("no body", b"", "parameter_missing"),
    ("cut-off JSON", b'{"to": ', "invalid_json"),
    ("bytes that are not text", b"\x80\x81{}", "invalid_json"),
    ("JSON null", b"null", "parameter_invalid"),
    ("a list", b"[]", "parameter_invalid"),
    ("a string", b'"+14155552671"', "parameter_invalid"),
    ("no to", b"{}", "parameter_missing"),
    ("to not E.164", body({"to": "4155552671"}), "phone_number_invalid"),
    ("to a number", body({"to": 14155552671}), "parameter_invalid"),
    ("an unknown field", body({"to": NUMBER, "channel": "sms"}), "parameter_unknown"),
    ("code_length as text", body({"to": NUMBER, "code_length": "6"}), "parameter_invalid"),
    ("code_length too short", body({"to": NUMBER, "code_length": 3}), "parameter_invalid"),
    ("ttl as a float", body({"to": NUMBER, "ttl": 600.5}), "parameter_invalid"),
    ("metadata not text", body({"to": NUMBER, "metadata": {"k": 1}}), "parameter_invalid"),
    ("an unknown locale", body({"to": NUMBER, "locale": "xx-YY"}), "parameter_invalid"),
    (
        "a plain-http webhook",
        body({"to": NUMBER, "webhook_url": "http://a.test/"}),
        "parameter_invalid",
    ),
]


AUTH_ORDER: list[tuple[str, bytes, str | None, str]] = [
    ("no key, a good body", body({"to": NUMBER}), None, "authentication_failed"),
    (
        "a wrong key, a good body",
        body({"to": NUMBER}),
        "sk_test_" + "x" * 40,
        "authentication_failed",
    ),
    ("no key, a body that is not JSON", b"{", None, "invalid_json"),
    ("no key, JSON with a bad field", body({"to": "nope"}), None, "authentication_failed"),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("case", "payload", "key", "code"), AUTH_ORDER, ids=[c[0] for c in AUTH_ORDER]
)
async def test_authentication_is_checked_at_the_same_point_as_by_fastapi(
    pair: Pair, case: str, payload: bytes, key: str | None, code: str
) -> None:
    direct, fastapi = await pair.both("POST", "/v1/verifications", payload, key=key)
    assert same_answer(direct, fastapi)["error"]["code"] == code, case


CHECK_REFUSALS: list[tuple[str, bytes, str]] = [
    ("no id or to", body({"code": "123456"}), "parameter_missing"),
    ("both id and to", body({"id": "ver_x", "to": NUMBER, "code": "1"}), "parameter_invalid"),
    (
        "an id that is no verification id",
        body({"id": "nope", "code": "123456"}),
        "resource_missing",
    ),
    ("an empty code", body({"to": NUMBER, "code": ""}), "parameter_invalid"),
    ("a code as a number", body({"to": NUMBER, "code": 123456}), "parameter_invalid"),
    (
        "no pending verification for to",
        body({"to": "+14155550199", "code": "1"}),
        "resource_missing",
    ),
]


SEND_REFUSALS: list[tuple[str, bytes, str]] = [
    ("no body", b"", "parameter_missing"),
    ("cut-off JSON", b'{"to": ', "invalid_json"),
    ("no code", body({"to": NUMBER}), "parameter_missing"),
    ("a code with a space", body({"to": NUMBER, "code": "12 34"}), "parameter_invalid"),
    ("a code too short", body({"to": NUMBER, "code": "123"}), "parameter_invalid"),
    ("an unknown field", body({"to": NUMBER, "code": "1234", "ttl": 60}), "parameter_unknown"),
    ("to not E.164", body({"to": "0044 20", "code": "1234"}), "phone_number_invalid"),
]


REFUSALS: list[tuple[str, str, bytes, str]] = [
    *(("/v1/verifications", *refusal) for refusal in CREATE_REFUSALS),
    *(("/v1/verifications/check", *refusal) for refusal in CHECK_REFUSALS),
    *(("/v1/messages", *refusal) for refusal in SEND_REFUSALS),
]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("path", "case", "payload", "code"), REFUSALS, ids=[f"{r[0]}: {r[1]}" for r in REFUSALS]
)
async def test_a_refused_request_is_refused_the_same_way_as_by_fastapi(
    pair: Pair, path: str, case: str, payload: bytes, code: str
) -> None:
    direct, fastapi = await pair.both("POST", path, payload)
    assert same_answer(direct, fastapi)["error"]["code"] == code, case


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "path",
    [
        "/v1/verifications/ver_unknown",
        "/v1/verifications/check",
        "/v1/messages/msg_unknown",
        "/v1/messages/ver_00000000000000000000000000",
    ],
)
async def test_retrieving_what_is_not_there_answers_as_fastapi_does(pair: Pair, path: str) -> None:
    direct, fastapi = await pair.both("GET", path)
    assert same_answer(direct, fastapi)["error"]["code"] == "resource_missing"


@pytest.mark.asyncio
async def test_a_verification_reads_the_same_through_either_path(pair: Pair) -> None:
    created = await pair.direct.post(
        "/v1/verifications",
        json={"to": NUMBER, "metadata": {"order": "42"}},
        headers={"authorization": f"Bearer {pair.key}"},
    )
    assert created.status_code == 200, created.text
    path = f"/v1/verifications/{created.json()['id']}"

    direct, fastapi = await pair.both("GET", path)

    found = same_answer(direct, fastapi)
    assert found["id"] == created.json()["id"]
    assert found["metadata"] == {"order": "42"}


@pytest.mark.asyncio
async def test_a_wrong_code_counts_once_through_either_path(pair: Pair) -> None:
    headers = {"authorization": f"Bearer {pair.key}"}
    created = await pair.direct.post("/v1/verifications", json={"to": NUMBER}, headers=headers)
    assert created.status_code == 200, created.text

    direct, fastapi = await pair.both(
        "POST", "/v1/verifications/check", body({"to": NUMBER, "code": "0"})
    )

    assert (direct.status_code, fastapi.status_code) == (200, 200)
    first, second = direct.json(), fastapi.json()
    assert (first["remaining_checks"], second["remaining_checks"]) == (4, 3)
    for answer in (first, second):
        del answer["remaining_checks"], answer["updated_at"]
    assert first == second


@pytest.mark.asyncio
async def test_a_message_reads_the_same_through_either_path(pair: Pair) -> None:
    headers = {"authorization": f"Bearer {pair.key}"}
    sent = await pair.direct.post(
        "/v1/messages", json={"to": NUMBER, "code": "482913"}, headers=headers
    )
    assert sent.status_code == 200, sent.text
    assert "482913" not in sent.text

    direct, fastapi = await pair.both("GET", f"/v1/messages/{sent.json()['id']}")

    assert same_answer(direct, fastapi)["id"] == sent.json()["id"]
