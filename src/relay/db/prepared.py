"""Hot statements, compiled once per dialect and run on the driver's own cursor.

SQLAlchemy Core's execution path (execution context, parameter and result
set-up per call) cost 71 µs per statement on SQLite against 26 µs on the raw
cursor, about a fifth of a create's CPU; on PostgreSQL 200 µs against 69 µs
(docs/benchmarks.md). The statements on the create, check and retrieve paths
are built once anyway, so they are compiled once too, by SQLAlchemy, with its
dialect's own type processors; only the per-call bookkeeping is skipped.

What stays the same as `Connection.execute`: the SQL text, bind and result
processing (so UtcDateTime and friends behave identically), the transaction
(the same DB-API connection inside the caller's `begin()`), errors (wrapped
into SQLAlchemy's exception classes, IntegrityError included), and the
`before_cursor_execute` event, which the statement-count tests listen to.
Not supported, and refused when compiled: expanding IN parameters and
Python-side column defaults (Relay's tables have only server defaults).
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, exc
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import Executable
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.dml import Insert, Update

Processor = Callable[[Any], Any] | None


@dataclass(frozen=True)
class _Plan:
    compiled: SQLCompiler
    sql: str
    names: tuple[str, ...]
    binds: tuple[Processor, ...]
    results: tuple[Processor, ...]
    row: Any  # a namedtuple class, or None for statements that return no rows
    # Per position: the caller's key, whether the caller must give it, and the
    # value otherwise. None where construct_params is needed (callable values,
    # escaped names).
    sources: tuple[tuple[str, bool, Any], ...] | None

    def values(self, params: Mapping[str, Any]) -> tuple[Any, ...]:
        if self.sources is None:
            full = self.compiled.construct_params(params)
            return tuple(
                full[name] if process is None else process(full[name])
                for name, process in zip(self.names, self.binds, strict=True)
            )
        out = []
        for (key, required, default), process in zip(self.sources, self.binds, strict=True):
            if required and key not in params:
                raise exc.InvalidRequestError(f"A value is required for bind parameter {key!r}")
            value = params.get(key, default)
            out.append(value if process is None else process(value))
        return tuple(out)

    def rows(self, raw: Sequence[Any]) -> list[Any]:
        results, row = self.results, self.row
        if not any(results):
            return [row._make(r) for r in raw]
        return [
            row._make(
                value if process is None else process(value)
                for value, process in zip(r, results, strict=True)
            )
            for r in raw
        ]


class Rows:
    """The part of SQLAlchemy's Result that the stores use."""

    __slots__ = ("_rows", "rowcount")

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)

    def all(self) -> list[Any]:
        return list(self._rows)

    def first(self) -> Any | None:
        return self._rows[0] if self._rows else None

    def scalars(self) -> list[Any]:
        return [r[0] for r in self._rows]


class Prepared:
    """One Core statement, run through `execute(conn, params)` instead of `conn.execute`."""

    def __init__(self, statement: Executable) -> None:
        self.statement = statement
        # By dialect name and, for INSERT/UPDATE, by the keys given (which, as
        # with conn.execute, decide the columns an INSERT names).
        self._plans: dict[tuple[str, tuple[str, ...]], _Plan] = {}
        self._keyed = isinstance(statement, Insert | Update)

    def execute(self, conn: Connection, params: Mapping[str, Any] | None = None) -> Rows:
        params = params or {}
        plan = self._plan_for(conn, params)
        values = plan.values(params)
        return self._run(conn, plan, values, many=False)

    def execute_many(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """One statement, once per row (the driver's executemany); rows share their keys."""
        if not rows:
            return
        plan = self._plan_for(conn, rows[0])
        self._run(conn, plan, [plan.values(row) for row in rows], many=True)

    def _plan_for(self, conn: Connection, params: Mapping[str, Any]) -> _Plan:
        keys = tuple(params) if self._keyed else ()
        dialect = conn.dialect
        plan = self._plans.get((dialect.name, keys))
        if plan is None:
            plan = self._plans[(dialect.name, keys)] = _plan(self.statement, dialect, keys)
        return plan

    def _run(self, conn: Connection, plan: _Plan, values: Any, *, many: bool) -> Rows:
        dialect = conn.dialect
        dbapi_connection = conn.connection.dbapi_connection
        assert dbapi_connection is not None
        cursor = dbapi_connection.cursor()
        try:
            hooks = conn.dispatch.before_cursor_execute
            if hooks:
                hooks(conn, cursor, plan.sql, values, None, many)
            try:
                if many:
                    cursor.executemany(plan.sql, values)
                else:
                    cursor.execute(plan.sql, values)
            except dialect.loaded_dbapi.Error as error:
                invalidated = dialect.is_disconnect(error, dbapi_connection, cursor)
                if invalidated:
                    conn.invalidate(error)
                raise exc.DBAPIError.instance(
                    plan.sql,
                    values,
                    error,
                    dialect.loaded_dbapi.Error,
                    connection_invalidated=invalidated,
                    dialect=dialect,
                ) from error
            fetched = plan.rows(cursor.fetchall()) if plan.row is not None and not many else []
            return Rows(fetched, cursor.rowcount)
        finally:
            cursor.close()


def _plan(statement: Executable, dialect: Dialect, keys: tuple[str, ...]) -> _Plan:
    compiled = statement.compile(dialect=dialect, column_keys=list(keys) if keys else None)  # type: ignore[attr-defined]
    assert isinstance(compiled, SQLCompiler)
    if not compiled.positional or compiled.positiontup is None:
        raise ValueError(f"{dialect.name}: a positional paramstyle is expected")
    if compiled.insert_prefetch or compiled.update_prefetch:
        raise ValueError("Python-side column defaults are not supported here")
    names = tuple(compiled.positiontup)
    if any(compiled.binds[name].expanding for name in names):
        raise ValueError("expanding IN parameters are not supported here")
    binds = tuple(
        compiled.binds[name].type.dialect_impl(dialect).bind_processor(dialect) for name in names
    )
    # A SELECT's columns, or an INSERT/UPDATE's RETURNING (none without one).
    columns = list(getattr(statement, "exported_columns", ()))
    results = tuple(c.type.dialect_impl(dialect).result_processor(dialect, None) for c in columns)
    row = namedtuple("Row", [c.key for c in columns]) if columns else None
    return _Plan(compiled, compiled.string, names, binds, results, row, _sources(compiled, names))


def _sources(
    compiled: SQLCompiler, names: tuple[str, ...]
) -> tuple[tuple[str, bool, Any], ...] | None:
    """Where each position's value comes from, as construct_params would find it."""
    if compiled.escaped_bind_names:
        return None
    sources = []
    for name in names:
        bind = compiled.binds[name]
        if bind.callable is not None:
            return None
        # An anonymous bind (a literal in the statement) is found by its compiled
        # name, which callers never pass; a named one by the key they pass.
        key = name if bind.key.startswith("%(") else bind.key
        sources.append((key, bool(bind.required), bind.value))
    return tuple(sources)
