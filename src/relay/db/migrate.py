"""Apply the Alembic migrations shipped inside the package."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory

_SCRIPTS = Path(__file__).with_name("migrations")


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(_SCRIPTS))
    config.attributes["relay_url"] = url
    return config


def upgrade(url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str = "base") -> None:
    command.downgrade(alembic_config(url), revision)


def head_revision() -> str:
    """The newest migration shipped: what a database at head has recorded."""
    head = ScriptDirectory.from_config(alembic_config("")).get_current_head()
    assert head is not None, "the package ships its migrations"
    return head
