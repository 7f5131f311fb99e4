"""asyncpg as Relay runs it against psycopg 3 in pipeline mode, on the production shape.

The statements are Relay's own: a create and an approving check, each under an
Idempotency-Key, are sent once through the real app (in process, over ASGI) on
Relay's migrated schema, and every statement the data layer runs is recorded
with its parameters and the unit it ran in (a read, or a write's transaction).
Those units are then replayed, with fresh ids, keys and numbers per request, by:

- asyncpg: Relay's own `relay.db` (its readers, and its writers' transaction per
  unit), every statement, BEGIN and COMMIT a round trip;
- psycopg plain: psycopg 3 async, the same round trips (the driver alone);
- psycopg unit: pipeline mode, a unit's statements that do not depend on each
  other's results in one flush (a write's SELECT decides what follows, so it
  ends a flush); the COMMIT once the unit has seen its results;
- psycopg group: as unit, and each writer pipelines every queued unit, its
  COMMIT in the flush of the next unit's first statements.

Requests run `--concurrency` at a time; the variants run interleaved, `--repeat`
times, and the table gives medians: requests per second; CPU µs per request of
this process (time.process_time: client, driver and event loop) and of the
PostgreSQL backends that served it (their user and system time in /proc); and
round trips per request (the flushes the client waited on; in `group` a flush
serves several requests, so fewer than one write flush each).

Usage:
  .venv/bin/python bench/pg_drivers.py [--requests 1000] [--repeat 5] [--concurrency 1,8,64]
  .venv/bin/python bench/pg_drivers.py --smoke
PostgreSQL: RELAY_BENCH_DRIVERS_PG, default postgresql://127.0.0.1:5432/relay_bench_drivers
(created if missing).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import asyncpg  # noqa: E402
import httpx  # noqa: E402
from bench.pg_pipeline import PsycopgDb, Segment, Statement, returns_rows  # noqa: E402

from relay.abuse.store import SHARDS  # noqa: E402
from relay.config import Settings  # noqa: E402
from relay.db.driver import open_db  # noqa: E402
from relay.db.migrate import upgrade  # noqa: E402
from relay.db.postgres import PostgresDb  # noqa: E402
from relay.db.sql import Params, Sql, Tx, values  # noqa: E402
from relay.ids import new_id  # noqa: E402
from relay.services import build_services  # noqa: E402
from relay.web.app import create_app  # noqa: E402

PG_URL = os.environ.get("RELAY_BENCH_DRIVERS_PG", "postgresql://127.0.0.1:5432/relay_bench_drivers")
CODE_KEY = "bench-code-key-0123456789-0123456789-abcdef"
VARIANTS = ("asyncpg", "psycopg plain", "psycopg unit", "psycopg group")
# What a replay makes fresh for each request: ids, Idempotency-Keys, numbers.
_FRESH = re.compile(
    r"(?:ver|att|evt)_[0-9A-Z]{26}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
    r"|\+1415\d{7}"
)
# (how the unit ran: "read", "write" or "write_alone"; its statements and their values)
Step = tuple[str, list[tuple[Sql, dict[str, Any]]]]


async def capture(tmp: Path) -> dict[str, list[Step]]:
    """The units a create and an approving check run, each under an Idempotency-Key."""
    settings = Settings(
        data_dir=tmp,
        database_url=PG_URL,
        code_key=CODE_KEY,
        rate_limit=1_000_000,
        rate_limit_burst=1_000_000,
        pumping_guard="off",
        daily_sms_cap=1_000_000_000,
        number_verifications_per_hour=1_000_000,
    )
    services = build_services(settings)
    key = (await services.accounts.create_account("Bench")).test_key
    app = create_app(services)
    db = services.db
    steps: list[Step] = []
    for kind in ("read", "write", "write_alone"):
        original = getattr(db, kind)

        def recording(unit: Any, original: Any = original, kind: str = kind) -> Awaitable[Any]:
            async def recorded(tx: Tx) -> Any:
                steps.append((kind, []))
                return await unit(tx)

            return original(recorded)  # type: ignore[no-any-return]

        setattr(db, kind, recording)
    db.trace(lambda statement, params: steps[-1][1].append((statement, dict(params or {}))))
    shapes: dict[str, list[Step]] = {}
    headers = {"Authorization": f"Bearer {key}"}
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=transport, base_url="https://relay.test", headers=headers
        ) as client,
    ):
        for n, (name, path) in enumerate(
            (("warm", "/v1/verifications"), ("create", "/v1/verifications"))
        ):
            steps.clear()
            body = {"to": f"+1415555{n:04d}"}
            answer = await client.post(
                path, json=body, headers={"Idempotency-Key": str(uuid.uuid4())}
            )
            assert answer.status_code == 200, answer.text
            shapes[name] = list(steps)
        steps.clear()
        body = {"id": answer.json()["id"], "code": "000000"}
        answer = await client.post(
            "/v1/verifications/check", json=body, headers={"Idempotency-Key": str(uuid.uuid4())}
        )
        assert answer.json()["status"] == "approved", answer.text
        shapes["check"] = list(steps)
    db.trace(None)
    await services.close()
    del shapes["warm"]
    return shapes


class Fresh:
    """Each recorded id, key and number replaced by one of its own, the same one
    wherever the recording had it (the check finds the create's verification)."""

    def __init__(self, numbers: itertools.count[int]) -> None:
        self.made: dict[str, str] = {}
        self._numbers = numbers

    def _new(self, old: str) -> str:
        if old not in self.made:
            if old.startswith("+"):
                self.made[old] = f"+1415{next(self._numbers):07d}"
            elif "_" in old:
                self.made[old] = new_id(old.split("_")[0])
            else:
                self.made[old] = str(uuid.uuid4())
        return self.made[old]

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return _FRESH.sub(lambda match: self._new(match.group(0)), value)
        if isinstance(value, bytes) and value.startswith(b"{"):  # a stored answer's body
            return self.value(value.decode()).encode()
        if isinstance(value, list):
            return [self.value(item) for item in value]
        return value

    def params(self, params: dict[str, Any]) -> Params:
        fresh = {name: self.value(value) for name, value in params.items()}
        if "shard" in fresh:
            fresh["shard"] = random.randrange(SHARDS)
        return fresh


Prepared = list[tuple[str, list[tuple[Sql, Params]]]]


def prepare(steps: list[Step], fresh: Fresh) -> Prepared:
    """Before the clock starts: a request's statements with its own values."""
    return [(kind, [(sql, fresh.params(p)) for sql, p in statements]) for kind, statements in steps]


def segments(statements: list[tuple[Sql, Params]]) -> list[Segment]:
    """A write's statements cut after each SELECT: its rows decide what follows."""
    cut: list[Segment] = [[]]
    for sql, params in statements:
        cut[-1].append((sql, values(sql, params, "postgresql")))
        if sql.postgres.startswith(("SELECT", "WITH")):
            cut.append([])
    return [segment for segment in cut if segment]


class Asyncpg:
    """Relay's data layer as it runs today."""

    def __init__(self) -> None:
        self.db: PostgresDb = open_db(PG_URL)  # type: ignore[assignment]
        self.flushes = 0

    async def open(self) -> None:
        return None

    async def run(self, request: Prepared) -> None:
        for kind, statements in request:

            async def unit(tx: Tx, statements: list[tuple[Sql, Params]] = statements) -> None:
                for sql, params in statements:
                    if returns_rows(sql):
                        await tx.fetch(sql, params)
                    else:
                        await tx.execute(sql, params)

            if kind == "read":
                for statement in statements:
                    await self.db.read(lambda tx, s=statement: unit(tx, [s]))
                self.flushes += len(statements)
            elif kind == "write_alone":
                await self.db.write_alone(unit)
                self.flushes += 1
            else:
                await self.db.write(unit)
                self.flushes += len(statements) + 2

    async def close(self) -> None:
        await self.db.close()


class Psycopg:
    def __init__(self, mode: str) -> None:
        self.db = PsycopgDb(PG_URL.replace("postgresql://", "postgres://"), mode)

    @property
    def flushes(self) -> int:
        return self.db.counts.flushes

    async def open(self) -> None:
        await self.db.open()

    async def run(self, request: Prepared) -> None:
        for kind, statements in request:
            if kind in ("read", "write_alone"):  # autocommit, on a reader
                bound: list[Statement] = [(s, values(s, p, "postgresql")) for s, p in statements]
                await self.db.read(bound)
            else:
                await self.db.write(segments(statements))

    async def close(self) -> None:
        await self.db.close()


def backend(variant: str) -> Asyncpg | Psycopg:
    return Asyncpg() if variant == "asyncpg" else Psycopg(variant.split()[1])


Figures = tuple[float, float, float, float]


async def run(
    variant: str, shapes: dict[str, list[Step]], requests: int, concurrency: int, numbers: Any
) -> dict[str, Figures]:
    """Per operation: requests per second, CPU µs per request of this process and of the
    database's backends serving it, round trips per request."""
    driver = backend(variant)
    await driver.open()
    figures: dict[str, Figures] = {}
    try:
        fresh = [Fresh(numbers) for _ in range(requests + 50)]
        gate = asyncio.Semaphore(concurrency)

        async def gated(work: Callable[[], Awaitable[None]]) -> None:
            async with gate:
                await work()

        for name in ("create", "check"):
            made = [prepare(shapes[name], each) for each in fresh]
            warm, timed = made[:50], made[50:]
            await asyncio.gather(*(gated(lambda r=r: driver.run(r)) for r in warm))
            flushes, server = driver.flushes, await backends_cpu({})
            wall, cpu = time.perf_counter(), time.process_time()
            await asyncio.gather(*(gated(lambda r=r: driver.run(r)) for r in timed))
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            served = sum((await backends_cpu(server)).values())
            figures[name] = (
                requests / wall,
                cpu / requests * 1e6,
                served / requests * 1e6,
                (driver.flushes - flushes) / requests,
            )
    finally:
        await driver.close()
    return figures


async def backends_cpu(since: dict[int, float]) -> dict[int, float]:
    """CPU seconds of each backend on the bench's database, less what `since` had; a
    backend that was not in `since` counts from its start."""
    connection = await asyncpg.connect(PG_URL)
    try:
        pids = await connection.fetch(
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    finally:
        await connection.close()
    used: dict[int, float] = {}
    for (pid,) in pids:
        seconds = cpu_seconds(pid)
        if seconds is not None:
            used[pid] = seconds - since.get(pid, 0.0)
    return used


def cpu_seconds(pid: int) -> float | None:
    """User and system time of a process on this machine, None if it is not here."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def require_database() -> None:
    try:
        connection = await asyncpg.connect(PG_URL)
    except asyncpg.InvalidCatalogNameError:
        admin = await asyncpg.connect(PG_URL.rsplit("/", 1)[0] + "/postgres")
        try:
            await admin.execute(f'CREATE DATABASE "{PG_URL.rsplit("/", 1)[1]}"')
        finally:
            await admin.close()
        return
    try:
        await connection.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
    finally:
        await connection.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000, help="per operation and run")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--concurrency", default="1,8,64")
    parser.add_argument("--smoke", action="store_true", help="a few seconds, for CI")
    args = parser.parse_args()
    levels = [int(level) for level in args.concurrency.split(",")]
    if args.smoke:
        args.requests, args.repeat, levels = 60, 1, [8]
    asyncio.run(require_database())
    upgrade(PG_URL)
    with tempfile.TemporaryDirectory() as tmp:
        shapes = asyncio.run(capture(Path(tmp)))
    numbers = itertools.count(1_000_000)
    results: dict[tuple[str, int, str], list[Figures]] = {}
    for round_ in range(args.repeat):
        for level in levels:
            # Interleaved, each round in another order: drift and the table's growth
            # fall on every variant alike.
            order = VARIANTS[round_ % len(VARIANTS) :] + VARIANTS[: round_ % len(VARIANTS)]
            for variant in order:
                figures = asyncio.run(run(variant, shapes, args.requests, level, numbers))
                for name, row in figures.items():
                    results.setdefault((name, level, variant), []).append(row)
    load = os.getloadavg()[0]
    for name, steps in shapes.items():
        units = ", ".join(f"{kind} {len(statements)}" for kind, statements in steps)
        print(f"{name}: {units} (statements per unit)")
    print(
        f"PostgreSQL, {args.requests} requests per operation and run, medians of {args.repeat}"
        f" interleaved runs; load average {load:.2f}"
    )
    print(
        f"{'operation':<10}{'in flight':>10}  {'driver':<16}{'per s':>8}{'CPU µs':>9}"
        f"{'server µs':>11}{'round trips':>13}"
    )
    for (name, level, variant), rows in results.items():
        per_s, cpu, server, trips = (
            statistics.median(column) for column in zip(*rows, strict=True)
        )
        print(
            f"{name:<10}{level:>10}  {variant:<16}{per_s:>8.0f}{cpu:>9.0f}{server:>11.0f}"
            f"{trips:>13.1f}"
        )


if __name__ == "__main__":
    main()
