"""Migration 0018 keys email verifications and their wrong codes by mailbox, keeps each
address as given, leaves one pending verification per mailbox, and steps back."""

from __future__ import annotations

from pathlib import Path

from relay.db.migrate import downgrade, upgrade
from tests.db.test_migrations import drift, execute, read_rows
from tests.webhooks.receiver import isolated_database

# (id, to as stored before 0018, status)
BEFORE = [
    ("ver_1", "Bomb@example.com", "pending"),
    ("ver_2", "BOMB@example.com", "approved"),
    ("ver_3", "bomb+1@example.com", "pending"),
    ("ver_4", "Straße@bücher.example", "pending"),
    ("ver_5", "+14155550100", "pending"),
]
AFTER = [
    ("ver_1", "bomb@example.com", "Bomb@example.com", "expired", False),
    ("ver_2", "bomb@example.com", "BOMB@example.com", "approved", True),
    ("ver_3", "bomb@example.com", "bomb+1@example.com", "pending", True),
    ("ver_4", "strasse@bücher.example", "Straße@bücher.example", "pending", True),
    ("ver_5", "+14155550100", None, "pending", True),
]
# Wrong codes per destination, in one bucket: three spellings of one mailbox, a number.
COUNTERS = [("Bomb@example.com", 2), ("bomb+1@example.com", 3), ("bomb@example.com", 1)]


def _verifications(url: str) -> list[tuple[str, str, str | None, str, bool]]:
    rows = read_rows(
        url, "SELECT id, to_number, address, status, sealed_code FROM verifications ORDER BY id"
    )
    return [
        (r["id"], r["to_number"], r["address"], r["status"], r["sealed_code"] is not None)
        for r in rows
    ]


def _counters(url: str) -> list[tuple[str, int]]:
    rows = read_rows(
        url,
        "SELECT subject, failed_checks FROM abuse_counters WHERE kind = 'number' ORDER BY subject",
    )
    return [(r["subject"], int(r["failed_checks"])) for r in rows]


def test_email_verifications_and_their_counters_move_to_their_mailbox(
    tmp_path: Path, database_url: str
) -> None:
    url = isolated_database(database_url, "migrations_mailbox", tmp_path)
    downgrade(url, "0017")
    execute(
        url, "INSERT INTO accounts (id, name, brand, created_at) VALUES ('acct_b', 'B', 'B', :t)"
    )
    for vid, to, status in BEFORE:
        execute(
            url,
            "INSERT INTO verifications (id, account_id, livemode, to_number, country, sender,"
            " locale, code_length, code_mac, sealed_code, status, checks, sends, metadata,"
            " created_at, updated_at, expires_at, last_sent_at, channels) VALUES (:id, 'acct_b',"
            " false, :to, :country, 'B', 'en', 6, :mac, :mac, :status, 0, 1, '{}', :t, :t, :t,"
            " :t, :channel)",
            id=vid,
            to=to,
            country="" if "@" in to else "US",
            channel="email" if "@" in to else "sms",
            mac=b"\x00" * 32,
            status=status,
        )
    for subject, failed in [*COUNTERS, ("+14155550100", 4)]:
        execute(
            url,
            "INSERT INTO abuse_counters (account_id, livemode, kind, subject, bucket, shard,"
            " sends, approvals, failed_checks) VALUES ('acct_b', false, 'number', :subject, :t,"
            " 0, 0, 0, :failed)",
            subject=subject,
            failed=failed,
        )

    upgrade(url)

    assert drift(url) == []
    assert _verifications(url) == AFTER
    assert _counters(url) == [("+14155550100", 4), ("bomb@example.com", 6)]
    downgrade(url, "0017")
    restored = read_rows(url, "SELECT id, to_number FROM verifications ORDER BY id")
    assert [(r["id"], r["to_number"]) for r in restored] == [(v, to) for v, to, _ in BEFORE]
    upgrade(url)
    assert [row[:3] for row in _verifications(url)] == [row[:3] for row in AFTER]
    assert drift(url) == []
