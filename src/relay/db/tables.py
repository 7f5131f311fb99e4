"""The schema, in SQLAlchemy Core. Migrations under `migrations/` create it."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    text,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.types import DateTime, TypeDecorator


class UtcDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes on both databases (SQLite keeps them as sortable text)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are not stored")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


metadata = MetaData()

accounts = Table(
    "accounts",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("name", String(200), nullable=False),
    Column("brand", String(60), nullable=False),
    Column("webotp_domain", String(253)),
    Column("created_at", UtcDateTime, nullable=False),
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
    Index("ix_api_keys_account", "account_id", "livemode"),
)

webhook_secrets = Table(
    "webhook_secrets",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("account_id", String(40), ForeignKey("accounts.id"), nullable=False),
    # Sealed with the server key: signing needs the secret itself, a hash would not do.
    Column("sealed_secret", LargeBinary, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("expires_at", UtcDateTime),
    Index("ix_webhook_secrets_account", "account_id"),
)

verifications = Table(
    "verifications",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("account_id", String(40), ForeignKey("accounts.id"), nullable=False),
    Column("livemode", Boolean, nullable=False),
    Column("to_number", String(16), nullable=False),
    Column("country", String(2), nullable=False),
    Column("sender", String(60), nullable=False),
    Column("locale", String(35), nullable=False),
    Column("code_length", Integer, nullable=False),
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
    # One open verification per number: a second create becomes a resend.
    Index(
        "uq_verifications_pending_to",
        "account_id",
        "livemode",
        "to_number",
        unique=True,
        sqlite_where=text("status = 'pending'"),
        postgresql_where=text("status = 'pending'"),
    ),
    Index(
        "ix_verifications_due",
        "expires_at",
        sqlite_where=text("status = 'pending'"),
        postgresql_where=text("status = 'pending'"),
    ),
)

attempts = Table(
    "attempts",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("verification_id", String(40), ForeignKey("verifications.id"), nullable=False),
    Column("carrier", String(60), nullable=False),
    Column("status", String(16), nullable=False),
    Column("error", JSON),
    Column("carrier_message_id", String(128)),
    Column("at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    Index("ix_attempts_verification", "verification_id", "id"),
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
    Index("ix_events_related", "account_id", "livemode", "related_id", "id"),
    Index("ix_events_list", "account_id", "livemode", "id"),
)
