"""Round trips of the requests production sends: every POST under an Idempotency-Key.

The app is driven in process, over its ASGI interface, so that every statement a
request causes is counted: the key lookup, the idempotency claim and its stored
answer, the operation itself. The same bounds hold on SQLite and PostgreSQL,
because the same code and the same statements run on both; only the SQL text
differs, inside the data layer.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio

from relay.services import Services
from relay.web.app import create_app
from tests.db.test_query_counts import committed, counted

# Each request first looks its Idempotency-Key up (a read outside any transaction), and
# last stores its answer under that key. Its API key, seen before, costs nothing.
AROUND = (["SELECT"], ["INSERT"])
# The send's one read (pending and recent verifications, counters, blocks), the key's
# claim, the verification, its attempt, its events, its counters.
CREATE = ["SELECT", "INSERT", "INSERT", "INSERT", "INSERT", "INSERT"]
# The check's one read, the key's claim, the counting UPDATE, the number's wrong codes.
WRONG_CHECK = ["SELECT", "INSERT", "UPDATE", "INSERT"]
# The same, with the approval's event before the counters.
APPROVING_CHECK = ["SELECT", "INSERT", "UPDATE", "INSERT", "INSERT"]


def around(statements: list[str]) -> list[str]:
    before, after = AROUND
    return [*before, *statements, *after]


@pytest_asyncio.fixture
async def client(services: Services) -> AsyncIterator[httpx.AsyncClient]:
    account = await services.accounts.create_account("Acme")
    transport = httpx.ASGITransport(app=create_app(services))
    async with httpx.AsyncClient(
        transport=transport,
        base_url="https://relay.test",
        headers={"Authorization": f"Bearer {account.test_key}"},
    ) as made:
        yield made


async def post(client: httpx.AsyncClient, path: str, body: dict[str, str]) -> httpx.Response:
    # As relay-client sends every POST: a key of its own per request.
    answer = await client.post(path, json=body, headers={"Idempotency-Key": str(uuid.uuid4())})
    assert answer.status_code == 200, answer.text
    return answer


@pytest.mark.asyncio
async def test_a_create_under_an_idempotency_key_takes_a_bounded_number_of_round_trips(
    services: Services, client: httpx.AsyncClient
) -> None:
    await post(client, "/v1/verifications", {"to": "+14155550100"})  # warm caches
    with counted(services) as statements, committed(services) as commits:
        made = await post(client, "/v1/verifications", {"to": "+14155550101"})
    assert made.json()["status"] == "pending"
    assert statements == around(CREATE)
    # The claim and the create commit together; the stored answer after them.
    assert commits == [2]


@pytest.mark.asyncio
async def test_a_wrong_code_under_an_idempotency_key_takes_a_bounded_number_of_round_trips(
    services: Services, client: httpx.AsyncClient
) -> None:
    made = (await post(client, "/v1/verifications", {"to": "+14155550102"})).json()
    with counted(services) as statements:
        checked = await post(
            client, "/v1/verifications/check", {"id": made["id"], "code": "123456"}
        )
    assert checked.json()["remaining_checks"] == 4
    assert statements == around(WRONG_CHECK)


@pytest.mark.asyncio
async def test_an_approving_check_under_an_idempotency_key_takes_a_bounded_number_of_round_trips(
    services: Services, client: httpx.AsyncClient
) -> None:
    made = (await post(client, "/v1/verifications", {"to": "+14155550103"})).json()
    with counted(services) as statements:
        checked = await post(
            client, "/v1/verifications/check", {"id": made["id"], "code": "000000"}
        )
    assert checked.json()["status"] == "approved"
    assert statements == around(APPROVING_CHECK)
