"""Sweeps and per-request reads go through their indexes, never the whole table (SQLite)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from relay.abuse import store as abuse_store
from relay.db.migrate import upgrade
from relay.db.sql import Sql
from relay.delivery import figures
from relay.delivery import store as delivery_store
from relay.events import due
from relay.verifications import check_store
from relay.verifications import store as verification_store


def plan(path: Path, statement: Sql) -> str:
    """SQLite's plan for a store's own statement, as it is sent (parameters bound)."""
    connection = sqlite3.connect(path)
    try:
        rows = connection.execute(
            f"EXPLAIN QUERY PLAN {statement.sqlite}", tuple("x" for _ in statement.names)
        ).fetchall()
    finally:
        connection.close()
    return " | ".join(str(row[-1]) for row in rows)


@pytest.fixture
def url(tmp_path: Path) -> Path:
    path = tmp_path / "plans.sqlite3"
    upgrade(f"sqlite:///{path}")
    return path


def test_the_expiry_sweep_reads_only_due_pending_rows(url: Path) -> None:
    found = plan(url, verification_store._ANY_DUE)
    assert "USING INDEX ix_verifications_due" in found, found


def test_the_dispatch_loop_reads_only_queued_and_overdue_attempts(url: Path) -> None:
    queued = plan(url, delivery_store._ANY_CLAIMABLE)
    overdue = plan(url, delivery_store._ANY_OVERDUE)
    assert "ix_attempts_queued" in queued, queued
    assert "ix_attempts_report_due" in overdue, overdue


def test_the_webhook_loop_reads_only_due_pending_events_by_endpoint(url: Path) -> None:
    for statement in (due._DUE_ENDPOINTS, due._CANDIDATES, due._UNKEYED):
        found = plan(url, statement)
        assert "ix_events_endpoint_due" in found, found
        assert "SCAN events" not in found, found


def test_a_receipt_finds_its_attempt_by_index(url: Path) -> None:
    found = plan(url, delivery_store._BY_CARRIER_ID)
    assert "ix_attempts_carrier_message" in found, found


def test_the_abuse_guard_reads_each_window_by_its_full_key_not_the_accounts_counters(
    url: Path,
) -> None:
    """One index search per (kind, subject) window and block, and the number's own
    verifications by their index: never every counter the account has."""
    for statement in (abuse_store._BEFORE_SEND, abuse_store._BEFORE_SEND_WITH_TEXTS):
        found = plan(url, statement)
        assert found.count("kind=? AND subject=? AND bucket>?") == 4, found
        assert found.count("kind=? AND subject=?)") == 2, found
        assert "uq_verifications_pending_to (account_id=? AND livemode=? AND to_number=?)" in found
        assert "ix_verifications_to (account_id=? AND livemode=? AND to_number=?)" in found
        # The only scan is of the number's newest verifications, at most `:recent` rows.
        assert found.replace("SCAN newest", "").count("SCAN") == 0, found
    with_texts = plan(url, abuse_store._BEFORE_SEND_WITH_TEXTS)
    assert "SEARCH account_templates USING INDEX" in with_texts, with_texts


def test_a_check_reads_its_verification_and_the_numbers_wrong_codes_by_index(url: Path) -> None:
    for statement in (check_store._FOR_CHECK_BY_ID, check_store._FOR_CHECK_BY_NUMBER):
        found = plan(url, statement)
        assert "kind=? AND subject=? AND bucket>?" in found, found
        assert "SCAN" not in found, found


def test_a_verification_is_read_by_its_key_with_its_attempts_in_their_indexs_order(
    url: Path,
) -> None:
    """One row by the primary key, so no sort of the attempts it joins."""
    for statement in (
        check_store._FOR_CHECK_BY_ID,
        check_store._FOR_CHECK_BY_NUMBER,
        verification_store._LOAD,
        verification_store._LOAD_SEALED,
    ):
        found = plan(url, statement)
        assert "SEARCH v USING INDEX sqlite_autoindex_verifications_1 (id=?)" in found, found
        assert "ix_attempts_verification (verification_id=?)" in found, found
        assert "TEMP B-TREE" not in found, found


def test_measured_routes_read_only_the_hour_of_attempts_and_their_owners_by_key(
    url: Path,
) -> None:
    found = plan(url, figures.FIGURES)
    assert "SEARCH a USING INDEX ix_attempts_at (at>? AND at<?)" in found, found
    assert "SCAN" not in found.replace("USE TEMP B-TREE", ""), found
