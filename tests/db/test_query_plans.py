"""Sweeps and per-request reads go through their indexes, never the whole table (SQLite)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine
from sqlalchemy.dialects import sqlite

from relay.abuse import store as abuse_store
from relay.db.migrate import upgrade
from relay.db.prepared import Prepared
from relay.delivery import store as delivery_store
from relay.events import store as event_store
from relay.verifications import store as verification_store


def plan(url: str, statement: Any) -> str:
    """SQLite's plan for a store's own statement, as compiled for it (parameters bound)."""
    if isinstance(statement, Prepared):
        statement = statement.statement
    compiled = statement.compile(dialect=sqlite.dialect())
    engine = create_engine(url)
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            f"EXPLAIN QUERY PLAN {compiled.string}", tuple("x" for _ in compiled.positiontup or ())
        ).all()
    engine.dispose()
    return " | ".join(str(row[-1]) for row in rows)


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'plans.sqlite3'}"
    upgrade(url)
    return url


def test_the_expiry_sweep_reads_only_due_pending_rows(url: str) -> None:
    found = plan(url, verification_store._ANY_DUE)
    assert "USING INDEX ix_verifications_due" in found, found


def test_the_dispatch_loop_reads_only_queued_and_overdue_attempts(url: str) -> None:
    queued = plan(url, delivery_store._ANY_CLAIMABLE)
    overdue = plan(url, delivery_store._ANY_OVERDUE)
    assert "ix_attempts_queued" in queued, queued
    assert "ix_attempts_report_due" in overdue, overdue


def test_the_webhook_loop_reads_only_due_pending_events(url: str) -> None:
    for statement in (event_store._ANY_DUE, event_store._due_statement("sqlite", busy=False)):
        found = plan(url, statement)
        assert "ix_events_due" in found, found
        assert "SCAN events" not in found, found


def test_a_receipt_finds_its_attempt_by_index(url: str) -> None:
    found = plan(url, delivery_store._BY_CARRIER_ID)
    assert "ix_attempts_carrier_message" in found, found


def test_the_abuse_guard_reads_each_window_by_its_full_key_not_the_accounts_counters(
    url: str,
) -> None:
    """One index search per (kind, subject) window: never every counter the account has."""
    windows = plan(url, abuse_store._WINDOWS_SQL)
    blocks = plan(url, abuse_store._BLOCKS_SQL)
    assert windows.count("kind=? AND subject=? AND bucket>?") == 4, windows
    assert blocks.count("kind=? AND subject=?") == 2, blocks
