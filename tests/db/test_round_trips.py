"""The statements of the requests production sends: every POST under an Idempotency-Key.

The app is driven in process, over its ASGI interface, so that every statement a
request causes is listed, by its first word and the tables it names: the
operation's one read, then the key taken with its answer first among the
writes, then the change, all in one commit. A warm-up request with the same API
key comes first, as in production, where the key is known: a key the process has
seen is kept in memory and costs no statement (tests/db/test_key_statements.py
shows a key never seen costing its one lookup).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import httpx
import pytest
import pytest_asyncio

from relay.db.sql import Params, Sql
from relay.services import Services
from relay.web.app import create_app
from tests.db.test_query_counts import committed

# The send's one read: its counter windows, its blocks, the destination's pending and
# recent verifications.
SEND_READ = "SELECT abuse_counters, destination_blocks, verifications"
# The key taken first among the writes, with the answer it replays.
KEY = "INSERT idempotency_keys"
# Its one read, the key, the verification, its attempt (already answered by the
# sandbox), its events, its counters.
CREATE = [
    SEND_READ,
    KEY,
    "INSERT verifications",
    "INSERT attempts",
    "INSERT events",
    "INSERT abuse_counters",
]
# The verification with its attempts, its code's MAC and its destination's wrong codes.
CHECK_READ = "SELECT abuse_counters, attempts, verifications"
# The read, the key, the counting UPDATE with the destination's wrong code: one
# statement on PostgreSQL, two on SQLite (no UPDATE inside WITH there).
WRONG_CHECK = {
    "postgresql": [CHECK_READ, KEY, "WITH UPDATE verifications, INSERT abuse_counters"],
    "sqlite": [CHECK_READ, KEY, "UPDATE verifications", "INSERT abuse_counters"],
}
# The read, the key, the counting UPDATE, the approval's event, the approval counters.
APPROVING_CHECK = [
    CHECK_READ,
    KEY,
    "UPDATE verifications",
    "INSERT events",
    "INSERT abuse_counters",
]
# The verification with its attempts, the key, the UPDATE that closes it.
CANCEL = ["SELECT attempts, verifications", KEY, "UPDATE verifications"]
# As a create: the message is written in the state its send left it in.
MESSAGE = [
    SEND_READ,
    KEY,
    "INSERT messages",
    "INSERT attempts",
    "INSERT events",
    "INSERT abuse_counters",
]
# A retried create within the resend interval: its read finds its own verification,
# whose resend is too soon, and the key's record answers; nothing is written.
RETRIED_CREATE = [SEND_READ, "SELECT attempts, verifications", "SELECT idempotency_keys"]

_CHANGES = re.compile(r"\b(INSERT INTO|(?<!DO )UPDATE|DELETE FROM)\s+(\w+)")
_READS = re.compile(r"\b(?:FROM|JOIN)\s+(\w+)")


def described(text: str) -> str:
    """'INSERT verifications', 'SELECT attempts, verifications' (the tables it reads, in
    alphabetical order), 'WITH UPDATE verifications, INSERT abuse_counters'."""
    first = text.split()[0].upper()
    if first == "SELECT":
        return f"SELECT {', '.join(sorted(set(_READS.findall(text))))}"
    changes = [f"{verb.split()[0]} {table}" for verb, table in _CHANGES.findall(text)]
    if first == "WITH":
        return f"WITH {', '.join(changes)}"
    return changes[0]


@contextmanager
def listed(services: Services) -> Iterator[list[str]]:
    """Every statement run while inside, described as the database runs it. The API key,
    seen by the warm-up request, is kept in the process and costs none."""
    statements: list[str] = []
    postgres = services.db.dialect == "postgresql"

    def trace(statement: Sql, _: Params | None) -> None:
        statements.append(described(statement.postgres if postgres else statement.text))

    services.db.trace(trace)
    try:
        yield statements
    finally:
        services.db.trace(None)


@pytest_asyncio.fixture
async def client(services: Services) -> AsyncIterator[httpx.AsyncClient]:
    account = await services.accounts.create_account("Acme")
    transport = httpx.ASGITransport(app=create_app(services))
    async with httpx.AsyncClient(
        transport=transport,
        base_url="https://relay.test",
        headers={"Authorization": f"Bearer {account.test_key}"},
    ) as made:
        # The API key is known from here on, as it is in production.
        await post(made, "/v1/verifications", {"to": "+14155550199"})
        yield made


async def post(
    client: httpx.AsyncClient, path: str, body: dict[str, str] | None, key: str | None = None
) -> httpx.Response:
    # As relay-client sends every POST: a key of its own per request.
    headers = {"Idempotency-Key": key or str(uuid.uuid4())}
    return await client.post(path, json=body, headers=headers)


async def created(client: httpx.AsyncClient, to: str) -> str:
    answer = await post(client, "/v1/verifications", {"to": to})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["id"])


@pytest.mark.asyncio
async def test_a_keyed_create_is_its_read_and_five_writes_in_one_commit(
    services: Services, client: httpx.AsyncClient
) -> None:
    with listed(services) as statements, committed(services) as commits:
        made = await post(client, "/v1/verifications", {"to": "+14155550101"})
    assert made.status_code == 200, made.text
    assert made.json()["attempts"][0]["status"] == "delivered"
    assert statements == CREATE
    assert commits == [1]


@pytest.mark.asyncio
async def test_a_keyed_wrong_code_is_its_read_the_key_and_the_count_in_one_commit(
    services: Services, client: httpx.AsyncClient
) -> None:
    verification_id = await created(client, "+14155550102")
    with listed(services) as statements, committed(services) as commits:
        checked = await post(
            client, "/v1/verifications/check", {"id": verification_id, "code": "123456"}
        )
    assert checked.json()["remaining_checks"] == 4, checked.text
    assert statements == WRONG_CHECK[services.db.dialect]
    assert commits == [1]


@pytest.mark.asyncio
async def test_a_keyed_approving_check_is_its_read_and_four_writes_in_one_commit(
    services: Services, client: httpx.AsyncClient
) -> None:
    verification_id = await created(client, "+14155550103")
    with listed(services) as statements, committed(services) as commits:
        checked = await post(
            client, "/v1/verifications/check", {"id": verification_id, "code": "000000"}
        )
    assert checked.json()["status"] == "approved", checked.text
    assert statements == APPROVING_CHECK
    assert commits == [1]


@pytest.mark.asyncio
async def test_a_keyed_cancel_is_its_read_the_key_and_the_update_in_one_commit(
    services: Services, client: httpx.AsyncClient
) -> None:
    verification_id = await created(client, "+14155550104")
    with listed(services) as statements, committed(services) as commits:
        canceled = await post(client, f"/v1/verifications/{verification_id}/cancel", None)
    assert canceled.json()["status"] == "canceled", canceled.text
    assert statements == CANCEL
    assert commits == [1]


@pytest.mark.asyncio
async def test_a_keyed_send_api_message_is_its_read_and_five_writes_in_one_commit(
    services: Services, client: httpx.AsyncClient
) -> None:
    with listed(services) as statements, committed(services) as commits:
        sent = await post(client, "/v1/messages", {"to": "+14155550105", "code": "4321"})
    assert sent.json()["status"] == "delivered", sent.text
    assert statements == MESSAGE
    assert commits == [1]


@pytest.mark.asyncio
async def test_a_retried_create_is_answered_from_its_record_and_writes_nothing(
    services: Services, client: httpx.AsyncClient
) -> None:
    body = {"to": "+14155550106"}
    first = await post(client, "/v1/verifications", body, key="retried")
    with listed(services) as statements:
        again = await post(client, "/v1/verifications", body, key="retried")
    assert again.headers["idempotent-replayed"] == "true"
    assert again.content == first.content
    assert statements == RETRIED_CREATE
