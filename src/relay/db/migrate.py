"""Apply the Alembic migrations shipped inside the package."""

from __future__ import annotations

import asyncio
import re
import socket
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, create_engine, inspect
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.ext.asyncio import create_async_engine

from relay.db.urls import is_postgres, shown, sqlite_file, sync_url

_SCRIPTS = Path(__file__).with_name("migrations")
# SQLAlchemy names the driver's exception class before its message.
_CLASS_PREFIX = re.compile(r"^<class '[^']*'>:\s*")


class DatabaseUnavailable(Exception):
    """The database cannot be reached, opened or written; the message is one line for a user."""


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(_SCRIPTS))
    config.attributes["relay_url"] = url
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate to `revision`; DatabaseUnavailable when the database cannot be used at all."""
    _require_supported(url)
    try:
        directory = sqlite_file(url)
        if directory is not None:
            # A SQLite file can only be made in a directory that exists.
            directory.parent.mkdir(parents=True, exist_ok=True)
        command.upgrade(alembic_config(url), revision)
    except (DBAPIError, OSError) as error:
        raise DatabaseUnavailable(f"{cause(url, error)} ({shown(url)})") from error


def installed(url: str) -> bool:
    """Whether `url` holds a database Relay has migrated; never makes a file or a schema."""
    _require_supported(url)
    file = sqlite_file(url)
    if file is not None and not file.is_file():
        return False
    try:
        if is_postgres(url):
            return asyncio.run(_postgres_installed(url))
        engine = create_engine(url)
        try:
            with engine.connect() as connection:
                return _has_versions(connection)
        finally:
            engine.dispose()
    except (DBAPIError, OSError) as error:
        raise DatabaseUnavailable(f"{cause(url, error)} ({shown(url)})") from error


async def _postgres_installed(url: str) -> bool:
    engine = create_async_engine(sync_url(url))
    try:
        async with engine.connect() as connection:
            return await connection.run_sync(_has_versions)
    finally:
        await engine.dispose()


def _has_versions(connection: Connection) -> bool:
    return inspect(connection).has_table("alembic_version")


def _require_supported(url: str) -> None:
    try:
        backend = make_url(url).get_backend_name()
    except (ArgumentError, ValueError) as error:
        # Not echoed: a URL that does not parse cannot have its password masked.
        raise DatabaseUnavailable(f"the database URL is not well-formed ({error})") from error
    if backend not in ("sqlite", "postgresql"):
        raise DatabaseUnavailable(
            f"{backend}:// is not supported; use a sqlite:// or postgresql:// URL ({shown(url)})"
        )


def downgrade(url: str, revision: str = "base") -> None:
    command.downgrade(alembic_config(url), revision)


def head_revision() -> str:
    """The newest migration shipped: what a database at head has recorded."""
    head = ScriptDirectory.from_config(alembic_config("")).get_current_head()
    assert head is not None, "the package ships its migrations"
    return head


def cause(url: str, error: BaseException) -> str:
    """Why the database at `url` cannot be used, in one line."""
    if isinstance(error, DBAPIError):
        text = _CLASS_PREFIX.sub("", str(error.orig))
    elif isinstance(error, socket.gaierror):
        text = f"its host name does not resolve: {error.strerror or error}"
    elif isinstance(error, ConnectionRefusedError):
        text = "connection refused; is PostgreSQL running and listening there?"
    elif isinstance(error, TimeoutError):
        text = "no answer before the connection timed out"
    elif isinstance(error, OSError) and error.filename is not None:
        text = f"{error.strerror or error}: {error.filename}"
    else:
        text = str(error) or type(error).__name__
    if not is_postgres(url) and "unable to open database file" in text:
        text += "; does its directory exist and is it writable?"
    # A driver's message may run over lines (DETAIL, HINT): the user reads one.
    return " ".join(text.split())
