"""A deadlock victim whose retries ran out is answered 503 in the contract's shape."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest_asyncio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from relay.db.driver import Db, open_db
from relay.db.group_commit import RETRIES
from relay.db.sql import MustRetry, Sql, Tx
from relay.web.middleware import EdgeMiddleware
from tests.webhooks.receiver import isolated_database

CREATE = Sql("CREATE TABLE IF NOT EXISTS probe (id TEXT PRIMARY KEY)")
INSERT = Sql("INSERT INTO probe (id) VALUES (:id)")
COUNT = Sql("SELECT count(*) AS n FROM probe")


@pytest_asyncio.fixture
async def db(tmp_path: Path, database_url: str) -> AsyncIterator[Db]:
    url = await asyncio.to_thread(isolated_database, database_url, "database_busy", tmp_path)
    opened = open_db(url)
    await opened.write(lambda tx: tx.execute(CREATE))
    try:
        yield opened
    finally:
        await opened.close()


def always_a_victim(runs: list[int]):  # type: ignore[no-untyped-def]
    """A unit that writes, then loses every deadlock, as PostgreSQL would make it."""

    async def unit(tx: Tx) -> None:
        runs.append(1)
        await tx.execute(INSERT, {"id": f"p{len(runs)}"})
        raise MustRetry("deadlock detected")

    return unit


async def test_a_deadlock_victim_out_of_retries_gets_503_database_busy_and_writes_nothing(
    db: Db,
) -> None:
    runs: list[int] = []

    async def endpoint(_: Request) -> Response:
        await db.write(always_a_victim(runs))
        return Response(status_code=204)

    # As `relay.web.app` stacks it: the edge inside Starlette's own error middleware.
    app = Starlette(routes=[Route("/v1/probe", endpoint, methods=["POST"])])
    app.add_middleware(EdgeMiddleware)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="https://relay.test") as client:
        answer = await client.post("/v1/probe", json={})
    assert answer.status_code == 503
    assert answer.headers["Retry-After"] == "1"
    error = answer.json()["error"]
    assert (error["type"], error["code"]) == ("api_error", "database_busy")
    assert "Traceback" not in answer.text
    assert len(runs) == RETRIES
    rows = await db.read(lambda tx: tx.fetch(COUNT))
    assert rows[0]["n"] == 0
