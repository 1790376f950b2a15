"""New runs' records that arrive together are committed in one transaction, on SQLite and
PostgreSQL: each caller returns once its own is committed, and a record that cannot be written
fails alone."""

from __future__ import annotations

import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, event, text
from sqlalchemy.exc import IntegrityError, OperationalError

from runplane.errors import RunExistsError
from runplane.service import run_counts
from runplane.service.db import connect
from runplane.service.db.group_commit import MOST, GroupCommit
from runplane.service.records import RunStore
from tests.service.test_run_listing import created_run


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


class HeldFirst:
    """A write whose first call is held until ``behind`` more records wait behind it;
    ``started`` is set once that first call began."""

    def __init__(
        self, write: Callable[[Connection, Sequence[Any]], None], group: list[GroupCommit[Any]]
    ) -> None:
        self.write, self.group, self.behind = write, group, 0
        self.started = threading.Event()

    def __call__(self, connection: Connection, items: Sequence[Any]) -> None:
        if not self.started.is_set():
            self.started.set()
            deadline = time.monotonic() + 30
            while len(self.group[0]._pending) < self.behind:
                assert time.monotonic() < deadline, "the other records did not arrive"
                time.sleep(0.001)
        self.write(connection, items)


def grouped(
    engine: Engine, write: Callable[[Connection, Sequence[Any]], None], behind: int
) -> tuple[GroupCommit[Any], HeldFirst]:
    """A group commit whose first write waits for ``behind`` more records."""
    group: list[GroupCommit[Any]] = []
    held = HeldFirst(write, group)
    held.behind = behind
    group.append(GroupCommit(engine, held))
    return group[0], held


