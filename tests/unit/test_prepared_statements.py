"""Statements compiled once for SQLite's driver store and fail exactly as SQLAlchemy would."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import (
    JSON,
    BindParameter,
    Column,
    Integer,
    MetaData,
    Select,
    String,
    Table,
    bindparam,
    create_engine,
    func,
    insert,
    select,
)
from sqlalchemy.exc import IntegrityError, StatementError

from runplane.service.db.prepared import Prepared, PreparedIn, PreparedRead

METADATA = MetaData()
ITEMS = Table(
    "items",
    METADATA,
    Column("uid", String, primary_key=True),
    Column("spec", JSON, nullable=False),
    Column("rank", Integer),
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


def _of(uids: list[BindParameter[Any]] | BindParameter[Any]) -> Select[Any]:
    """The items of ``uids`` with their rank (1 where none), labelled as a burst reads runs."""
    return select(ITEMS.c.uid, ITEMS.c.spec, func.coalesce(ITEMS.c.rank, 1).label("rank")).where(
        ITEMS.c.uid.in_(uids)
    )


def test_a_read_of_a_list_finds_what_sqlalchemy_finds_for_every_length(engine: Any) -> None:
    with engine.begin() as connection:
        connection.execute(
            insert(ITEMS),
            [{"uid": f"u{n}", "spec": {"n": n, "tags": [n]}, "rank": n or None} for n in range(40)],
        )
    read = PreparedIn(_of)
    expanding = _of(bindparam("uids", expanding=True))
    for uids in (
        [],
        ["u0"],
        ["u1", "u2"],
        ["u3", "gone", "u4"],  # a uid that names nothing
        ["u5", "u5", "u6"],  # one named twice
        [f"u{n}" for n in range(33)],
    ):
        with engine.begin() as connection:
            found = read.rows(connection, uids)
            expected = [row._asdict() for row in connection.execute(expanding, {"uids": uids})]
        assert sorted(found, key=lambda row: row["uid"]) == sorted(
            expected, key=lambda row: row["uid"]
        ), uids
    first = min(found, key=lambda row: row["uid"])
    assert first["spec"] == {"n": 0, "tags": [0]}  # JSON read as JSON
    assert first["rank"] == 1
    # lengths 1, 2, 3 (as 4) and 33 (as 64): one form each
    assert sorted(size for _, size in read._compiled) == [1, 2, 4, 64]
