"""Events applied to run records a burst at a time, on SQLite and PostgreSQL: what a burst
records, what it refuses, and that reads go on beside a writer."""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from collections import Counter
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

from runplane.errors import RunExistsError
from runplane.runs import RunState, Usage
from runplane.runtimes.events import RunEvent
from runplane.service.db import connect
from runplane.service.records import RunStore
from runplane.service.retries import AttemptPlan, RetryDecision
from tests.service.statements import Statements, this_thread


@pytest.fixture
def store(database: str) -> Any:
    store = RunStore(connect(database))
    yield store
    store.close()


def _recorded(store: RunStore, uid: str = "", requests: dict[str, str] | None = None) -> str:
    uid = uid or uuid.uuid4().hex
    store.create(
        uid=uid,
        project="default",
        name="job",
        runtime="local",
        function={"kind": "job"},
        params={},
        inputs={},
        thresholds={},
        priority_class="",
        requests={"cpu": "100m"} if requests is None else requests,
        limits={},
        executor=None,
    )
    return uid


def test_a_runs_whole_life_in_one_burst(store: RunStore) -> None:
    uid = _recorded(store)
    start = time.time()
    applied = store.apply_many(
        [
            RunEvent(uid, RunState.PENDING, reason="Queued", at=start),
            RunEvent(uid, RunState.RUNNING, reason="Started", node="here", process_id=42, at=start),
            RunEvent(
                uid,
                RunState.COMPLETED,
                reason="Completed",
                exit_code=0,
                usage=Usage(peak_memory_bytes=5 << 20, cpu_seconds=0.25),
                results={"return": 3},
                artifacts=[{"key": "model", "path": "/tmp/model.pkl", "size": 10}],
                at=start + 3600,  # a clock ahead of the service's: recorded as of now
            ),
        ]
    )
    now = time.time()
    assert all(event is not None for event in applied)
    record = store.get(uid)
    assert record.state is RunState.COMPLETED
    assert [t.state for t in record.transitions] == [
        RunState.CREATED,
        RunState.PENDING,
        RunState.RUNNING,
        RunState.COMPLETED,
    ]
    assert record.results == {"return": 3}
    assert record.started_at == start
    assert record.ended_at is not None
    assert start <= record.ended_at <= now
    assert record.peak_memory_bytes == 5 << 20
    assert record.cpu_seconds == 0.25
    assert record.artifacts == [{"key": "model", "path": "/tmp/model.pkl", "size": 10}]
    (attempt,) = record.attempts
    assert (attempt.node, attempt.process_id, attempt.exit_code) == ("here", 42, 0)
    assert (attempt.started_at, attempt.ended_at) == (start, record.ended_at)
    assert attempt.peak_memory_bytes == 5 << 20


def test_what_a_burst_refuses_changes_nothing(store: RunStore) -> None:
    ended, other = _recorded(store), _recorded(store)
    store.apply(RunEvent(ended, RunState.ERROR, reason="Error", message="boom"))
    applied = store.apply_many(
        [
            RunEvent(ended, RunState.RUNNING, reason="Started"),  # it has ended
            RunEvent(other, RunState.RUNNING, reason="Started", attempt=2),  # a later attempt's
            RunEvent(uuid.uuid4().hex, RunState.RUNNING),  # no such run
        ]
    )
    assert applied == [None, None, None]
    assert store.get(ended).state is RunState.ERROR
    assert store.get(other).state is RunState.CREATED
    assert store.get(other).attempts[0].started_at is None


def test_a_retry_and_the_next_attempts_start_in_one_burst(store: RunStore) -> None:
    uid = _recorded(store)
    store.apply(RunEvent(uid, RunState.RUNNING, reason="Started", node="a"))
    due = time.time() + 5
    decision = RetryDecision(
        attempt=2,
        due_at=due,
        plan=AttemptPlan(),
        requests={"cpu": "100m"},
        limits={},
        preemption_mode="",
        adjustments="",
        message="attempt 2 of 3 in 5s",
    )
    applied = store.apply_many(
        [
            RunEvent(uid, RunState.ERROR, reason="Error", message="exit 1", exit_code=1),
            RunEvent(uid, RunState.RUNNING, reason="Started", node="b", attempt=2),
        ],
        {0: decision},
    )
    assert applied[0] is not None
    assert applied[0].state is RunState.PENDING
    assert applied[1] is not None
    record = store.get(uid)
    assert record.state is RunState.RUNNING
    assert record.attempt == 2
    first, second = record.attempts
    assert (first.node, first.exit_code, first.message) == ("a", 1, "exit 1")
    assert first.ended_at is not None
    assert (second.number, second.node, second.due_at) == (2, "b", due)
    assert second.ended_at is None
    assert [t.state for t in record.transitions][-2:] == [RunState.PENDING, RunState.RUNNING]


