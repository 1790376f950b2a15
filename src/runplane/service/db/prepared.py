"""Statements of every run's path sent to the database's driver as compiled once.

Recording a run executes a handful of single-row statements (its row, first transition and
attempt, its count), and SQLAlchemy's execution of each (an execution context, the compiled
form's parameters processed by name, events) costs more CPU than SQLite's own work: about
0.23 ms of a run's 0.61 ms record, and as much of a read's 0.42 ms. On PostgreSQL it was as
much CPU as psycopg's own work (a record 0.86 ms, 0.55 sent so; the server's round trip is
wall time). A :class:`Prepared` statement is compiled once per dialect with SQLAlchemy, its
parameters are processed by the columns' own types (so a value is stored exactly as SQLAlchemy
stores it: JSON by the engine's serializer), and it is executed on the driver's cursor
(SQLite's ``sqlite3``, PostgreSQL's psycopg), counted as any statement
(:mod:`runplane.meters`); :class:`PreparedRead` reads rows so, and :class:`PreparedIn` the
rows of a list of keys (each burst of runs' events reads its runs so).

A driver's error (a uid already recorded), or a value its column's type cannot store, is raised
as SQLAlchemy would raise it; a connection the server closed is invalidated as SQLAlchemy
invalidates it, so the pool replaces it and the error is an outage (:mod:`..outage`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from sqlalchemy import BindParameter, Connection, Select, Table, bindparam
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError, StatementError
from sqlalchemy.sql.dml import Insert, Update

from runplane import meters

#: A compiled statement: its SQL, whether its parameters are positional (SQLite's ``?``) or
#: by name (psycopg's ``%(name)s``), their names, and each one's processor.
_Compiled = tuple[str, bool, tuple[str, ...], tuple[Callable[[Any], Any] | None, ...]]
#: What a statement SQLAlchemy must execute is compiled to (see :meth:`Prepared._compile`).
_BY_SQLALCHEMY: _Compiled = ("", False, (), ())


def _parameters(compiled: Any) -> tuple[bool, tuple[str, ...]] | None:
    """Whether the compiled statement's parameters are positional, and their names in order;
    ``None`` for a form this module does not send itself (escaped names, parameters rendered
    at execution such as an ``IN`` list's, or a paramstyle other than SQLite's and
    psycopg's)."""
    if compiled.literal_execute_params or compiled.post_compile_params:
        return None
    if compiled.positiontup is not None:
        return True, tuple(compiled.positiontup)
    if compiled.escaped_bind_names or compiled.dialect.paramstyle != "pyformat":
        return None
    return False, tuple(compiled.binds)


def _key(dialect: Dialect) -> type[Dialect]:
    """What a compiled form is kept under: its dialect's class, which names the driver too
    (psycopg's SQL is not psycopg2's), looked up with no string made on every statement."""
    return type(dialect)


def _send(
    connection: Connection, sql: str, values: list[Any], kind: meters.Labels, many: bool
) -> Any:
    """``sql`` executed on the driver's own cursor of ``connection`` with ``values`` (one
    set, or each of several when ``many``), counted as ``kind``; the cursor, its rows not
    read yet. The caller closes it. A connection outside a transaction begins one, as
    SQLAlchemy's execution would (the caller's commit ends it)."""
    if not connection.in_transaction():
        connection.begin()
    meters.count("sql_statements", kind)
    dbapi = connection.connection.driver_connection
    cursor = None
    try:
        cursor = dbapi.cursor()  # type: ignore[union-attr]
        if many:
            cursor.executemany(sql, values)
        else:
            cursor.execute(sql, values[0])
    except BaseException as error:
        if cursor is not None:
            cursor.close()
        if isinstance(error, connection.dialect.loaded_dbapi.Error):
            raise _driver_error(connection, sql, values, error, dbapi, many) from error
        if not isinstance(error, Exception):  # interrupted midway: the connection's state
            connection.invalidate(error)  # is unknown, and SQLAlchemy drops it so too
        raise
    return cursor


def _driver_error(
    connection: Connection, sql: str, values: list[Any], error: Any, dbapi: Any, many: bool
) -> StatementError:
    """``error`` as SQLAlchemy raises a driver's: wrapped, and, where it says the connection
    is gone, with the connection invalidated and every connection the pool opened before it
    too, as SQLAlchemy's own execution does (a server that restarted closed them all: each
    would fail a transaction of its own otherwise). The pool's ``_invalidate`` is the one
    SQLAlchemy calls there; it has no public name."""
    dialect = connection.dialect
    gone = dialect.is_disconnect(error, dbapi, None)
    if gone and not connection.invalidated:
        connection.engine.pool._invalidate(connection.connection, error)
        connection.invalidate(error)
    wrapped: StatementError = DBAPIError.instance(
        sql,
        values if many else values[0],
        error,
        dialect.loaded_dbapi.Error,
        hide_parameters=connection.engine.hide_parameters,
        connection_invalidated=gone,
        dialect=dialect,
        ismulti=many,
    )
    return wrapped


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
        self._compiled: dict[type[Dialect], _Compiled] = {}
        self._lock = threading.Lock()

    def execute(self, connection: Connection, rows: list[dict[str, Any]]) -> None:
        """Execute it with ``rows`` (one or several, each naming exactly its columns) in the
        caller's transaction."""
        dialect = connection.dialect
        compiled = self._compiled.get(_key(dialect)) or self._compile(dialect)
        if compiled is _BY_SQLALCHEMY:
            connection.execute(self._statement, rows if len(rows) > 1 else rows[0])
            return
        sql, positional, names, processors = compiled
        try:
            processed = [
                tuple(
                    row[name] if process is None else process(row[name])
                    for name, process in zip(names, processors, strict=True)
                )
                for row in rows
            ]
        except (TypeError, ValueError) as error:  # a value its column's type cannot store
            raise StatementError(str(error), sql, rows, error) from error
        values = processed if positional else [dict(zip(names, v, strict=True)) for v in processed]
        _send(connection, sql, values, self._kind, many=len(values) > 1).close()

    def _compile(self, dialect: Dialect) -> _Compiled:
        with self._lock:
            known = self._compiled.get(_key(dialect))
            if known is not None:
                return known
            # The form for several rows, for one too: no RETURNING of ids nobody reads.
            compiled = self._statement.compile(
                dialect=dialect, column_keys=self._columns, for_executemany=True
            )
            parameters = _parameters(compiled)
            if parameters is None or set(parameters[1]) != set(self._columns):
                # Parameters beyond the row's (defaults of the columns it leaves out, which
                # SQLAlchemy fills in), or a form not sent here: SQLAlchemy executes it.
                self._compiled[_key(dialect)] = _BY_SQLALCHEMY
                return _BY_SQLALCHEMY
            positional, names = parameters
            processors = tuple(
                self._table.c[self._keys.get(name, name)]
                .type.dialect_impl(dialect)
                .bind_processor(dialect)
                for name in names
            )
            known = self._compiled[_key(dialect)] = (str(compiled), positional, names, processors)
            return known


#: A compiled read: its SQL, whether its parameters are positional, their names, and the
#: columns it reads.
_Read = tuple[str, bool, tuple[str, ...], tuple[str, ...]]
_Processors = tuple[Callable[[Any], Any] | None, ...]
#: A compiled read of a list (see :class:`PreparedIn`): its SQL, its parameters' names (none
#: where they are positional), where each parameter's value comes from, and the columns read.
_In = tuple[
    str,
    tuple[str, ...],
    tuple[tuple[int, Any, Callable[[Any], Any] | None], ...],
    tuple[tuple[str, Any], ...],
]
_SELECT = (("kind", "SELECT"),)


def _fetched(
    connection: Connection,
    sql: str,
    sent: Any,
    known: dict[type[Dialect], _Processors],
    types: Callable[[], Sequence[Any]],
) -> tuple[list[Any], _Processors]:
    """``sql``'s rows with ``sent``, and each column's result processor: kept in ``known``
    by dialect once the first read's cursor described the columns (PostgreSQL's depends on
    the type the server answers, as SQLAlchemy's does; ``types()``: the columns' types)."""
    dialect = connection.dialect
    cursor = _send(connection, sql, [sent], _SELECT, many=False)
    try:
        found = cursor.fetchall()
        processors = known.get(_key(dialect)) or known.setdefault(
            _key(dialect),
            tuple(
                kind.dialect_impl(dialect).result_processor(dialect, described[1])
                for kind, described in zip(types(), cursor.description, strict=True)
            ),
        )
    except connection.dialect.loaded_dbapi.Error as error:
        dbapi = connection.connection.driver_connection
        raise _driver_error(connection, sql, [sent], error, dbapi, many=False) from error
    finally:
        cursor.close()
    return found, processors


class PreparedRead:
    """``statement`` (a SELECT of whole rows of ``table``, with parameters of its columns'
    types) compiled once per dialect: rows as objects with the columns as attributes, each
    value as SQLAlchemy reads it (JSON by the engine's reader, booleans as booleans)."""

    def __init__(self, statement: Select[Any], table: Table) -> None:
        self._statement = statement
        self._table = table
        self._compiled: dict[type[Dialect], _Read] = {}
        #: Each column's result processor, by dialect: known from the first read's cursor
        #: (PostgreSQL's depends on the type the server answers, as SQLAlchemy's does).
        self._processors: dict[type[Dialect], _Processors] = {}
        self._lock = threading.Lock()

    def rows(self, connection: Connection, **values: Any) -> Iterable[Any]:
        """The rows it selects with these parameter values, in the caller's transaction."""
        dialect, key = connection.dialect, _key(connection.dialect)
        sql, positional, names, columns = self._compiled.get(key) or self._compile(dialect)
        sent = tuple(values[name] for name in names) if positional else values
        found, processors = _fetched(
            connection,
            sql,
            sent,
            self._processors,
            lambda: [self._table.c[c].type for c in columns],
        )
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
            known = self._compiled.get(_key(dialect))
            if known is not None:
                return known
            compiled = self._statement.compile(dialect=dialect)
            columns = tuple(str(column.key) for column in self._statement.selected_columns)
            if set(columns) != set(self._table.c.keys()):  # not whole rows of the table
                raise ValueError(f"{self._table.name}: columns {columns}")
            parameters = _parameters(compiled)
            if parameters is None:
                raise ValueError(f"{self._table.name}: parameters of {compiled}")
            positional, names = parameters
            known = self._compiled[_key(dialect)] = (str(compiled), positional, names, columns)
            return known


class PreparedIn:
    """A SELECT whose WHERE takes a list of values (``IN``), ``statement(parameters)`` made
    with one parameter per value, compiled once per dialect and per length of list: a list
    is sent at the next power of two of its length, filled up with its first value (a value
    repeated in ``IN`` matches the rows it matched once), so a few forms serve every list.
    SQLAlchemy renders such a list afresh at every execution; every burst of runs' events
    reads its runs so. Rows come back as dicts by the columns' keys, each value as
    SQLAlchemy reads it."""

    def __init__(self, statement: Callable[[list[BindParameter[Any]]], Select[Any]]) -> None:
        self._statement = statement
        self._compiled: dict[tuple[type[Dialect], int], _In] = {}
        #: Each column's result processor, by dialect, known from the first read's cursor.
        self._processors: dict[type[Dialect], _Processors] = {}
        self._lock = threading.Lock()

    def rows(self, connection: Connection, values: Sequence[Any]) -> list[dict[str, Any]]:
        """The rows it selects for ``values``, in the caller's transaction."""
        if not values:
            return []  # IN of nothing matches nothing
        dialect = connection.dialect
        size = 1 << (len(values) - 1).bit_length()
        key = (_key(dialect), size)
        sql, names, slots, columns = self._compiled.get(key) or self._compile(dialect, size)
        given, processed = len(values), []
        for at, fixed, process in slots:
            if at < 0:
                processed.append(fixed)
                continue
            value = values[at] if at < given else values[0]
            processed.append(value if process is None else process(value))
        sent = dict(zip(names, processed, strict=True)) if names else tuple(processed)
        found, processors = _fetched(
            connection, sql, sent, self._processors, lambda: [kind for _, kind in columns]
        )
        return [
            {
                name: value if process is None or value is None else process(value)
                for (name, _), value, process in zip(columns, row, processors, strict=True)
            }
            for row in found
        ]

    def _compile(self, dialect: Dialect, size: int) -> _In:
        """The SQL for a list of ``size``, the parameters' names (empty where they are
        positional), and for each parameter where its value comes from: the list's value at
        an index, or a constant of the statement (its value processed already); each with
        its processor."""
        with self._lock:
            known = self._compiled.get((_key(dialect), size))
            if known is not None:
                return known
            listed = {f"in_{n}": n for n in range(size)}
            statement = self._statement([bindparam(name) for name in listed])
            compiled = statement.compile(dialect=dialect)
            form = _parameters(compiled)
            if form is None or not set(listed) <= set(form[1]):
                raise ValueError(f"parameters of {compiled}")
            positional, names = form
            slots = []
            for name in names:
                bound = compiled.binds[name]
                process = bound.type.dialect_impl(dialect).bind_processor(dialect)
                if name in listed:
                    slots.append((listed[name], None, process))
                else:
                    value = bound.effective_value
                    slots.append((-1, value if process is None else process(value), None))
            columns = tuple((str(c.key), c.type) for c in statement.selected_columns)
            known = self._compiled[_key(dialect), size] = (
                str(compiled),
                () if positional else names,
                tuple(slots),
                columns,
            )
            return known
