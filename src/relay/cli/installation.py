"""Whether the settings point at an installation that exists, before a command may use it."""

from __future__ import annotations

from relay.config import Settings
from relay.db.migrate import DatabaseUnavailable, installed
from relay.db.urls import shown

MAKES_ONE = "`relay serve`, `relay migrate` or `relay accounts create` makes one"


def missing(settings: Settings) -> str | None:
    """One line saying why there is no installation here, or None when there is one.

    Without `code_key` set, the installation's code key lives in the data directory: a
    mistyped one beside a shared database (PostgreSQL) would get a key of its own, which
    opens none of the codes the installation sealed."""
    url = settings.resolved_database_url
    where = f"data directory {settings.data_dir.resolve()}, database {shown(url)}"
    try:
        if not installed(url):
            return f"no Relay installation here ({where}): the database has none; {MAKES_ONE}"
    except DatabaseUnavailable as error:
        return f"database: {error}"
    if not settings.code_key and not settings.data_dir.is_dir():
        lacking = "no data directory and no code_key set"
        return f"no Relay installation here ({where}): {lacking}; {MAKES_ONE}"
    return None
