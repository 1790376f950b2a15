"""The service's connection pool: connections kept for its threads, a PostgreSQL connection
the server closed while it sat idle in the pool replaced before a transaction meets it, and one
closed under a statement sent to the driver itself invalidated as SQLAlchemy's own would be."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from threading import Barrier

import pytest
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.exc import DBAPIError

from runplane.service import db, run_counts
from runplane.service.outage import outage
from tests.databases import drop_postgres_database, fresh_postgres_database
from tests.service.conftest import postgres_url


@pytest.fixture
def postgres(migrated_postgres: str) -> Iterator[Engine]:
    """The service's engine on a PostgreSQL database of its own (the idle check is for a
    server that may close a connection; a SQLite file has none)."""
    url = fresh_postgres_database(postgres_url(), migrated_postgres)
    engine = db.connect(url)
    yield engine
    engine.dispose()
    drop_postgres_database(url)


def backend_pid(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.execute(text("SELECT pg_backend_pid()")).scalar_one())


def terminate(pid: int) -> None:
    """Close a backend from the server's side, as a restart or an idle timeout would."""
    admin = create_engine(postgres_url(), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            assert connection.execute(text(f"SELECT pg_terminate_backend({pid})")).scalar_one()
            # Gone once the server no longer lists it (terminate only signals the backend).
            # Each poll its own transaction: one reads the backends' list once, and a loop
            # inside one would never see it change.
            listed = text("SELECT count(*) FROM pg_stat_activity WHERE pid = :pid")
            deadline = time.monotonic() + 30
            while connection.execute(listed, {"pid": pid}).scalar_one():
                assert time.monotonic() < deadline, f"backend {pid} did not exit"
                time.sleep(0.01)
    finally:
        admin.dispose()


def at_once(engine: Engine, count: int) -> set[int]:
    """The server processes of ``count`` connections held at once."""
    together = Barrier(count)

    def held() -> int:
        with engine.connect() as connection:
            together.wait(timeout=30)
            return int(connection.execute(text("SELECT pg_backend_pid()")).scalar_one())

    with ThreadPoolExecutor(count) as pool:
        return set(pool.map(lambda _: held(), range(count)))


def test_a_connection_closed_while_idle_is_replaced_before_it_is_used(
    postgres: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(db, "IDLE_PING_SECONDS", 0.0)  # every connection returned counts as idle
    first = backend_pid(postgres)
    terminate(first)
    assert backend_pid(postgres) != first  # answered, on a new connection


def test_a_connection_used_a_moment_ago_is_not_checked_again(postgres: Engine) -> None:
    sent: list[str] = []
    backend_pid(postgres)  # a pooled connection, returned just now
    pid = backend_pid(postgres)

    @event.listens_for(postgres, "before_cursor_execute")
    def count(*args: object) -> None:
        sent.append(str(args[2]))

    terminate(pid)
    # Within IDLE_PING_SECONDS it is handed out unchecked: the transaction meets the closed
    # connection (what a check on every checkout would cost is a round trip per transaction).
    with pytest.raises(DBAPIError) as failed:
        backend_pid(postgres)
    assert sent == ["SELECT pg_backend_pid()"]
    # An outage, as the API and the recorder take one: 503 with Retry-After, written again.
    assert outage(failed.value) is not None
    assert backend_pid(postgres) != pid  # the pool replaced it after the failure


def test_the_pool_keeps_a_connection_for_each_submission_thread(postgres: Engine) -> None:
    """Sixteen transactions at once (the submission threads) and again: the same sixteen
    server processes, none opened for the second round."""
    first = at_once(postgres, 16)
    second = at_once(postgres, 16)
    assert len(first) == 16
    assert second == first


def test_a_statement_sent_to_the_driver_meets_a_closed_connection_as_sqlalchemy_would(
    postgres: Engine,
) -> None:
    """A run's statements go to psycopg as compiled once (``db.prepared``), past SQLAlchemy's
    execution: the connection the server closed under one is still invalidated, the error is
    an outage, and the next transaction has a new connection."""
    sent: list[str] = []
    pooled = at_once(postgres, 2)  # two connections in the pool, both used a moment ago

    @event.listens_for(postgres, "before_cursor_execute")
    def count(*args: object) -> None:
        sent.append(str(args[2]))

    for pid in pooled:  # the server restarted, say
        terminate(pid)
    with pytest.raises(DBAPIError) as failed, postgres.begin() as connection:
        run_counts.add(connection, Counter({("p", "ann", "completed"): 1}))
    assert sent == []  # not executed by SQLAlchemy
    # The statement's own error, its connection invalidated: the transaction's end did not
    # try a rollback on the closed connection (which would fail, and hide it).
    assert "INSERT INTO run_counts" in str(failed.value.statement), failed.value
    assert failed.value.connection_invalidated
    assert outage(failed.value) is not None
    sent.clear()
    # The other closed connection is replaced too: no second transaction meets one.
    assert not at_once(postgres, 2) & pooled
    with postgres.begin() as connection:  # and the statement itself goes through on it
        run_counts.add(connection, Counter({("p", "ann", "completed"): 1}))
    with postgres.connect() as connection:
        assert run_counts.by_state(connection, project="p") == {"completed": 1}


def test_a_statement_sent_to_the_driver_outside_a_transaction_begins_one(
    postgres: Engine,
) -> None:
    """As SQLAlchemy's execution begins one: the caller's commit keeps what it wrote, and
    its rollback takes it back (no statement is left outside SQLAlchemy's knowledge)."""
    change = Counter({("p", "ann", "completed"): 1})
    with postgres.connect() as connection:
        run_counts.add(connection, change)
        assert connection.in_transaction()
        connection.rollback()
        run_counts.add(connection, change + change)
        connection.commit()
    with postgres.connect() as connection:
        assert run_counts.by_state(connection, project="p") == {"completed": 2}


def test_a_sqlite_connection_writes_ahead_and_checkpoints_seldom(tmp_path) -> None:
    """Each connection writes ahead (WAL), flushes only at checkpoints, waits for another
    process's lock, checks foreign keys, and checkpoints the log every 10,000 pages rather than
    SQLite's 1,000: a checkpoint copies a page once however many commits changed it, and the
    runs' index pages change with every run (docs/decisions.md)."""
    engine = db.connect(db.sqlite_url(tmp_path / "runplane.db"))
    try:
        with engine.connect() as connection:
            pragmas = {
                name: connection.exec_driver_sql(f"PRAGMA {name}").scalar()
                for name in (
                    "journal_mode",
                    "synchronous",
                    "busy_timeout",
                    "foreign_keys",
                    "wal_autocheckpoint",
                )
            }
    finally:
        engine.dispose()
    assert pragmas == {
        "journal_mode": "wal",
        "synchronous": 1,  # NORMAL
        "busy_timeout": 30000,
        "foreign_keys": 1,
        "wal_autocheckpoint": 10000,
    }