def first_then_rest(held: HeldFirst, call: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
    """``call`` of each item, each from a thread of its own: the first item's write begun
    (its batch taken) before the others are called, so they all queue behind it."""
    with ThreadPoolExecutor(len(items)) as pool:
        first = pool.submit(call, items[0])
        assert held.started.wait(30)
        rest = list(pool.map(call, items[1:]))
        return [first.result(), *rest]


def record(store: RunStore, uid: str) -> None:
    created_run(store, project="group", owner="ann", labels={"team": "a"}, uid=uid)


def test_records_that_arrive_while_one_is_written_go_in_one_transaction(store: RunStore) -> None:
    engine = store.engine
    store._created, held = grouped(engine, store._created._write, behind=15)
    begun = transactions(engine)
    uids = [uuid.uuid4().hex for _ in range(16)]
    first_then_rest(held, lambda uid: record(store, uid), uids)
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
    store._created, held = grouped(engine, store._created._write, behind=10)
    begun = transactions(engine)
    again = uuid.uuid4().hex  # twice in the same batch: the second is refused
    uids = [uuid.uuid4().hex for _ in range(4)] + [taken, again, again]
    uids += [uuid.uuid4().hex for _ in range(3)]

    def outcome(uid: str) -> str:
        try:
            record(store, uid)
        except RunExistsError as error:
            return str(error)
        return "recorded"

    with ThreadPoolExecutor(11) as pool:
        first = pool.submit(record, store, uuid.uuid4().hex)
        assert held.started.wait(30)  # the ten queue behind it
        outcomes = list(pool.map(outcome, uids))
        first.result()
    assert len(begun) == 1 + 1 + 10  # the first; the ten refused together; each alone
    refused = [uid for uid, said in zip(uids, outcomes, strict=True) if said != "recorded"]
    assert sorted(refused) == sorted([taken, again])
    assert f"run {taken} is already recorded" in outcomes
    with engine.connect() as connection:
        assert run_counts.by_state(connection, project="group") == {"created": 10}


def test_an_outage_is_every_records_error_and_nothing_is_tried_again(database: str) -> None:
    engine = connect(database)
    down = OperationalError("INSERT", {}, OSError("the database is down"))

    def failing(connection: Connection, items: Sequence[int]) -> None:
        if len(items) > 1:
            raise down

    commits, held = grouped(engine, failing, behind=3)
    begun = transactions(engine)

    def outcome(item: int) -> str:
        try:
            commits.commit(item)
        except OperationalError as error:
            return "down" if error is down else repr(error)
        return "written"

    try:
        outcomes = first_then_rest(held, outcome, range(4))
    finally:
        engine.dispose()
    assert outcomes == ["written", "down", "down", "down"]
    assert len(begun) == 2  # not a transaction more per record


@pytest.mark.parametrize("when", ["the batch", "a record written alone after it"])
def test_a_write_interrupted_midway_wakes_every_caller_behind_it(database: str, when: str) -> None:
    engine = connect(database)
    calls: list[int] = []

    def interrupted(connection: Connection, items: Sequence[int]) -> None:
        calls.append(len(items))
        if len(calls) == 2 and when == "the batch":
            raise KeyboardInterrupt  # in the writer's thread, as a signal would
        if len(calls) == 2:
            raise IntegrityError("INSERT", {}, Exception("refused"))  # retried one by one
        if len(calls) == 3 and when != "the batch":
            raise KeyboardInterrupt  # the first of those

    commits, held = grouped(engine, interrupted, behind=3)

    def outcome(item: int) -> str:
        try:
            commits.commit(item)
        except BaseException as error:
            return type(error).__name__
        return "written"

    try:
        outcomes = first_then_rest(held, outcome, range(4))
        # the first alone; of the three behind it, the writer is interrupted and the two it
        # held learn that their batch stopped: none is told its record was written
        assert outcomes[0] == "written"
        assert sorted(outcomes[1:]) == ["KeyboardInterrupt", "RuntimeError", "RuntimeError"]
        commits.commit(5)  # and the next record is written: nobody holds the next batch
    finally:
        engine.dispose()


def test_a_caller_interrupted_while_it_waits_leaves_the_others_written(database: str) -> None:
    """A signal reaches the main thread while its record waits behind another's (Ctrl-C in a
    program that runs functions from several threads on the embedded default): it leaves the
    queue, and the batch that would have been its to write goes to the next caller."""
    engine = connect(database)
    main = threading.main_thread().ident
    assert main == threading.get_ident()
    written: list[int] = []
    first_began = threading.Event()

    def write(connection: Connection, items: Sequence[int]) -> None:
        if not written:  # the first, held: the main thread's record and another wait
            first_began.set()
            deadline = time.monotonic() + 30
            while len(commits._pending) < 2:
                assert time.monotonic() < deadline, "the others did not arrive"
                time.sleep(0.001)
            assert main is not None
            signal.pthread_kill(main, signal.SIGINT)
            while len(commits._pending) > 1:  # until the main thread has left the queue
                assert time.monotonic() < deadline, "the interrupted caller stayed queued"
                time.sleep(0.001)
        written.extend(items)

    commits: GroupCommit[int] = GroupCommit(engine, write)
    # Ctrl-C as Python takes it, even where the suite was started with SIGINT ignored (in the
    # background of a shell without job control), which no handler would see.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(commits.commit, 0)
            # its batch taken (not only its writing begun): the two below queue behind it
            assert first_began.wait(30)
            later = pool.submit(commits.commit, 2)
            with pytest.raises(KeyboardInterrupt):
                commits.commit(1)
            first.result(timeout=30)
            later.result(timeout=30)
    finally:
        signal.signal(signal.SIGINT, before)
        engine.dispose()
    assert written == [0, 2]


def test_while_records_come_fast_from_several_callers_the_writer_waits_for_more(
    database: str,
) -> None:
    """Records arriving at the busy rate, some while another is written (callers are
    several): the writer of the next batch waits for more before it writes, until a whole batch
    waits (here the wait would be two minutes, so a batch written before then was ended by the
    count)."""
    engine = connect(database)
    batches: list[int] = []
    group: list[GroupCommit[Any]] = []
    held = HeldFirst(lambda _, items: batches.append(len(items)), group)
    held.behind = 2
    # Any two arrivals in a row are fast enough.
    group.append(GroupCommit(engine, held, busy_rate=1e-6, window=2, linger=120))
    commits = group[0]
    started = time.monotonic()
    try:
        with ThreadPoolExecutor(MOST + 1) as pool:
            first = pool.submit(commits.commit, 0)
            assert held.started.wait(30)
            behind = [pool.submit(commits.commit, item) for item in (1, 2)]
            first.result(timeout=30)  # written alone; the two behind it wait for more
            list(pool.map(commits.commit, range(3, MOST + 1)))
            for waiting in behind:
                waiting.result(timeout=30)
    finally:
        engine.dispose()
    assert batches == [1, MOST]
    assert time.monotonic() - started < 60


def test_a_lone_caller_is_never_kept_waiting(database: str) -> None:
    """One caller sending records one after another, however fast, finds none being written
    when its own arrives: no company can come, and its records are written at once."""
    engine = connect(database)
    batches: list[int] = []
    commits: GroupCommit[int] = GroupCommit(
        engine, lambda _, items: batches.append(len(items)), busy_rate=1e-6, window=2, linger=120
    )
    started = time.monotonic()
    try:
        for item in range(5):
            commits.commit(item)
    finally:
        engine.dispose()
    assert batches == [1] * 5
    assert time.monotonic() - started < 60


def test_a_writer_interrupted_while_it_waits_for_more_hands_the_batch_on(database: str) -> None:
    """Ctrl-C reaches the main thread while, its batch handed to it, it waits for more
    records: it leaves with KeyboardInterrupt, its record unwritten, and the next record is
    written (nobody is left holding the batch)."""
    engine = connect(database)
    main = threading.main_thread().ident
    assert main == threading.get_ident()
    written: list[int] = []
    group: list[GroupCommit[Any]] = []
    held = HeldFirst(lambda _, items: written.extend(items), group)
    held.behind = 1
    # The next record waits for company too (an arrival before it found one being written),
    # and is written when its 3 s are up.
    group.append(GroupCommit(engine, held, busy_rate=1e-6, window=2, linger=3))
    commits = group[0]

    def interrupt_the_wait() -> None:
        deadline = time.monotonic() + 30
        while not commits._full._waiters:  # type: ignore[attr-defined]
            assert time.monotonic() < deadline, "the main thread did not wait for more"
            time.sleep(0.001)
        assert main is not None
        signal.pthread_kill(main, signal.SIGINT)

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(commits.commit, 0)
            assert held.started.wait(30)  # its write held until the main thread's arrives
            signalled = pool.submit(interrupt_the_wait)
            with pytest.raises(KeyboardInterrupt):
                commits.commit(1)  # arrives while 0 is written: handed the next batch
            first.result(timeout=30)
            signalled.result(timeout=30)
            pool.submit(commits.commit, 2).result(timeout=30)
    finally:
        signal.signal(signal.SIGINT, before)
        engine.dispose()
    assert written == [0, 2]
