"""A column read back in the one shape both databases' values take (`relay.db.sql`):
aware UTC datetimes, bools, and JSON documents as dicts and lists."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import orjson


def moment(value: Any) -> datetime:
    """A datetime column, aware UTC on either database."""
    if isinstance(value, str):
        # SQLite's text is UTC without an offset: read with one, as one C call (a
        # `replace(tzinfo=...)` afterwards costs four times the parse, on every column).
        try:
            found = datetime.fromisoformat(value + "+00:00")
        except ValueError:  # a text with an offset of its own
            found = None
        if found is not None and found.tzinfo is UTC:
            return found
        return datetime.fromisoformat(value).replace(tzinfo=UTC)
    if not isinstance(value, datetime):
        raise TypeError(f"not a datetime: {value!r}")
    if value.tzinfo is UTC:  # asyncpg's timestamptz: already the answer
        return value
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def moment_or_none(value: Any) -> datetime | None:
    return None if value is None else moment(value)


def document(value: Any) -> Any:
    """A JSON column: text on SQLite and for PostgreSQL's `json` through asyncpg.

    Read by orjson, which gives `json.loads`' answer for any text it reads, except an
    integer past 64 bits (a float to orjson): a text read with a float in it, and any
    orjson refuses (NaN, a lone surrogate), is `json.loads`' to read."""
    if isinstance(value, str | bytes):
        try:
            found = orjson.loads(value)
        except orjson.JSONDecodeError:
            return json.loads(value)
        kind = type(found)
        if kind is dict:
            flat = _FLAT.issuperset(map(type, found.values()))
        else:
            flat = kind is list and _FLAT.issuperset(map(type, found))
        return found if flat or _floatless(found) else json.loads(value)
    return value


def _floatless(found: Any) -> bool:
    """No float anywhere in a decoded document (the columns' lists and dicts hold none)."""
    kind = type(found)
    if kind is dict:
        items = found.values()
    elif kind is list:
        items = found
    else:
        return kind is not float
    kinds = set(map(type, items))
    if kinds <= _FLAT:
        return True
    return float not in kinds and all(map(_floatless, items))


_FLAT = frozenset({str, int, bool, type(None)})


def flag(value: Any) -> bool:
    """A boolean column (SQLite keeps 0 and 1)."""
    return bool(value)
