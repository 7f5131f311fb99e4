"""The one MetaData every table of the schema is declared on (`relay.db.tables`)."""

from __future__ import annotations

from sqlalchemy import MetaData

metadata = MetaData()
