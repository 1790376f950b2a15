"""The run database: SQLAlchemy 2 over SQLite (WAL) by default, PostgreSQL by URL.

The schema is owned by Alembic migrations. Opening a database checks its revision with one
query and imports Alembic only when an upgrade is due, so a warm start stays fast.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import orjson
from sqlalchemy import Engine, create_engine, event, inspect, make_url, text
from sqlalchemy.exc import (
    ArgumentError,
    DBAPIError,
    DisconnectionError,
    NoSuchModuleError,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.orm import Session, sessionmaker

from runplane import meters
from runplane.errors import ConfigError
from runplane.service.db.models import Base
from runplane.spec.bounds import escape_surrogates, may_hold_long_integer

MIGRATIONS = Path(__file__).parent / "migrations"
#: The newest migration; bump together with a new file in ``migrations/versions``.
HEAD = "0015"


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


def _sqlite_pragmas(connection: object, _record: object) -> None:
    # The driver's own implicit transactions are turned off so that ours can be IMMEDIATE.
    connection.isolation_level = None  # type: ignore[attr-defined]
    cursor = connection.cursor()  # type: ignore[attr-defined]
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    # A checkpoint copies each page changed since the last one, once, however many commits
    # changed it; every run changes the same index pages (the newest runs'), so at SQLite's
    # 1,000 pages a busy service copied them again every few dozen runs. The log grows to
    # about 40 MB between checkpoints.
    cursor.execute("PRAGMA wal_autocheckpoint=10000")
    cursor.close()


_READ_ONLY, _LOCKED = "runplane_read_only", "runplane_write_locked"
#: Execution options of an engine (``engine.execution_options(**READ_ONLY)``) whose
#: transactions only read: on SQLite they take no write lock.
READ_ONLY = {_READ_ONLY: True}


class _Writers:
    """Take SQLite's write lock when a transaction starts, not at its first write, and let the
    threads of this process queue for it on a lock of their own.

    In WAL mode a transaction that read first and then writes fails at once with "database is
    locked" if another process wrote in between, whatever the busy timeout; taking the lock up
    front makes concurrent processes wait for each other instead. Within one process, waiting
    in SQLite's busy handler would mean sleeping 1, 2, 5, 10... ms and retrying; a thread lock
    wakes the next transaction the moment the last one ends (processes still use the busy
    timeout between them).
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()

    def begin(self, connection: Any) -> None:
        if connection.get_execution_options().get(_READ_ONLY):
            # A deferred transaction: a snapshot of the database as of its first read, taken
            # beside any writer (WAL), holding no lock a writer waits for.
            _begin(connection, "BEGIN")
            return
        self._lock.acquire()
        try:
            _begin(connection, "BEGIN IMMEDIATE")
        except BaseException:
            self._lock.release()
            raise
        connection.info[_LOCKED] = True

    def end(self, connection: Any) -> None:
        if connection.info.pop(_LOCKED, False):
            self._lock.release()


def _begin(connection: Any, statement: str) -> None:
    """Send ``statement`` on the driver's connection itself: every transaction on SQLite
    begins here (a run's record, each burst of its events, each read), and SQLAlchemy's
    execution of a statement costs several times SQLite's of ``BEGIN``. It is counted and
    its errors are raised as if SQLAlchemy had executed it."""
    meters.count("sql_statements", _BEGIN)
    try:
        connection.connection.driver_connection.execute(statement)
    except sqlite3.Error as error:
        raise DBAPIError.instance(statement, None, error, sqlite3.Error) from error


_BEGIN = (("kind", "BEGIN"),)


