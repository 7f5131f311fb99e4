"""Additive upserts a writer holds until its transaction's end (`Tx.add_up`).

Counters that every send adds to (the account's, its country's and prefix's) are
the same few rows for every unit of a batch. Each unit's additions are held in
memory, summed by row, and written at the batch's end, before its COMMIT, by one
statement per row for the whole batch: a batch of sends to one country writes its
country row once. What is held follows the transaction: a unit rolled back to its
savepoint takes its additions back, a rollback drops them all. A unit that reads
the counters adds what the batch holds to what it read (`Tx.held`), so every unit
sees the counts of the units before it, as when each wrote its own.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from relay.db.sql import Sql

Rows = dict[Any, dict[str, Any]]
# What the running unit added: the rows, the row's key, the counts it added (None: the
# unit made the row), and which parameters are counts.
Added = tuple[Rows, Any, dict[str, Any] | None, tuple[str, ...]]


class HeldSums:
    """The batch's additions by statement and row, and the running unit's, to undo."""

    def __init__(self) -> None:
        self._rows: dict[Sql, Rows] = {}
        self._unit: list[Added] = []
        self._keys: dict[Sql, Callable[[Mapping[str, Any]], Any]] = {}

    def add(self, statement: Sql, rows: Sequence[dict[str, Any]], counts: tuple[str, ...]) -> None:
        """Hold `rows` (taken over: the first of each key is the one summed into)."""
        key_of = self._keys.get(statement)
        if key_of is None:
            key_of = self._key_of(statement, counts)
        held = self._rows.get(statement)
        if held is None:
            held = self._rows[statement] = {}
        for params in rows:
            key = key_of(params)
            found = held.get(key)
            if found is None:
                held[key] = params
                self._unit.append((held, key, None, counts))
                continue
            for name in counts:
                found[name] += params[name]
            self._unit.append((held, key, params, counts))

    def _key_of(
        self, statement: Sql, counts: tuple[str, ...]
    ) -> Callable[[Mapping[str, Any]], Any]:
        names = [name for name in statement.names if name not in counts]
        if not names or len(names) == len(statement.names):
            raise ValueError(f"{statement!r}: a row needs its key and its counts")
        # One name's itemgetter answers the value, not a tuple: the same for every row.
        key_of: Callable[[Mapping[str, Any]], Any] = operator.itemgetter(*names)
        self._keys[statement] = key_of
        return key_of

    def held(self, statement: Sql) -> list[dict[str, Any]]:
        """The rows held for `statement`, each the sum of its additions so far."""
        held = self._rows.get(statement)
        return list(held.values()) if held else []

    def keep_unit(self) -> None:
        """The running unit succeeded: its additions stay the batch's."""
        if self._unit:
            self._unit = []

    def drop_unit(self) -> None:
        """The running unit rolled back: its additions are taken out again."""
        for held, key, params, counts in reversed(self._unit):
            if params is None:
                del held[key]
            else:
                found = held[key]
                for name in counts:
                    found[name] -= params[name]
        self._unit = []

    def drop(self) -> None:
        self._rows, self._unit = {}, []

    def take(self) -> list[tuple[Sql, list[dict[str, Any]]]]:
        """What to write before COMMIT, forgotten here: each statement's rows in the
        order of their keys, so that writers on PostgreSQL lock shared rows in one
        order and never wait for each other in a circle."""
        taken = [
            (statement, [held[key] for key in sorted(held)])
            for statement, held in self._rows.items()
            if held
        ]
        self._rows, self._unit = {}, []
        return taken
