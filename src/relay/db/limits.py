"""How long a stored text may be: the length of its column in `relay.db.tables`.

PostgreSQL refuses a value longer than its `VARCHAR(n)` (asyncpg raises
mid-transaction) while SQLite stores it whole, so the CLI and the console
check what they store here first, the same on both databases, and say so in
one line. The numbers are read from the schema, never repeated.
"""

from __future__ import annotations

from functools import cache

from relay.db import tables
from relay.errors import ParameterInvalid


@cache
def column_length(table: str, column: str) -> int:
    """The most characters `table.column` holds (a `String(n)` column)."""
    length = tables.metadata.tables[table].c[column].type.length  # type: ignore[attr-defined]
    if not isinstance(length, int):
        raise TypeError(f"{table}.{column} has no length")
    return length


def check_length(value: str, table: str, column: str, *, param: str, label: str) -> str:
    """`value` when it fits `table.column`; ParameterInvalid naming `label` otherwise."""
    limit = column_length(table, column)
    if len(value) > limit:
        raise ParameterInvalid(
            f"{label} is at most {limit} characters, not {len(value)}.", param=param
        )
    return value
