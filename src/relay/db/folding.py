"""A unit of work whose writes are folded into one statement, under a condition.

A folded unit reads nothing: it only inserts (an `INSERT … VALUES (…)`, with or
without `ON CONFLICT`), through `executemany`, and its writes are recorded
instead of run. `fold` then makes one statement of them for PostgreSQL, a
data-modifying CTE per row, each selecting its values from a `gate`: a
`SELECT` that returns a row only while the condition the unit was decided on
still holds. The statement answers whether the gate opened; if it did not,
nothing was written. One statement commits as a whole or not at all, so it
can run in autocommit (`PostgresDb.write_folded`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from relay.db.sql import Channels, Dialect, Params, Row, Sql

# A quoted literal, a PostgreSQL cast, or a parameter (as `relay.db.sql` reads them).
_TOKENS = re.compile(r"'(?:[^']|'')*'|::|(?<![:\w]):([A-Za-z_]\w*)")
_VALUES = " VALUES ("


@dataclass(frozen=True)
class Gate:
    """`sql`: a `SELECT` that returns one row while the writes may be made, none otherwise."""

    sql: Sql
    params: Params


class FoldingTx(Channels):
    """Records a unit's inserts instead of running them; any other statement is refused."""

    def __init__(self, dialect: Dialect) -> None:
        super().__init__()
        self.dialect = dialect
        self.parts: list[tuple[Sql, list[Params]]] = []

    async def executemany(self, statement: Sql, rows: Sequence[Params]) -> None:
        if rows:
            self.parts.append((statement, list(rows)))

    async def execute(self, statement: Sql, params: Params | None = None) -> int:
        raise RuntimeError(f"a folded unit only inserts, with executemany: {statement!r}")

    async def fetch(self, statement: Sql, params: Params | None = None) -> list[Row]:
        raise RuntimeError(f"a folded unit reads nothing: {statement!r}")

    async def fetchrow(self, statement: Sql, params: Params | None = None) -> Row | None:
        raise RuntimeError(f"a folded unit reads nothing: {statement!r}")


# One statement per shape (the gate, and each insert with its number of rows).
_FOLDED: dict[tuple[Sql, tuple[tuple[Sql, int], ...]], Sql] = {}


def fold(gate: Gate, parts: Sequence[tuple[Sql, Sequence[Params]]]) -> tuple[Sql, dict[str, Any]]:
    """One statement for the gate and every row of every insert, and its parameters.
    It returns one row, `written`: 1 if the gate opened (every row was written), else 0."""
    key = (gate.sql, tuple((statement, len(rows)) for statement, rows in parts))
    statement = _FOLDED.get(key)
    if statement is None:
        statement = _FOLDED[key] = _folded(gate.sql, key[1])
    params = {f"{name}__g": value for name, value in gate.params.items()}
    n = 0
    for _, rows in parts:
        for row in rows:
            params.update({f"{name}__{n}": value for name, value in row.items()})
            n += 1
    return statement, params


def _folded(gate: Sql, shapes: Sequence[tuple[Sql, int]]) -> Sql:
    ctes = [f"gate AS ({_renamed(_postgres_text(gate), 'g')})"]
    for statement, count in shapes:
        selected = _selected_from_gate(_postgres_text(statement))
        for _ in range(count):
            n = len(ctes) - 1
            ctes.append(f"w{n} AS ({_renamed(selected, str(n))})")
    return Sql(f"WITH {', '.join(ctes)} SELECT count(*) AS written FROM gate")


def _postgres_text(statement: Sql) -> str:
    """Its text, which must be PostgreSQL's too (a fold is made of `:name` texts)."""
    rendered = _TOKENS.sub(_placeholder(statement.postgres_names), statement.text)
    if rendered != statement.postgres:
        raise ValueError(f"{statement!r} has a PostgreSQL text of its own: it cannot be folded")
    return statement.text


def _placeholder(names: tuple[str, ...]) -> Any:
    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        return match.group(0) if name is None else f"${names.index(name) + 1}"

    return number


def _renamed(text: str, suffix: str) -> str:
    def rename(match: re.Match[str]) -> str:
        name = match.group(1)
        return match.group(0) if name is None else f":{name}__{suffix}"

    return _TOKENS.sub(rename, text)


def _selected_from_gate(insert: str) -> str:
    """`INSERT INTO t (…) VALUES (v…) rest` as `INSERT INTO t (…) SELECT v… FROM gate rest`."""
    if not insert.upper().startswith("INSERT INTO ") or insert.count(_VALUES) != 1:
        raise ValueError(f"only an INSERT … VALUES (…) of one row folds: {insert!r}")
    start = insert.index(_VALUES) + len(_VALUES)
    end = _closing(insert, start)
    head, values, rest = insert[: start - len(_VALUES)], insert[start:end], insert[end + 1 :]
    return f"{head} SELECT {values} FROM gate{rest}"


def _closing(text: str, start: int) -> int:
    """Where the parenthesis opened just before `start` closes (quoted literals skipped)."""
    depth = 1
    position = start
    while position < len(text):
        char = text[position]
        if char == "'":
            position = text.index("'", position + 1)
            while text.startswith("''", position):
                position = text.index("'", position + 2)
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return position
        position += 1
    raise ValueError(f"unbalanced parentheses: {text!r}")
