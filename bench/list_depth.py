"""List latency deep in a large table: page 10,000 against page 1, over HTTPS.

Creates a fresh data directory and account, loads ROWS verifications for the
account's test mode directly (batched inserts through Relay's own table
definitions and database adapter), starts `relay serve`, then times
`GET /v1/verifications?limit=100` (page 1) and the same with `starting_after`
set to the last id of page 9,999, alternating the two so that any drift on the
machine hits both alike. The goal: page 10,000's p50 within 1.2x of page 1's.

Usage:
  .venv/bin/python bench/list_depth.py [--db sqlite|pg] [--rows 1000000] [--requests 500]
  .venv/bin/python bench/list_depth.py --smoke     # 20,000 rows, a few seconds

`--db pg` drops and recreates the database `relay_bench_list` on 127.0.0.1:5432
(`--pg-url` to change it) and drops it again at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import ssl
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from serving import bench_account, free_port, running, wait_ready
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from relay.db.driver import open_db
from relay.db.sql import Sql
from relay.db.urls import sync_url
from relay.ids import new_id
from relay.tls import ensure_self_signed

PG_URL = "postgresql://127.0.0.1:5432/relay_bench_list"
BATCH = 10_000
LIMIT = 100
GOAL = 1.2


@dataclass(frozen=True)
class Latency:
    p50_ms: float
    p95_ms: float
    p99_ms: float

    @classmethod
    def of(cls, samples_ns: list[int]) -> Latency:
        cuts = statistics.quantiles(samples_ns, n=100, method="inclusive")
        return cls(cuts[49] / 1e6, cuts[94] / 1e6, cuts[98] / 1e6)


@dataclass(frozen=True)
class Loaded:
    """What the load knows about the ids it wrote, oldest first."""

    rows: int
    seconds: float
    newest: str
    cursor: str  # the last id of the page before the deep one
    deep_first: str  # the first id the deep page must show


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "pg"], default="sqlite")
    parser.add_argument("--pg-url", default=PG_URL, help="dropped and recreated with --db pg")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--page", type=int, help="the deep page (default: the last full one)")
    parser.add_argument("--requests", type=int, default=500, help="timed requests per page")
    parser.add_argument("--warmup", type=int, default=50, help="untimed requests per page")
    parser.add_argument("--smoke", action="store_true", help="20,000 rows, 50 requests")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.requests, args.warmup = 20_000, 50, 10
    page = args.page or args.rows // LIMIT
    if not 2 <= page <= args.rows // LIMIT:
        raise SystemExit(f"--page must be 2..{args.rows // LIMIT} for {args.rows} rows")
    with tempfile.TemporaryDirectory(prefix="relay-list-depth-") as tmp:
        data = Path(tmp)
        url = f"sqlite:///{data / 'relay.sqlite3'}"
        if args.db == "pg":
            url = args.pg_url
            asyncio.run(_recreate_pg(url))
        try:
            result = run(data, url, args.rows, page, args.requests, args.warmup)
        finally:
            if args.db == "pg":
                asyncio.run(_drop_pg(url))
    result["db"] = args.db
    report(result, as_json=args.json)


def run(data: Path, url: str, rows: int, page: int, requests: int, warmup: int) -> dict[str, Any]:
    env = {
        **os.environ,
        "RELAY_DATA_DIR": str(data),
        "RELAY_DATABASE_URL": url,
        "RELAY_RATE_LIMIT": "1000000",
        "RELAY_RATE_LIMIT_BURST": "1000000",
        "RELAY_LOG_LEVEL": "warning",
    }
    relay = str(Path(sys.executable).parent / "relay")
    account = bench_account(relay, env)
    loaded = asyncio.run(load(url, account["id"], rows, page))
    print(
        f"loaded {loaded.rows:,} rows in {loaded.seconds:.1f}s "
        f"({loaded.rows / loaded.seconds:,.0f} rows/s)",
        file=sys.stderr,
    )
    cert = ensure_self_signed(data / "tls")
    context = ssl.create_default_context(cafile=str(cert.cert))
    port = free_port()
    base = f"https://localhost:{port}"
    with running([relay, "serve", "--port", str(port)], env) as process:
        wait_ready(base, context, process)
        first, deep = measure(base, account["test_key"], context, loaded, requests, warmup)
    return {
        "rows": rows,
        "page": page,
        "limit": LIMIT,
        "requests": requests,
        "load_seconds": round(loaded.seconds, 1),
        "page1": asdict(first),
        "deep": asdict(deep),
        "ratio_p50": deep.p50_ms / first.p50_ms,
    }


async def load(url: str, account_id: str, rows: int, page: int) -> Loaded:
    # Ids come from new_id in one process, so insertion order is id order.
    # In newest-first order the deep page starts after row (page-1)*LIMIT, which is
    # the oldest-first index rows - (page-1)*LIMIT.
    cursor_index = rows - (page - 1) * LIMIT
    wanted = {rows - 1: "newest", cursor_index: "cursor", cursor_index - 1: "deep_first"}
    found: dict[str, str] = {}
    database = open_db(url)
    started = time.perf_counter()
    try:
        for batch in _batches(account_id, rows, wanted, found):
            await database.write(lambda tx, batch=batch: tx.executemany(_INSERT, batch))
        if database.dialect == "postgresql":
            # Autovacuum would analyze after such a load anyway; doing it now keeps
            # it from landing in the middle of the timed requests.
            await database.write(lambda tx: tx.execute(Sql("ANALYZE verifications")))
    finally:
        await database.close()
    return Loaded(rows, time.perf_counter() - started, **found)


_INSERT = Sql(
    "INSERT INTO verifications (id, account_id, livemode, to_number, country, sender, locale,"
    " code_length, code_mac, sealed_code, status, checks, sends, metadata, webhook_url,"
    " created_at, updated_at, expires_at, last_sent_at, approved_at, canceled_at) VALUES (:id,"
    " :account_id, :livemode, :to_number, :country, :sender, :locale, :code_length, :code_mac,"
    " :sealed_code, :status, :checks, :sends, :metadata, :webhook_url, :created_at, :updated_at,"
    " :expires_at, :last_sent_at, :approved_at, :canceled_at)"
)


def _batches(
    account_id: str, rows: int, wanted: dict[int, str], found: dict[str, str]
) -> Iterator[list[dict[str, Any]]]:
    now = datetime.now(UTC)
    previous = ""
    for start in range(0, rows, BATCH):
        batch = []
        for index in range(start, min(start + BATCH, rows)):
            ident = new_id("ver")
            if ident <= previous:
                raise AssertionError("ids must sort in insertion order")
            previous = ident
            if index in wanted:
                found[wanted[index]] = ident
            batch.append(_row(ident, account_id, index, now))
        yield batch


def _row(ident: str, account_id: str, index: int, now: datetime) -> dict[str, Any]:
    return {
        "id": ident,
        "account_id": account_id,
        "livemode": False,
        "to_number": f"+1415{2_000_000 + index % 8_000_000:07d}",
        "country": "US",
        "sender": "Bench",
        "locale": "en",
        "code_length": 6,
        "code_mac": secrets.token_bytes(32),
        "sealed_code": None,
        "status": "approved",
        "checks": 1,
        "sends": 1,
        "metadata": {"user_id": str(index)},
        "webhook_url": None,
        "created_at": now,
        "updated_at": now,
        "expires_at": now + timedelta(minutes=10),
        "last_sent_at": now,
        "approved_at": now,
        "canceled_at": None,
    }


def measure(
    base: str, key: str, context: ssl.SSLContext, loaded: Loaded, requests: int, warmup: int
) -> tuple[Latency, Latency]:
    first_path = f"/v1/verifications?limit={LIMIT}"
    deep_path = f"{first_path}&starting_after={loaded.cursor}"
    headers = {"Authorization": f"Bearer {key}"}
    samples: dict[str, list[int]] = {first_path: [], deep_path: []}
    with httpx.Client(base_url=base, verify=context, headers=headers) as client:
        _check_page(client.get(first_path), loaded.newest)
        _check_page(client.get(deep_path), loaded.deep_first)
        for round_number in range(warmup + requests):
            for path in (first_path, deep_path):
                started = time.perf_counter_ns()
                response = client.get(path)
                elapsed = time.perf_counter_ns() - started
                if response.status_code != 200:
                    raise RuntimeError(f"{path}: {response.status_code} {response.text}")
                if round_number >= warmup:
                    samples[path].append(elapsed)
    return Latency.of(samples[first_path]), Latency.of(samples[deep_path])


def _check_page(response: httpx.Response, first_id: str) -> None:
    body = response.json()
    if response.status_code != 200 or len(body["data"]) != LIMIT:
        raise RuntimeError(f"unexpected page: {response.status_code} {response.text[:300]}")
    if body["data"][0]["id"] != first_id:
        raise RuntimeError(f"page starts at {body['data'][0]['id']}, expected {first_id}")


async def _recreate_pg(url: str) -> None:
    await _pg_admin(url, "DROP DATABASE IF EXISTS {} WITH (FORCE)", "CREATE DATABASE {}")


async def _drop_pg(url: str) -> None:
    await _pg_admin(url, "DROP DATABASE IF EXISTS {} WITH (FORCE)")


async def _pg_admin(url: str, *statements: str) -> None:
    """Run statements in the server's `postgres` database, outside a transaction."""
    target = make_url(url)
    name = f'"{target.database}"'
    admin = create_async_engine(
        sync_url(target.set(database="postgres").render_as_string(hide_password=False)),
        isolation_level="AUTOCOMMIT",
    )
    try:
        async with admin.connect() as conn:
            for statement in statements:
                await conn.execute(text(statement.format(name)))
    finally:
        await admin.dispose()


def report(result: dict[str, Any], *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(result))
        return
    print(
        f"db={result['db']} rows={result['rows']:,} limit={result['limit']} "
        f"requests={result['requests']} per page (HTTPS, keep-alive, sequential)"
    )
    print(f"{'page':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    for label, latency in (("1", result["page1"]), (f"{result['page']:,}", result["deep"])):
        print(
            f"{label:>7} {latency['p50_ms']:8.2f} {latency['p95_ms']:8.2f} {latency['p99_ms']:8.2f}"
        )
    verdict = "within" if result["ratio_p50"] <= GOAL else "NOT within"
    ratio = f"{result['ratio_p50']:.2f}"
    print(f"p50 ratio page {result['page']:,} / page 1 = {ratio} ({verdict} {GOAL}x)")


if __name__ == "__main__":
    main()