def test_results_beyond_the_bounds_are_left_out_saying_why(store: RunStore) -> None:
    uid = _recorded(store)
    store.apply(
        RunEvent(
            uid, RunState.COMPLETED, results={"small": 1, "huge": "x" * (2 << 20)}, exit_code=0
        )
    )
    record = store.get(uid)
    assert record.results == {"small": 1}
    assert "'huge' not recorded" in record.status_text


def test_a_read_goes_on_while_another_process_writes(tmp_path: Any) -> None:
    path = tmp_path / "runs.db"
    store = RunStore(connect(f"sqlite:///{path}"))
    uid = _recorded(store)
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    read: list[RunState] = []
    reader = threading.Thread(target=lambda: read.append(store.get(uid).state), daemon=True)
    reader.start()
    reader.join(timeout=10)
    try:
        assert read == [RunState.CREATED], "a read waited for the writer"
    finally:
        writer.execute("ROLLBACK")
        writer.close()
        store.close()


def test_a_transaction_that_cannot_begin_fails_as_sqlalchemy_says(tmp_path: Any) -> None:
    engine = connect(f"sqlite:///{tmp_path / 'runs.db'}")
    with engine.connect() as connection:
        connection.connection.driver_connection.execute("BEGIN")  # one is open already
        with pytest.raises(OperationalError, match="within a transaction"):
            connection.begin()
        connection.connection.driver_connection.execute("ROLLBACK")
    # The failed begin let go of the write lock: another thread writes.
    wrote: list[bool] = []

    def write() -> None:
        with engine.begin() as other:
            other.exec_driver_sql("CREATE TABLE t (x INTEGER)")
        wrote.append(True)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    writer.join(timeout=10)
    engine.dispose()
    assert wrote == [True]


def test_a_queued_runs_record_costs_the_same_few_statements(
    store: RunStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    _statements = Statements(monkeypatch, this_thread()).by_kind
    # Each run's record, the burst of its events and the read of its end are on the path of
    # every run: a statement more there is a statement more per run, however many runs.
    before = _statements()
    uids = [_recorded(store) for _ in range(5)]
    created = _statements() - before
    # Its row, first transition and attempt, and its state's count.
    assert created == Counter({"INSERT": 4 * 5})
    start = time.time()
    before = _statements()
    applied = store.apply_many(
        [
            event
            for uid in uids
            for event in (
                RunEvent(uid, RunState.PENDING, reason="Queued", at=start),
                RunEvent(uid, RunState.RUNNING, reason="Started", process_id=7, at=start),
                RunEvent(uid, RunState.COMPLETED, reason="Completed", exit_code=0, at=start),
            )
        ]
    )
    assert all(applied)
    # However many runs a burst holds: one select of them, their attempts' and rows' changes,
    # their transitions, their counts' changes.
    assert _statements() - before == Counter({"SELECT": 1, "UPDATE": 2, "INSERT": 2})
    before = _statements()
    record = store.get(uids[0])
    # The run's row, transitions, attempts and artifacts.
    assert _statements() - before == Counter({"SELECT": 4})
    assert [t.state for t in record.transitions][-1] is RunState.COMPLETED
    assert store.state_counts() == {"completed": 5}


def test_a_run_recorded_twice_is_refused_and_counted_once(store: RunStore) -> None:
    uid = _recorded(store)
    with pytest.raises(RunExistsError, match=uid):
        _recorded(store, uid, requests={})
    assert store.state_counts() == {"created": 1}
    record = store.get(uid)
    assert (record.requests, record.results, record.retry_at) == ({"cpu": "100m"}, {}, None)
    assert record.attempts[0].spot is None
    assert record.attempts[0].due_at is not None
