"""Statements of every run's path sent to SQLite's driver as compiled once.

Recording a run executes a handful of single-row statements (its row, first transition and
attempt, its count), and SQLAlchemy's execution of each (an execution context, the compiled
form's parameters processed by name, events) costs more CPU than SQLite's own work: about
0.25 ms of a run's 0.65 ms record. On SQLite a :class:`Prepared` statement is compiled once
with SQLAlchemy, its parameters are processed by the columns' own types (so a value is stored
exactly as SQLAlchemy stores it: JSON by the engine's serializer), and it is executed on the
driver's cursor, counted as any statement (:mod:`runplane.meters`). Elsewhere (PostgreSQL)
it is executed by SQLAlchemy, as it was written.

A driver's error (a uid already recorded) is raised as SQLAlchemy would raise it.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection, Table
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.dml import Insert

from runplane import meters

_Compiled = tuple[str, tuple[str, ...], tuple[Callable[[Any], Any] | None, ...]]


class Prepared:
    """``statement`` (an INSERT of ``table``, an upsert included) with values for exactly
    ``columns``, compiled once per dialect."""

    def __init__(self, statement: Insert, table: Table, columns: Sequence[str]) -> None:
        self._statement = statement
        self._table = table
        self._columns = list(columns)
        self._kind = (("kind", "INSERT"),)
        self._sqlite: _Compiled | None = None
        self._lock = threading.Lock()

    def execute(self, connection: Connection, rows: list[dict[str, Any]]) -> None:
        """Execute it with ``rows`` (one or several, each naming exactly its columns) in the
        caller's transaction."""
        if connection.dialect.name != "sqlite":
            connection.execute(self._statement, rows if len(rows) > 1 else rows[0])
            return
        sql, names, processors = self._sqlite or self._compile(connection.dialect)
        values = [
            tuple(
                row[name] if process is None else process(row[name])
                for name, process in zip(names, processors, strict=True)
            )
            for row in rows
        ]
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
                if set(names) != set(self._columns):  # a statement with other parameters
                    raise ValueError(f"{self._table.name}: parameters {names} for {self._columns}")
                processors = tuple(
                    self._table.c[name].type.dialect_impl(dialect).bind_processor(dialect)
                    for name in names
                )
                self._sqlite = (str(compiled), names, processors)
            return self._sqlite
