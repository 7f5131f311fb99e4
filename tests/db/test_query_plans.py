"""Sweeps and per-request reads go through their indexes, never the whole table (SQLite)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.dialects import sqlite

from relay.abuse import store as abuse_store
from relay.db.migrate import upgrade


def plan(url: str, sql: str) -> str:
    engine = create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(text(f"EXPLAIN QUERY PLAN {sql}")).all()
    engine.dispose()
    return " | ".join(str(row[-1]) for row in rows)


def test_the_expiry_sweep_reads_only_due_pending_rows(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'plans.sqlite3'}"
    upgrade(url)
    found = plan(
        url,
        "SELECT id FROM verifications WHERE status = 'pending' AND expires_at <= '2026-01-01' "
        "ORDER BY expires_at LIMIT 200",
    )
    assert "USING INDEX ix_verifications_due" in found or "USING COVERING INDEX" in found, found


def test_the_dispatch_loop_reads_only_queued_and_overdue_attempts(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'plans.sqlite3'}"
    upgrade(url)
    queued = plan(
        url, "SELECT id FROM attempts WHERE status = 'queued' AND lease_until <= '2026-01-01'"
    )
    overdue = plan(
        url, "SELECT id FROM attempts WHERE status = 'sent' AND report_due_at <= '2026-01-01'"
    )
    assert "ix_attempts_queued" in queued, queued
    assert "ix_attempts_report_due" in overdue, overdue


def test_a_receipt_finds_its_attempt_by_index(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'plans.sqlite3'}"
    upgrade(url)
    found = plan(
        url, "SELECT id FROM attempts WHERE carrier = 'smsc' AND carrier_message_id = 'msg-1'"
    )
    assert "ix_attempts_carrier_message" in found, found


def test_the_abuse_guard_reads_each_window_by_its_full_key_not_the_accounts_counters(
    tmp_path: Path,
) -> None:
    """One index search per (kind, subject) window: never every counter the account has."""
    url = f"sqlite:///{tmp_path / 'plans.sqlite3'}"
    upgrade(url)
    dialect = sqlite.dialect()
    for statement, key in [
        (abuse_store._WINDOWS_SQL, "kind=? AND subject=? AND bucket>?"),
        (abuse_store._BLOCKS_SQL, "kind=? AND subject=?"),
    ]:
        compiled = statement.compile(dialect=dialect, compile_kwargs={"literal_binds": False})
        sql = compiled.string
        engine = create_engine(url)
        with engine.connect() as conn:
            rows = conn.exec_driver_sql(
                f"EXPLAIN QUERY PLAN {sql}", tuple("x" for _ in compiled.positiontup or ())
            ).all()
        engine.dispose()
        searches = [
            str(row[-1])
            for row in rows
            if "abuse_counters" in str(row[-1]) or "destination_blocks" in str(row[-1])
        ]
        assert searches, rows
        assert all(key in line for line in searches), searches
