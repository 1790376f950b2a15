"""The run database: SQLAlchemy 2 over SQLite (WAL) by default, PostgreSQL by URL.

The schema is owned by Alembic migrations. Opening a database checks its revision with one
query and imports Alembic only when an upgrade is due, so a warm start stays fast.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, inspect, make_url, text
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from runplane.errors import ConfigError
from runplane.service.db.models import Base

MIGRATIONS = Path(__file__).parent / "migrations"
#: The newest migration; bump together with a new file in ``migrations/versions``.
HEAD = "0004"


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
    cursor.close()


def _begin_immediate(connection: Any) -> None:
    """Take SQLite's write lock when a transaction starts, not at its first write.

    In WAL mode a transaction that read first and then writes fails at once with "database is
    locked" if another process wrote in between, whatever the busy timeout; taking the lock up
    front makes concurrent processes wait for each other instead.
    """
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def connect(url: str) -> Engine:
    """An engine for ``url`` with the schema at the newest migration.

    A SQLite database is created readable by its owner only (its write-ahead log and shared
    memory files take the database file's mode). Errors name the URL with its password hidden.
    """
    try:
        if url.startswith("sqlite:///"):
            path = Path(url.removeprefix("sqlite:///"))
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not path.exists():
                path.touch(mode=0o600)
            engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
            event.listen(engine, "connect", _sqlite_pragmas)
            event.listen(engine, "begin", _begin_immediate)
        else:
            engine = create_engine(url, pool_pre_ping=True)
        if current_revision(engine) != HEAD:
            with _migration_lock(engine):
                if current_revision(engine) != HEAD:  # another process may have just migrated
                    upgrade(engine)
    except (ArgumentError, NoSuchModuleError, ModuleNotFoundError) as error:
        raise ConfigError(_database_error(url, error)) from None
    except OperationalError as error:
        reason = " ".join(str(error.orig).split())
        raise ConfigError(f"service.database_url: cannot open {_hidden(url)}: {reason}") from None
    return engine


def _hidden(url: str) -> str:
    """The URL with its password replaced, or only its scheme when it does not parse."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        scheme, separator, _ = url.partition("://")
        return f"{scheme}://..." if separator and scheme.isidentifier() else "<not a URL>"


def _database_error(url: str, error: Exception) -> str:
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


__all__ = ["HEAD", "Base", "connect", "session_factory", "sqlite_url", "upgrade"]
