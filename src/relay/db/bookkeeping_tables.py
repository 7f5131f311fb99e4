"""The schema's counters, kept figures and housekeeping: usage, abuse counters and blocks,
early and erased receipts, console sessions, own texts, callback nonces, cache generations
and retained figures. Declared on the metadata of `relay.db.tables`, which imports this
module, so the migrations see one schema."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    text,
)

from relay.db.metadata import metadata
from relay.db.utc_datetime import UtcDateTime

# Receipts that named a carrier message id no attempt carries yet: the submit
# answer and its receipt raced, and the receipt won. Applied when the id is recorded.
early_reports = Table(
    "early_reports",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("carrier", String(60), nullable=False),
    Column("carrier_message_id", String(128), nullable=False),
    Column("status", String(16), nullable=False),
    Column("error_code", String(64)),
    Column("at", UtcDateTime, nullable=False),
    Column("received_at", UtcDateTime, nullable=False),
    Index("ix_early_reports_message", "carrier", "carrier_message_id"),
)

# Carrier message ids of erased attempts (migration 0022), as SHA-256: a receipt for one
# is dropped, not parked as an early one, until `expires_at`.
erased_receipts = Table(
    "erased_receipts",
    metadata,
    Column("carrier", String(60), primary_key=True),
    Column("message_hash", String(64), primary_key=True),
    Column("expires_at", UtcDateTime, nullable=False),
    Index("ix_erased_receipts_expires", "expires_at"),
)

# Live sends per account, day, destination country, carrier and outcome.
usage = Table(
    "usage",
    metadata,
    Column("account_id", String(40), ForeignKey("accounts.id"), primary_key=True),
    Column("day", String(10), primary_key=True),
    Column("country", String(2), primary_key=True),
    Column("carrier", String(60), primary_key=True),
    Column("outcome", String(24), primary_key=True),
    Column("count", Integer, nullable=False, server_default=text("0")),
    # Billed SMS segments of those sends (migration 0015): what spend multiplies.
    Column("segments", Integer, nullable=False, server_default=text("0")),
)

abuse_counters = Table(
    "abuse_counters",
    metadata,
    Column("account_id", String(40), ForeignKey("accounts.id"), primary_key=True),
    Column("livemode", Boolean, primary_key=True),
    # kind: prefix | country | number | account; subject: the prefix, country, number
    # (or email address: migration 0016) or "".
    Column("kind", String(16), primary_key=True),
    Column("subject", String(254), primary_key=True),
    Column("bucket", UtcDateTime, primary_key=True),
    # Shared rows (account, country, prefix) are split over a few shards, one picked
    # per send: on PostgreSQL concurrent upserts of one row wait for each other's commit.
    Column("shard", Integer, primary_key=True, server_default=text("0")),
    Column("sends", Integer, nullable=False, server_default=text("0")),
    Column("approvals", Integer, nullable=False, server_default=text("0")),
    Column("failed_checks", Integer, nullable=False, server_default=text("0")),
    Index("ix_abuse_counters_bucket", "bucket"),
)

destination_blocks = Table(
    "destination_blocks",
    metadata,
    Column("account_id", String(40), ForeignKey("accounts.id"), primary_key=True),
    Column("livemode", Boolean, primary_key=True),
    Column("kind", String(16), primary_key=True),
    Column("subject", String(16), primary_key=True),
    Column("blocked_until", UtcDateTime, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
)

console_sessions = Table(
    "console_sessions",
    metadata,
    # SHA-256 of the session id the cookie carries: a copy of this table opens no session.
    Column("id_hash", String(64), primary_key=True),
    # "key": one account in one mode, through key_id; "admin": every account.
    Column("kind", String(8), nullable=False),
    Column("account_id", String(40), ForeignKey("accounts.id")),
    Column("livemode", Boolean),
    Column("key_id", String(40), ForeignKey("api_keys.id")),
    Column("created_at", UtcDateTime, nullable=False),
    Column("expires_at", UtcDateTime, nullable=False),
    # Set by signing out, or when the session's key stops answering: refused from then on.
    Column("ended_at", UtcDateTime),
    Index("ix_console_sessions_expires", "expires_at"),
)

# An account's own OTP texts (`relay.sms.custom`): channel "sms" or "email", a canonical
# BCP 47 locale. Relay's built-in texts apply where an account has none.
account_templates = Table(
    "account_templates",
    metadata,
    Column("account_id", String(40), ForeignKey("accounts.id"), primary_key=True),
    Column("channel", String(16), primary_key=True),
    Column("locale", String(35), primary_key=True),
    Column("text", Text, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
)

# Nonces of verified carrier callbacks whose signature covers no time (Plivo's), kept for
# the carrier's window: a second callback with one is a replay. Taken by one INSERT ... ON
# CONFLICT DO NOTHING (relay.delivery.callback_nonces); pruned once `expires_at` passes.
callback_nonces = Table(
    "callback_nonces",
    metadata,
    Column("carrier", String(60), primary_key=True),
    Column("nonce", String(128), primary_key=True),
    Column("expires_at", UtcDateTime, nullable=False),
    Index("ix_callback_nonces_expires", "expires_at"),
)

# What processes keep in memory, one counter per kind (`relay.db.changes`): every change
# to a kept record adds one in its own transaction. Only the row `keys` exists.
cache_generations = Table(
    "cache_generations",
    metadata,
    Column("name", String(40), primary_key=True),
    Column("generation", BigInteger, nullable=False),
)

# The figures of deleted verifications, messages, attempts, events and webhook attempts
# (migration 0021, relay.retention): counts `n` per minute and what the console's charts
# and measured routing group by, never a destination. A prune adds rows and never
# updates one; readers add them to the live rows. `kind`: verification | attempt |
# event | webhook_attempt. `minute`: of the creation (of `at`, for attempts);
# `final_minute`: of an attempt's last change; `status`: the row's status, an event's
# delivery status, or a webhook attempt's outcome; `seconds`: to a delivered receipt.
retained_figures = Table(
    "retained_figures",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(16), nullable=False),
    Column("account_id", String(40), ForeignKey("accounts.id"), nullable=False),
    Column("livemode", Boolean, nullable=False),
    Column("minute", UtcDateTime, nullable=False),
    Column("final_minute", UtcDateTime),
    Column("country", String(2)),
    Column("carrier", String(60)),
    Column("status", String(24)),
    Column("error_code", String(64)),
    Column("of_verification", Boolean),
    Column("failover", Boolean),
    Column("approved", Boolean),
    Column("seconds", Float),
    Column("n", Integer, nullable=False),
    Index("ix_retained_figures_minute", "kind", "minute"),
)