def _in_memory(url: str) -> bool:
    """Whether ``url`` names an in-memory SQLite database, which every connection of the pool
    would see empty and separate: runs recorded by one request unknown to the next."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return False
    database = parsed.database or ""
    return (
        database in ("", ":memory:")
        or parsed.query.get("mode") == "memory"
        or (database.startswith("file:") and "mode=memory" in database)
    )


def connect(url: str) -> Engine:
    """An engine for ``url`` with the schema at the newest migration.

    A SQLite database is created readable by its owner only (its write-ahead log and shared
    memory files take the database file's mode). Errors name the URL with its password hidden.
    """
    try:
        if _in_memory(url):
            raise ConfigError(
                f"service.database_url: {unquote(_hidden(url))} is an in-memory database, "
                "which each of the service's connections would see empty and separate; give a file "
                "(example: sqlite:////var/lib/runplane/runplane.db) or a PostgreSQL URL"
            )
        if url.startswith("sqlite:///"):
            path = Path(url.removeprefix("sqlite:///"))
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not path.exists():
                path.touch(mode=0o600)
            engine = create_engine(
                url,
                connect_args={"check_same_thread": False, "timeout": 30},
                json_serializer=stored_text,
                json_deserializer=stored_json,
                **_POOL,
            )
            event.listen(engine, "connect", _sqlite_pragmas)
            writers = _Writers()
            event.listen(engine, "begin", writers.begin)
            event.listen(engine, "commit", writers.end)
            event.listen(engine, "rollback", writers.end)
        else:
            engine = create_engine(
                url,
                json_serializer=stored_text,
                json_deserializer=stored_json,
                **_POOL,
            )
            event.listen(engine, "checkout", _ping_if_idle)
            event.listen(engine, "checkin", _note_checkin)
        event.listen(engine, "before_cursor_execute", _count_statement)
        # On SQLite the first connection is made under the lock too: its switch to WAL takes
        # the file's exclusive lock, which SQLite refuses at once ("database is locked"),
        # whatever the busy timeout, while replicas starting together read it.
        sqlite = url.startswith("sqlite:///")
        if sqlite or current_revision(engine) != HEAD:
            with _migration_lock(engine):
                found = current_revision(engine)
                if found != HEAD:  # another process may have just migrated
                    _refuse_unknown(url, found)
                    upgrade(engine)
    except (ArgumentError, NoSuchModuleError, ModuleNotFoundError, ValueError) as error:
        # SQLAlchemy raises ValueError for parts that do not parse (a port that is no number).
        raise ConfigError(_database_error(url, error)) from None
    except OperationalError as error:
        reason = " ".join(str(error.orig).split())
        raise ConfigError(f"service.database_url: cannot open {_hidden(url)}: {reason}") from None
    return engine


#: Connections kept open: as many as the service's threads use at once (its 16 submission
#: threads, the recorder, the monitor and its loops), and as many again beyond those for a
#: burst of requests (closed when returned). With SQLAlchemy's default of 5 kept, every burst of
#: submissions opened connections and closed them again: on PostgreSQL a server process started
#: and ended per connection, on the path of the run (docs/benchmarks.md, "Scale"). The one
#: returned last is handed out first: on SQLite each connection has a page cache of its own,
#: emptied when another connection wrote, and handed out in turn (the pool's default) every one
#: read each page a run's record touches from the file again (42 reads a run, 7 this way).
_POOL: dict[str, Any] = {"pool_size": 20, "max_overflow": 20, "pool_use_lifo": True}
#: A pooled PostgreSQL connection unused this long is checked (a round trip) before it is
#: handed out: the server may have closed it (restarted, idle timeout) meanwhile.
IDLE_PING_SECONDS = 10.0
_CHECKED_IN = "runplane_checked_in"


def _note_checkin(_connection: object, record: Any) -> None:
    record.info[_CHECKED_IN] = time.monotonic()


def _ping_if_idle(connection: Any, record: Any, _proxy: object) -> None:
    """Check a connection before it is used when it sat in the pool :data:`IDLE_PING_SECONDS`
    or more. SQLAlchemy's ``pool_pre_ping`` checks at every checkout: a round trip to the
    server for every run's record and every burst of its events, even on a connection returned
    a moment ago. One found closed is replaced (``DisconnectionError`` makes the pool connect
    anew)."""
    returned = record.info.get(_CHECKED_IN)
    if returned is None or time.monotonic() - returned < IDLE_PING_SECONDS:
        return
    try:
        cursor = connection.cursor()
        try:
            cursor.execute("SELECT 1")
        finally:
            cursor.close()
        if not connection.autocommit:
            connection.rollback()  # the check's own transaction, ended before the caller's
    except Exception as error:  # the driver's error, whatever the connection's failure
        raise DisconnectionError(f"a pooled connection did not answer: {error}") from error


def unreachable(engine: Engine) -> str | None:
    """Why ``engine``'s database does not answer a query now, in words that name no host
    or credential; ``None`` when it answers."""
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except (SQLAlchemyError, OSError) as error:  # refused, timed out, pool exhausted
        return f"the database does not answer ({type(error).__name__})"
    return None


def stored_text(value: Any) -> str:
    """A JSON column's value as written: orjson's text, several times faster than the standard
    library's (a run's record writes a dozen such values, its function among them), and the
    standard library's where orjson refuses (an integer beyond 64 bits, a key that is not
    text), as before. What is stored holds no ``NaN`` nor lone surrogate, which orjson would
    write otherwise: both are refused where a value enters (:mod:`runplane.spec.bounds`)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # orjson.JSONEncodeError is one
        return json.dumps(value)


