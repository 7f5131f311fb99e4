"""Database URLs: which database a URL names, and its forms for each tool."""

from __future__ import annotations

from sqlalchemy.engine import make_url


def is_postgres(url: str) -> bool:
    return make_url(url).get_backend_name() == "postgresql"


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
