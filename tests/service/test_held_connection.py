"""A connection kept between a busy writer's transactions (SQLite), and handed back: after a
failure, to a second writer's pool, and when the store closes. On PostgreSQL each transaction
takes its connection from the pool, whose idle check stays in front of it."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, event, inspect, text

from runplane.service import db
from runplane.service.db.held import HeldConnection


@pytest.fixture
def engine(database: str) -> Iterator[Engine]:
    engine = db.connect(database)
    yield engine
    engine.dispose()


def checkouts(engine: Engine) -> list[int]:
    """The driver connections handed out by the pool, in order."""
    taken: list[int] = []

    @event.listens_for(engine, "checkout")
    def checkout(driver: object, *_: object) -> None:
        taken.append(id(driver))

    return taken


def test_a_writer_keeps_its_connection_on_sqlite_only(engine: Engine) -> None:
    taken = checkouts(engine)
    held = HeldConnection(engine)
    for _ in range(5):
        with held.begin() as connection:
            connection.execute(text("SELECT 1"))
    assert len(taken) == (1 if engine.dialect.name == "sqlite" else 5)
    held.close()
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]


def test_a_failed_transaction_is_rolled_back_and_its_connection_not_kept(engine: Engine) -> None:
    taken = checkouts(engine)
    held = HeldConnection(engine)
    with held.begin() as connection:
        connection.execute(text("SELECT 1"))

    def fails() -> None:
        with held.begin() as connection:
            connection.execute(text("CREATE TABLE held_probe (x INTEGER)"))
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        fails()
    with held.begin() as connection:
        assert "held_probe" not in inspect(connection).get_table_names()
    assert len(taken) == (2 if engine.dialect.name == "sqlite" else 3)
    assert engine.pool.checkedout() == (1 if engine.dialect.name == "sqlite" else 0)  # type: ignore[attr-defined]
    held.close()
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]


def test_writers_at_once_each_have_a_connection_and_one_is_kept(engine: Engine) -> None:
    held = HeldConnection(engine)
    inside = threading.Barrier(2, timeout=10)
    drivers: list[object] = []

    def write() -> None:
        with held.begin() as connection:
            drivers.append(connection.connection.driver_connection)
            if engine.dialect.name != "sqlite":  # SQLite's writers take turns (one lock)
                inside.wait()

    threads = [threading.Thread(target=write) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(drivers) == 2
    if engine.dialect.name == "sqlite":
        with held.begin() as connection:
            assert connection.connection.driver_connection in drivers
        assert engine.pool.checkedout() == 1  # type: ignore[attr-defined]
    else:
        assert drivers[0] is not drivers[1]
    held.close()
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]


def test_a_connection_taken_before_close_is_not_kept_after_it(engine: Engine) -> None:
    held = HeldConnection(engine)
    with held.begin() as connection:
        connection.execute(text("SELECT 1"))
        held.close()  # the store closing while a write is under way
    assert engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    with held.begin() as connection:  # a later write keeps one again
        connection.execute(text("SELECT 1"))
    assert engine.pool.checkedout() == (1 if engine.dialect.name == "sqlite" else 0)  # type: ignore[attr-defined]
    held.close()
