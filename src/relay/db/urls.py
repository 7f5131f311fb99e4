"""Database URLs: which database a URL names, and its forms for each tool."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import make_url


def is_postgres(url: str) -> bool:
    return make_url(url).get_backend_name() == "postgresql"


def shown(url: str) -> str:
    """The URL as it may be printed: any password is `***`."""
    return make_url(url).render_as_string(hide_password=True)


def sync_url(url: str) -> str:
    """The URL SQLAlchemy takes for migrations (PostgreSQL through asyncpg)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "postgresql":
        return parsed.set(drivername="postgresql+asyncpg").render_as_string(hide_password=False)
    return url


def postgres_dsn(url: str) -> str:
    """libpq's form, as asyncpg takes it."""
    parsed = make_url(url).set(drivername="postgresql")
    return parsed.render_as_string(hide_password=False)


def sqlite_path(url: str) -> str:
    database = make_url(url).database
    if not database:
        raise ValueError(f"not a SQLite file URL: {url}")
    return database


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names; None for PostgreSQL or an in-memory database."""
    parsed = make_url(url)
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return None
    # A `file:` URI names its file through sqlite's own URI rules.
    if database.startswith("file:"):
        return None
    return Path(database)
