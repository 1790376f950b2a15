"""New runs' records that arrive together are committed in one transaction, on SQLite and
PostgreSQL: each caller returns once its own is committed, and a record that cannot be written
fails alone."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, event, text

from runplane.errors import RunExistsError
from runplane.service import run_counts
from runplane.service.db import connect
from runplane.service.db.group_commit import GroupCommit
from runplane.service.records import RunStore


@pytest.fixture
def store(database: str) -> Iterator[RunStore]:
    store = RunStore(connect(database))
    yield store
    store.close()


def transactions(engine: Engine) -> list[int]:
    """Each transaction begun on ``engine`` from now on (a list that grows)."""
    begun: list[int] = []

    @event.listens_for(engine, "begin")
    def count(connection: Connection) -> None:
        begun.append(1)

    return begun


def held_first(
    write: Callable[[Connection, Sequence[Any]], None], group: list[GroupCommit[Any]], behind: int
) -> Callable[[Connection, Sequence[Any]], None]:
    """``write``, its first call held until ``behind`` more records wait behind it."""
    first = threading.Event()

    def held(connection: Connection, items: Sequence[Any]) -> None:
        if not first.is_set():
            first.set()
            deadline = time.monotonic() + 30
            while len(group[0]._pending) < behind:
                assert time.monotonic() < deadline, "the other records did not arrive"
                time.sleep(0.001)
        write(connection, items)

    return held


def record(store: RunStore, uid: str) -> None:
    store.create(
        uid=uid,
        project="group",
        name="job",
        runtime="local",
        function={"kind": "job", "metadata": {"labels": {"team": "a"}}},
        params={},
        inputs={},
        thresholds={},
        priority_class="",
        requests={},
        limits={},
        executor=None,
        owner="ann",
    )


def test_records_that_arrive_while_one_is_written_go_in_one_transaction(store: RunStore) -> None:
    engine = store.engine
    group: list[GroupCommit[Any]] = []
    original = store._created
    group.append(GroupCommit(engine, held_first(original._write, group, behind=15)))
    store._created = group[0]
    begun = transactions(engine)
    uids = [uuid.uuid4().hex for _ in range(16)]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda uid: record(store, uid), uids))
    assert len(begun) == 2  # the first alone, the fifteen behind it together
    assert {run.uid for run in store.list_runs(project="group", limit=100)} == set(uids)
    with engine.connect() as connection:
        assert run_counts.by_state(connection, project="group") == {"created": 16}
        labelled = connection.execute(text("SELECT count(*) FROM run_labels")).scalar_one()
    assert labelled == 16


def test_a_record_that_cannot_be_written_fails_alone(store: RunStore) -> None:
    engine = store.engine
    taken = uuid.uuid4().hex
    record(store, taken)
    group: list[GroupCommit[Any]] = []
    group.append(GroupCommit(engine, held_first(store._created._write, group, behind=9)))
    store._created = group[0]
    uids = [uuid.uuid4().hex for _ in range(4)] + [taken] + [uuid.uuid4().hex for _ in range(4)]

    def outcome(uid: str) -> str:
        try:
            record(store, uid)
        except RunExistsError as error:
            return str(error)
        return "recorded"

    with ThreadPoolExecutor(10) as pool:
        first = pool.submit(record, store, uuid.uuid4().hex)  # held: the nine wait behind it
        outcomes = dict(zip(uids, pool.map(outcome, uids), strict=True))
        first.result()
    assert outcomes.pop(taken) == f"run {taken} is already recorded"
    assert set(outcomes.values()) == {"recorded"}
    with engine.connect() as connection:
        assert run_counts.by_state(connection, project="group") == {"created": 10}


def test_a_write_interrupted_midway_wakes_every_caller_behind_it(database: str) -> None:
    engine = connect(database)
    group: list[GroupCommit[int]] = []

    def interrupted(connection: Connection, items: Sequence[int]) -> None:
        if len(items) > 1:
            raise KeyboardInterrupt  # in the writer's thread, as a signal would

    group.append(GroupCommit(engine, held_first(interrupted, group, behind=3)))

    def outcome(item: int) -> str:
        try:
            group[0].commit(item)
        except BaseException as error:
            return type(error).__name__
        return "written"

    try:
        with ThreadPoolExecutor(4) as pool:
            outcomes = list(pool.map(outcome, range(4)))
    finally:
        engine.dispose()
    # the first alone; of the three behind it, the writer is interrupted and the two it held
    # learn that their batch stopped
    assert sorted(outcomes) == ["KeyboardInterrupt", "RuntimeError", "RuntimeError", "written"]
