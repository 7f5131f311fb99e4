"""The migrations build exactly the schema the code declares, and step back cleanly."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection, create_engine
from sqlalchemy.ext.asyncio import create_async_engine

from relay.db.driver import open_db
from relay.db.migrate import downgrade, upgrade
from relay.db.sql import Row, Sql
from relay.db.tables import metadata
from relay.db.urls import is_postgres, sync_url
from relay.verifications import store as verification_store
from relay.webhooks.guard import endpoint
from tests.webhooks.receiver import isolated_database


def _compare(conn: Connection) -> list[object]:
    differences: list[object] = compare_metadata(MigrationContext.configure(conn), metadata)
    return differences


def drift(url: str) -> list[object]:
    if not is_postgres(url):
        engine = create_engine(url)
        with engine.connect() as conn:
            found = _compare(conn)
        engine.dispose()
        return found

    async def on_postgres() -> list[object]:
        engine = create_async_engine(sync_url(url))
        async with engine.connect() as conn:
            found = await conn.run_sync(_compare)
        await engine.dispose()
        return found

    return asyncio.run(on_postgres())


def test_migrations_match_the_declared_tables(tmp_path: Path, database_url: str) -> None:
    url = isolated_database(database_url, "migrations", tmp_path)
    assert drift(url) == []


def test_the_delivery_migration_downgrades_and_upgrades_again(
    tmp_path: Path, database_url: str
) -> None:
    url = isolated_database(database_url, "migrations_down", tmp_path)
    downgrade(url, "0003")
    upgrade(url)
    assert drift(url) == []


WHEN = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)


def execute(url: str, sql: str, **params: Any) -> None:
    async def go() -> None:
        db = open_db(url)
        try:
            await db.write(lambda tx: tx.execute(Sql(sql), {"t": WHEN, **params}))
        finally:
            await db.close()

    asyncio.run(go())


def read_rows(url: str, sql: str) -> list[Row]:
    async def go() -> list[Row]:
        db = open_db(url)
        try:
            return await db.read(lambda tx: tx.fetch(Sql(sql)))
        finally:
            await db.close()

    return asyncio.run(go())


def _counter_rows(url: str) -> list[tuple[str, int, int]]:
    rows = read_rows(
        url,
        "SELECT kind, sends, failed_checks FROM abuse_counters ORDER BY kind, sends",
    )
    return [(str(r["kind"]), int(r["sends"]), int(r["failed_checks"])) for r in rows]


def test_counters_written_before_shards_keep_their_counts_through_the_shard_migration(
    tmp_path: Path, database_url: str
) -> None:
    url = isolated_database(database_url, "migrations_shards", tmp_path)
    downgrade(url, "0005")
    execute(
        url, "INSERT INTO accounts (id, name, brand, created_at) VALUES ('acct_m', 'M', 'M', :t)"
    )
    for kind, sends, failed in (("account", 7, 0), ("number", 2, 3)):
        execute(
            url,
            "INSERT INTO abuse_counters (account_id, livemode, kind, subject, bucket, sends,"
            " approvals, failed_checks) VALUES ('acct_m', true, :kind, '', :t, :sends, 0, :failed)",
            kind=kind,
            sends=sends,
            failed=failed,
        )
    upgrade(url)
    assert _counter_rows(url) == [("account", 7, 0), ("number", 2, 3)]
    # Two shards of one row are added back together on the way down.
    execute(
        url,
        "INSERT INTO abuse_counters (account_id, livemode, kind, subject, bucket, shard, sends,"
        " approvals, failed_checks) VALUES ('acct_m', true, 'account', '', :t, 5, 4, 0, 0)",
    )
    downgrade(url, "0005")
    assert _counter_rows(url) == [("account", 11, 0), ("number", 2, 3)]
    upgrade(url)
    assert drift(url) == []


def test_verifications_written_before_the_expiry_index_change_are_swept_after_it(
    tmp_path: Path, database_url: str
) -> None:
    url = isolated_database(database_url, "migrations_expiry", tmp_path)
    downgrade(url, "0008")
    execute(
        url, "INSERT INTO accounts (id, name, brand, created_at) VALUES ('acct_e', 'E', 'E', :t)"
    )
    for vid, status in (("ver_open", "pending"), ("ver_done", "approved")):
        execute(
            url,
            "INSERT INTO verifications (id, account_id, livemode, to_number, country, sender,"
            " locale, code_length, code_mac, status, checks, sends, metadata, created_at,"
            " updated_at, expires_at, last_sent_at) VALUES (:id, 'acct_e', false, '+14155550100',"
            " 'US', 'E', 'en', 6, :mac, :status, 0, 1, '{}', :t, :t, :t, :t)",
            id=vid,
            mac=b"\x00" * 32,
            status=status,
        )
    upgrade(url)
    assert drift(url) == []
    # The sweep, as the store runs it, closes the pending one and leaves the other alone.
    assert _sweep(url) == ["ver_open"]
    downgrade(url, "0008")
    upgrade(url)
    assert drift(url) == []


def _sweep(url: str) -> list[str]:
    async def go() -> list[str]:
        db = open_db(url)
        try:
            later = WHEN + timedelta(seconds=1)
            return await db.write(lambda tx: verification_store.expire_due(tx, now=later, limit=10))
        finally:
            await db.close()

    return asyncio.run(go())


ENDPOINT_CASES = [
    ("https://hooks.example/relay?token=1", "https://hooks.example"),
    ("https://hooks.example:8443/a/b", "https://hooks.example:8443"),
    ("https://hooks.example?token=1", "https://hooks.example"),
    ("https://hooks.example#part", "https://hooks.example"),
    ("https://hooks.example", "https://hooks.example"),
    ("https://[2001:db8::1]:8443/x", "https://[2001:db8::1]:8443"),
    (None, None),
]


def _event_endpoints(url: str) -> list[tuple[str | None, str | None]]:
    rows = read_rows(url, "SELECT webhook_url, endpoint FROM events ORDER BY id")
    return [(r["webhook_url"], r["endpoint"]) for r in rows]


def test_events_written_before_0010_get_the_endpoint_of_their_url_and_step_back_cleanly(
    tmp_path: Path, database_url: str
) -> None:
    url = isolated_database(database_url, "migrations_endpoint", tmp_path)
    downgrade(url, "0009")
    execute(
        url, "INSERT INTO accounts (id, name, brand, created_at) VALUES ('acct_e', 'E', 'E', :t)"
    )
    for number, (webhook_url, _) in enumerate(ENDPOINT_CASES):
        execute(
            url,
            "INSERT INTO events (id, account_id, livemode, type, related_id, payload, webhook_url,"
            " delivery_status, created_at, next_attempt_at) VALUES (:id, 'acct_e', false,"
            " 'verification.sent', 'ver_1', '{}', :webhook_url, :status, :t, :next)",
            id=f"evt_{number}",
            webhook_url=webhook_url,
            status="pending" if webhook_url else "none",
            next=WHEN if webhook_url else None,
        )
    upgrade(url)
    assert _event_endpoints(url) == ENDPOINT_CASES
    assert [endpoint(u) for u, _ in ENDPOINT_CASES if u] == [e for _, e in ENDPOINT_CASES if e]
    downgrade(url, "0009")
    assert len(read_rows(url, "SELECT id FROM events")) == len(ENDPOINT_CASES)
    upgrade(url)
    assert _event_endpoints(url) == ENDPOINT_CASES
    assert drift(url) == []


def test_attempts_written_before_0011_are_found_by_their_owner_after_it(
    tmp_path: Path, database_url: str
) -> None:
    url = isolated_database(database_url, "migrations_owners", tmp_path)
    downgrade(url, "0010")
    execute(
        url, "INSERT INTO accounts (id, name, brand, created_at) VALUES ('acct_o', 'O', 'O', :t)"
    )
    execute(
        url,
        "INSERT INTO verifications (id, account_id, livemode, to_number, country, sender,"
        " locale, code_length, code_mac, status, checks, sends, metadata, created_at,"
        " updated_at, expires_at, last_sent_at) VALUES ('ver_o', 'acct_o', false,"
        " '+14155550100', 'US', 'O', 'en', 6, :mac, 'pending', 0, 1, '{}', :t, :t, :t, :t)",
        mac=b"\x00" * 32,
    )
    for attempt in ("att_1", "att_2"):
        execute(
            url,
            "INSERT INTO attempts (id, verification_id, carrier, status, at, updated_at)"
            " VALUES (:id, 'ver_o', 'sandbox', 'delivered', :t, :t)",
            id=attempt,
        )
    upgrade(url)
    assert drift(url) == []
    found = read_rows(url, "SELECT id FROM attempts WHERE verification_id = 'ver_o' ORDER BY id")
    assert [r["id"] for r in found] == ["att_1", "att_2"]
    assert read_rows(url, "SELECT id FROM attempts WHERE message_id = 'ver_o'") == []
    downgrade(url, "0010")
    upgrade(url)
    assert drift(url) == []


def test_usage_counted_before_0015_keeps_its_counts_with_no_segments_and_steps_back(
    tmp_path: Path, database_url: str
) -> None:
    url = isolated_database(database_url, "migrations_segments", tmp_path)
    downgrade(url, "0014")
    execute(
        url, "INSERT INTO accounts (id, name, brand, created_at) VALUES ('acct_s', 'S', 'S', :t)"
    )
    execute(
        url,
        "INSERT INTO usage (account_id, day, country, carrier, outcome, count)"
        " VALUES ('acct_s', '2026-11-25', 'FR', 'operator-a', 'delivered', 7)",
    )
    upgrade(url)
    assert drift(url) == []
    found = read_rows(url, "SELECT count, segments FROM usage WHERE account_id = 'acct_s'")
    assert [(r["count"], r["segments"]) for r in found] == [(7, 0)]
    downgrade(url, "0014")
    found = read_rows(url, "SELECT count FROM usage WHERE account_id = 'acct_s'")
    assert [r["count"] for r in found] == [7]
    upgrade(url)
    assert drift(url) == []
