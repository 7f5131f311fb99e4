"""The schema, in SQLAlchemy Core: what the migrations under `migrations/` are written
against. Runtime queries do not use it; they go through `relay.db.sql`."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

from relay.db.metadata import metadata as metadata
from relay.db.utc_datetime import UtcDateTime

accounts = Table(
    "accounts",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("name", String(200), nullable=False),
    Column("brand", String(60), nullable=False),
    Column("webotp_domain", String(253)),
    Column("created_at", UtcDateTime, nullable=False),
    # Destination countries this account may send to (ISO 3166 codes); NULL means all.
    Column("allowed_countries", JSON),
    # Seconds its verifications and messages are kept (migration 0021); NULL: the
    # `delete_after` setting.
    Column("delete_after", Integer),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("account_id", String(40), ForeignKey("accounts.id"), nullable=False),
    Column("livemode", Boolean, nullable=False),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("last4", String(4), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("revoked_at", UtcDateTime),
    # Migration 0006. A rolled key answers until expires_at; a key with networks
    # (CIDR strings) answers only requests from them; NULL means anywhere.
    Column("expires_at", UtcDateTime),
    Column("networks", JSON),
    # Notes for the operator, written at most once per key per minute per process.
    Column("last_used_at", UtcDateTime),
    Column("last_refused_at", UtcDateTime),
    Column("last_refused_reason", String(200)),
    Index("ix_api_keys_account", "account_id", "livemode"),
)

webhook_secrets = Table(
    "webhook_secrets",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("account_id", String(40), ForeignKey("accounts.id"), nullable=False),
    # Migration 0012. Events of a mode are signed with that mode's secrets only:
    # a test key must not learn or roll what signs live events.
    Column("livemode", Boolean, nullable=False),
    # Sealed with the server key: signing needs the secret itself, a hash would not do.
    Column("sealed_secret", LargeBinary, nullable=False),
    # The sealed bytes are bound to the id they were sealed under: the row's own,
    # or for a copy (a secret copied to live mode by migration 0012) this one's.
    Column("copied_from", String(40)),
    Column("created_at", UtcDateTime, nullable=False),
    Column("expires_at", UtcDateTime),
    Index("ix_webhook_secrets_account", "account_id", "livemode"),
)

_PENDING_EXPIRY = "status = 'pending' AND expires_at IS NOT NULL"

verifications = Table(
    "verifications",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("account_id", String(40), ForeignKey("accounts.id"), nullable=False),
    Column("livemode", Boolean, nullable=False),
    # The destination as limits and the one pending verification count it: an E.164
    # number, or for `email` the address's mailbox (`email_address.mailbox_of`, at most
    # 254 characters; migration 0018).
    Column("to_number", String(254), nullable=False),
    # An email address as given, where its sends go; NULL for a number (migration 0018).
    Column("address", String(254)),
    # "" for an email address: it has no country (migration 0016).
    Column("country", String(2), nullable=False),
    Column("sender", String(60), nullable=False),
    Column("locale", String(35), nullable=False),
    Column("code_length", Integer, nullable=False),
    # The channels its latest send asked for, in order, comma-separated ("whatsapp,sms").
    Column("channels", String(40), nullable=False, server_default=text("'sms'")),
    Column("code_mac", LargeBinary, nullable=False),
    # Erased when the verification closes: only a pending one may need a resend.
    Column("sealed_code", LargeBinary),
    Column("status", String(24), nullable=False),
    Column("checks", Integer, nullable=False, server_default=text("0")),
    Column("sends", Integer, nullable=False, server_default=text("0")),
    Column("metadata", JSON, nullable=False),
    Column("webhook_url", String(2048)),
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    Column("expires_at", UtcDateTime, nullable=False),
    Column("last_sent_at", UtcDateTime, nullable=False),
    Column("approved_at", UtcDateTime),
    Column("canceled_at", UtcDateTime),
    Index("ix_verifications_list", "account_id", "livemode", "id"),
    Index("ix_verifications_to", "account_id", "livemode", "to_number", "id"),
    # One open verification per number or mailbox: a second create becomes a resend.
    Index(
        "uq_verifications_pending_to",
        "account_id",
        "livemode",
        "to_number",
        unique=True,
        sqlite_where=text("status = 'pending'"),
        postgresql_where=text("status = 'pending'"),
    ),
    # For the expiry sweep. Its predicate names expires_at so that only statements
    # comparing expires_at can use it: one that merely states status = 'pending'
    # (a lookup by number) must not walk it, which PostgreSQL did on tables
    # without statistics yet (tests/db/test_generic_plans.py).
    Index(
        "ix_verifications_due",
        "expires_at",
        sqlite_where=text(_PENDING_EXPIRY),
        postgresql_where=text(_PENDING_EXPIRY),
    ),
)

messages = Table(
    "messages",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("account_id", String(40), ForeignKey("accounts.id"), nullable=False),
    Column("livemode", Boolean, nullable=False),
    Column("to_number", String(16), nullable=False),
    Column("country", String(2), nullable=False),
    Column("sender", String(60), nullable=False),
    Column("locale", String(35), nullable=False),
    Column("status", String(16), nullable=False),
    # The client's code, sealed; erased once the last attempt has finished.
    Column("sealed_code", LargeBinary),
    Column("metadata", JSON, nullable=False),
    Column("webhook_url", String(2048)),
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    # Failover gives up at this moment: a code delivered later is no use.
    Column("expires_at", UtcDateTime, nullable=False),
    Index("ix_messages_list", "account_id", "livemode", "id"),
)

attempts = Table(
    "attempts",
    metadata,
    Column("id", String(40), primary_key=True),
    # Exactly one of verification_id and message_id is set.
    Column("verification_id", String(40), ForeignKey("verifications.id")),
    Column("message_id", String(40), ForeignKey("messages.id")),
    Column("carrier", String(60), nullable=False),
    Column("status", String(16), nullable=False),
    Column("error", JSON),
    Column("carrier_message_id", String(128)),
    Column("at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    # Delivery layer (migration 0004): the carriers of this send, in order, and
    # which one this attempt is; the dispatcher's lease; the receipt deadline.
    Column("route", JSON),
    Column("position", Integer, nullable=False, server_default=text("0")),
    # The channel of this attempt's carrier, and of each carrier of its route
    # (NULL: every one SMS), so failover knows the next one's (migration 0016).
    Column("channel", String(16), nullable=False, server_default=text("'sms'")),
    Column("route_channels", JSON),
    Column("lease_until", UtcDateTime),
    Column("lease_owner", String(40)),
    Column("report_due_at", UtcDateTime),
    # What the carrier bills once it accepted the SMS (migration 0015); NULL before.
    Column("segments", Integer),
    # An attempt has one owner: each index holds only its own kind (migration 0011).
    Index(
        "ix_attempts_verification",
        "verification_id",
        "id",
        sqlite_where=text("verification_id IS NOT NULL"),
        postgresql_where=text("verification_id IS NOT NULL"),
    ),
    Index(
        "ix_attempts_message",
        "message_id",
        "id",
        sqlite_where=text("message_id IS NOT NULL"),
        postgresql_where=text("message_id IS NOT NULL"),
    ),
    Index("ix_attempts_carrier_message", "carrier", "carrier_message_id"),
    # The hour of attempts measured routes read (migration 0014).
    Index("ix_attempts_at", "at"),
    Index(
        "ix_attempts_queued",
        "lease_until",
        sqlite_where=text("status = 'queued'"),
        postgresql_where=text("status = 'queued'"),
    ),
    Index(
        "ix_attempts_report_due",
        "report_due_at",
        sqlite_where=text("status = 'sent'"),
        postgresql_where=text("status = 'sent'"),
    ),
)

events = Table(
    "events",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("account_id", String(40), ForeignKey("accounts.id"), nullable=False),
    Column("livemode", Boolean, nullable=False),
    Column("type", String(64), nullable=False),
    Column("related_id", String(40), nullable=False),
    Column("payload", Text, nullable=False),
    Column("webhook_url", String(2048)),
    Column("delivery_status", String(16), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    # Webhook delivery state (migration 0002). attempt_count counts claims, not
    # answers: a worker killed mid-attempt still uses one up, so a row that
    # crashes every worker is dropped after the schedule instead of looping.
    Column("attempt_count", Integer, nullable=False, server_default=text("0")),
    Column("next_attempt_at", UtcDateTime),
    Column("lease_until", UtcDateTime),
    Column("lease_owner", String(40)),
    # The receiver the webhook URL names (`relay.webhooks.guard.endpoint`), the key
    # of the per-endpoint cap (migration 0010): a claim reads the due rows of the
    # endpoints with room by this index and never those of a full one.
    Column("endpoint", String(2048)),
    Index("ix_events_related", "account_id", "livemode", "related_id", "id"),
    Index("ix_events_list", "account_id", "livemode", "id"),
    Index(
        "ix_events_endpoint_due",
        "endpoint",
        "next_attempt_at",
        sqlite_where=text("delivery_status = 'pending'"),
        postgresql_where=text("delivery_status = 'pending'"),
    ),
)

webhook_attempts = Table(
    "webhook_attempts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("event_id", String(40), ForeignKey("events.id"), nullable=False),
    Column("number", Integer, nullable=False),
    Column("at", UtcDateTime, nullable=False),
    Column("status_code", Integer),
    Column("error", String(32)),
    Column("duration_ms", Integer),
    # The start of the receiver's answer, printable text only (`webhooks.excerpt`).
    Column("response_excerpt", String(200)),
    # One row per attempt number: a second worker can never record the same attempt.
    Index("uq_webhook_attempts_number", "event_id", "number", unique=True),
)

idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("account_id", String(40), ForeignKey("accounts.id"), nullable=False),
    Column("livemode", Boolean, nullable=False),
    Column("key", String(255), nullable=False),
    Column("request_hash", String(64), nullable=False),
    Column("status", String(16), nullable=False),
    # The resource the request changed, taken in the same transaction as the key.
    Column("resource_path", String(200)),
    Column("response_status", Integer),
    Column("response_headers", JSON),
    Column("response_body", LargeBinary),
    # The holder's lease: a crashed holder's key is taken over once it passes.
    Column("locked_until", UtcDateTime, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    UniqueConstraint("account_id", "livemode", "key", name="uq_idempotency_keys_scope"),
    Index("ix_idempotency_keys_created", "created_at"),
)

# The tables of counters, figures and housekeeping, on the same metadata.
from relay.db import bookkeeping_tables as bookkeeping_tables  # noqa: E402
