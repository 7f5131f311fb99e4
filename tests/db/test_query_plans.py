"""The background sweeps read through their partial indexes, never the whole table."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import create_engine, text

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
