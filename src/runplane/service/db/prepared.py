"""Statements of every run's path sent to SQLite's driver as compiled once.

Recording a run executes a handful of single-row statements (its row, first transition and
attempt, its count), and SQLAlchemy's execution of each (an execution context, the compiled
form's parameters processed by name, events) costs more CPU than SQLite's own work: about
0.23 ms of a run's 0.61 ms record, and as much of a read's 0.42 ms. On SQLite a
:class:`Prepared` statement is compiled once with SQLAlchemy, its parameters are processed by
the columns' own types (so a value is stored exactly as SQLAlchemy stores it: JSON by the
engine's serializer), and it is executed on the driver's cursor, counted as any statement
(:mod:`runplane.meters`); :class:`PreparedRead` reads rows so. Elsewhere (PostgreSQL) each is
executed by SQLAlchemy, as it was written.

A driver's error (a uid already recorded), or a value its column's type cannot store, is raised
as SQLAlchemy would raise it.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from sqlalchemy import Connection, Select, Table
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError, StatementError
from sqlalchemy.sql.dml import Insert, Update

from runplane import meters

_Compiled = tuple[str, tuple[str, ...], tuple[Callable[[Any], Any] | None, ...]]
#: What a statement SQLAlchemy must execute is compiled to (see :meth:`Prepared._compile`).
_BY_SQLALCHEMY: _Compiled = ("", (), ())


class Prepared:
    """``statement`` (an INSERT of ``table``, an upsert included, or an UPDATE) with values
    for exactly ``columns`` (the columns it sets and, by ``keys``, the parameters its WHERE
    names, each to the column whose type it has), compiled once per dialect."""

    def __init__(
        self,
        statement: Insert | Update,
        table: Table,
        columns: Sequence[str],
        keys: Mapping[str, str] | None = None,
    ) -> None:
        self._statement = statement
        self._table = table
        self._columns = list(columns)
        self._keys = dict(keys or {})
        self._kind = (("kind", "UPDATE" if isinstance(statement, Update) else "INSERT"),)
        self._sqlite: _Compiled | None = None
        self._lock = threading.Lock()

    def execute(self, connection: Connection, rows: list[dict[str, Any]]) -> None:
        """Execute it with ``rows`` (one or several, each naming exactly its columns) in the
        caller's transaction."""
        compiled = (
            (self._sqlite or self._compile(connection.dialect))
            if connection.dialect.name == "sqlite"
            else _BY_SQLALCHEMY
        )
        if compiled is _BY_SQLALCHEMY:
            connection.execute(self._statement, rows if len(rows) > 1 else rows[0])
            return
        sql, names, processors = compiled
        try:
            values = [
                tuple(
                    row[name] if process is None else process(row[name])
                    for name, process in zip(names, processors, strict=True)
                )
                for row in rows
            ]
        except (TypeError, ValueError) as error:  # a value its column's type cannot store
            raise StatementError(str(error), sql, rows, error) from error
        cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            if len(values) == 1:
                cursor.execute(sql, values[0])
            else:
                cursor.executemany(sql, values)
        except sqlite3.Error as error:
            raise DBAPIError.instance(sql, values, error, sqlite3.Error) from error
        finally:
            cursor.close()
        meters.count("sql_statements", self._kind)

    def _compile(self, dialect: Dialect) -> _Compiled:
        with self._lock:
            if self._sqlite is None:
                compiled = self._statement.compile(dialect=dialect, column_keys=self._columns)
                names = tuple(compiled.positiontup or ())
                if set(names) != set(self._columns):
                    # Parameters beyond the row's: defaults of the columns it leaves out,
                    # which SQLAlchemy fills in. It executes the statement, then.
                    self._sqlite = _BY_SQLALCHEMY
                    return self._sqlite
                processors = tuple(
                    self._table.c[self._keys.get(name, name)]
                    .type.dialect_impl(dialect)
                    .bind_processor(dialect)
                    for name in names
                )
                self._sqlite = (str(compiled), names, processors)
            return self._sqlite


_Read = tuple[str, tuple[str, ...], tuple[str, ...], tuple[Callable[[Any], Any] | None, ...]]
_SELECT = (("kind", "SELECT"),)


class PreparedRead:
    """``statement`` (a SELECT of whole rows of ``table``, with parameters of its columns'
    types) compiled once for SQLite: rows as objects with the columns as attributes, each
    value as SQLAlchemy reads it (JSON by the engine's reader, booleans as booleans).
    Elsewhere (PostgreSQL) it is executed by SQLAlchemy."""

    def __init__(self, statement: Select[Any], table: Table) -> None:
        self._statement = statement
        self._table = table
        self._sqlite: _Read | None = None
        self._lock = threading.Lock()

    def rows(self, connection: Connection, **values: Any) -> Iterable[Any]:
        """The rows it selects with these parameter values, in the caller's transaction."""
        if connection.dialect.name != "sqlite":
            return connection.execute(self._statement, values)
        sql, names, columns, processors = self._sqlite or self._compile(connection.dialect)
        cursor = connection.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(sql, tuple(values[name] for name in names))
            found = cursor.fetchall()
        except sqlite3.Error as error:
            raise DBAPIError.instance(sql, values, error, sqlite3.Error) from error
        finally:
            cursor.close()
        meters.count("sql_statements", _SELECT)
        return [
            SimpleNamespace(
                **{
                    column: value if process is None or value is None else process(value)
                    for column, value, process in zip(columns, row, processors, strict=True)
                }
            )
            for row in found
        ]

    def _compile(self, dialect: Dialect) -> _Read:
        with self._lock:
            if self._sqlite is None:
                compiled = self._statement.compile(dialect=dialect)
                columns = tuple(str(column.key) for column in self._statement.selected_columns)
                if set(columns) != set(self._table.c.keys()):  # not whole rows of the table
                    raise ValueError(f"{self._table.name}: columns {columns}")
                processors: tuple[Callable[[Any], Any] | None, ...] = tuple(
                    self._table.c[name].type.dialect_impl(dialect).result_processor(dialect, None)
                    for name in columns
                )
                names = tuple(compiled.positiontup or ())
                read = self._sqlite = (str(compiled), names, columns, processors)
            else:
                read = self._sqlite
            return read