def stored_json(text: str | bytes) -> Any:
    """A JSON column's value as read. One written before lone surrogates were refused at the
    door can hold them (escaped, as JSON allows); they come back escaped as text, ``\\ud800``,
    so every answer and page can still be encoded. orjson refuses those (and ``NaN``) and
    reads an integer beyond 64 bits as a float (a parameter of 30 digits, which a run may
    take), so the standard library's reading, and the walk, are for the rare value orjson
    refuses or would change; orjson reads the rest 2-3 times as fast."""
    if not may_hold_long_integer(text):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return escape_surrogates(json.loads(text))


def _count_statement(*args: Any) -> None:
    """Each statement sent, by its first word (``SELECT``, ``INSERT``...): see
    :mod:`runplane.meters`."""
    statement: str = args[2]
    kind = statement.lstrip()[:6].rstrip().upper()
    meters.count("sql_statements", (("kind", kind),))


def _hidden(url: str) -> str:
    """The URL with its password replaced. One that does not parse shows its scheme and what
    follows the last ``@`` (the host, port and database), never what comes before it."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        scheme, separator, rest = url.partition("://")
        if not separator or not re.match(r"^[a-z][a-z0-9+.-]*$", scheme):
            return "<not a URL>"
        _, at, host = rest.rpartition("@")
        return f"{scheme}://..." + (f"@{host}" if at else "")


def _database_error(url: str, error: Exception) -> str:
    if isinstance(error, ValueError):  # the error's own words could quote the password
        return (
            f"service.database_url: {_hidden(url)} is not a valid database URL: a part of it "
            "does not parse (a port is a number); example: "
            "postgresql+psycopg://runplane:<password>@db:5432/runplane"
        )
    if isinstance(error, ArgumentError) and not isinstance(error, NoSuchModuleError):
        return (
            f"service.database_url: {_hidden(url)} is not a database URL; give a SQLAlchemy "
            "URL (example: postgresql+psycopg://runplane:<password>@db:5432/runplane, or "
            "sqlite:////var/lib/runplane/runplane.db)"
        )
    return (
        f"service.database_url: {_hidden(url)} needs a database driver that is not "
        f"installed ({error}); for PostgreSQL install runplane's extra: "
        "pip install 'runplane[postgresql]'"
    )


@contextmanager
def _migration_lock(engine: Engine) -> Iterator[None]:
    """One migrating process at a time: a file lock for SQLite, an advisory lock otherwise."""
    if engine.dialect.name == "sqlite":
        import fcntl

        database = engine.url.database or "runplane.db"
        lock = os.open(f"{database}.migrate.lock", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield
        finally:
            os.close(lock)
        return
    with engine.connect() as connection:
        connection.execute(text("SELECT pg_advisory_lock(7254000001)"))
        try:
            yield
        finally:
            connection.execute(text("SELECT pg_advisory_unlock(7254000001)"))


def _refuse_unknown(url: str, revision: str | None) -> None:
    """A database a newer runplane migrated (an older replica restarted during a rolling
    upgrade, a rollback of the image) is refused in words, not with Alembic's traceback: its
    schema may hold what this version cannot write correctly."""
    from alembic.script import ScriptDirectory

    if revision is None:
        return
    if revision in {
        script.revision for script in ScriptDirectory(str(MIGRATIONS)).walk_revisions()
    }:
        return
    raise ConfigError(
        f"service.database_url: the database at {_hidden(url)} is at schema revision "
        f"{revision}, which this runplane does not know (its newest is {HEAD}): a newer "
        "runplane migrated it. Run that version (or newer); going back needs the database "
        "as it was before that upgrade (docs/install.md, Upgrade)"
    )


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        if not inspect(connection).has_table("alembic_version"):
            return None
        return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()


def upgrade(engine: Engine) -> None:
    """Run the Alembic migrations up to :data:`HEAD`."""
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, HEAD)


def session_factory(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


__all__ = ["HEAD", "READ_ONLY", "Base", "connect", "session_factory", "sqlite_url", "upgrade"]
