"""Statements compiled once for SQLite's driver store and fail exactly as SQLAlchemy would."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import (
    JSON,
    Column,
    MetaData,
    String,
    Table,
    bindparam,
    create_engine,
    insert,
    select,
)
from sqlalchemy.exc import IntegrityError, StatementError

from runplane.service.db.prepared import Prepared, PreparedRead

METADATA = MetaData()
ITEMS = Table(
    "items",
    METADATA,
    Column("uid", String, primary_key=True),
    Column("spec", JSON, nullable=False),
)
WRITE = Prepared(insert(ITEMS), ITEMS, ["uid", "spec"])
READ = PreparedRead(select(ITEMS).where(ITEMS.c.uid == bindparam("uid")), ITEMS)


@pytest.fixture
def engine() -> Any:
    made = create_engine("sqlite://")
    METADATA.create_all(made)
    return made


def test_a_row_is_stored_as_sqlalchemy_stores_it(engine: Any) -> None:
    with engine.begin() as connection:
        WRITE.execute(connection, [{"uid": "a", "spec": {"cpu": "1", "tags": [1, 2]}}])
        connection.execute(insert(ITEMS), {"uid": "b", "spec": {"cpu": "1", "tags": [1, 2]}})
        stored = dict(connection.exec_driver_sql("SELECT uid, spec FROM items").all())
    assert stored["a"] == stored["b"]
    with engine.begin() as connection:
        (row,) = READ.rows(connection, uid="a")
    assert (row.uid, row.spec) == ("a", {"cpu": "1", "tags": [1, 2]})


def test_a_value_its_column_cannot_store_is_a_statement_error(engine: Any) -> None:
    with engine.begin() as connection, pytest.raises(StatementError) as raised:
        WRITE.execute(connection, [{"uid": "a", "spec": {"when": object()}}])
    assert isinstance(raised.value.orig, TypeError)
    assert "INSERT INTO items" in str(raised.value.statement)
    with engine.begin() as connection:
        assert connection.exec_driver_sql("SELECT count(*) FROM items").scalar() == 0


def test_a_key_recorded_twice_is_an_integrity_error(engine: Any) -> None:
    with engine.begin() as connection:
        WRITE.execute(connection, [{"uid": "a", "spec": {}}])
    with engine.begin() as connection, pytest.raises(IntegrityError):
        WRITE.execute(connection, [{"uid": "a", "spec": {}}])
