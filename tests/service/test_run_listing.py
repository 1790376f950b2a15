"""Lists of runs a page at a time from a key, on SQLite and PostgreSQL: what each filter finds,
that every list query the store issues reads an index in order (EXPLAIN), and that the
counts kept beside the runs stay equal to counting them."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import Engine, event, func, select, text

from runplane.errors import InvalidValueError
from runplane.runs import RunState
from runplane.runtimes.events import RunEvent
from runplane.service.budget_holds import held_runs
from runplane.service.db import connect
from runplane.service.db.models import RUNS
from runplane.service.records import RunStore
from runplane.service.retries import AttemptPlan, RetryDecision


@pytest.fixture
def engine(database: str) -> Iterator[Engine]:
    engine = connect(database)
    yield engine
    engine.dispose()


@pytest.fixture
def store(engine: Engine) -> Iterator[RunStore]:
    store = RunStore(engine)
    yield store
    store.close()


def created_run(
    store: RunStore,
    project: str = "default",
    owner: str = "bob",
    name: str = "job",
    labels: dict[str, str] | None = None,
    executor: tuple[int, float] | None = None,
    held: str = "",
    awaiting_leader: bool = False,
    uid: str = "",
) -> str:
    """A run recorded with these fields (a new uid unless given); its uid."""
    uid = uid or uuid.uuid4().hex
    store.create(
        uid=uid,
        project=project,
        name=name,
        runtime="local",
        function={"kind": "job", "metadata": {"name": name, "labels": labels or {}}},
        params={},
        inputs={},
        thresholds={},
        priority_class="",
        requests={},
        limits={},
        executor=executor,
        owner=owner,
        held=held,
        awaiting_leader=awaiting_leader,
    )
    return uid


def test_pages_follow_each_other_from_the_cursor_with_every_filter(store: RunStore) -> None:
    made = []
    for n in range(12):
        made.append(
            created_run(
                store,
                project="a" if n % 2 else "b",
                owner="bob" if n % 3 else "carol",
                name="train" if n % 4 else "serve",
                labels={"team": "vision" if n % 2 else "nlp", "tier": str(n % 3)},
            )
        )
    newest = made[::-1]
    seen, cursor = [], None
    while True:
        page, cursor = store.page(limit=5, after=cursor)
        seen += [r.uid for r in page]
        if cursor is None:
            break
    assert seen == newest

    def uids(limit: int = 50, **listing: Any) -> list[str]:
        return [r.uid for r in store.list_runs(limit=limit, **listing)]

    assert uids(project="a") == [u for i, u in enumerate(made) if i % 2][::-1]
    assert uids(owner="carol") == [u for i, u in enumerate(made) if not i % 3][::-1]
    assert uids(name="serve") == [u for i, u in enumerate(made) if not i % 4][::-1]
    assert uids(labels=["team=vision"]) == uids(project="a")
    both = [u for i, u in enumerate(made) if i % 2 and i % 3 == 1][::-1]
    assert uids(labels={"team": "vision", "tier": "1"}) == both
    assert uids(labels=["team=vision"], owner="carol") == uids(project="a", owner="carol")
    assert uids(labels=["team=robots"]) == []
    middle = store.get(made[5]).created_at
    assert uids(created_since=middle) == newest[:7]
    assert uids(created_until=middle) == newest[7:]
    assert uids(states=["created"]) == newest
    assert uids(states=["running"]) == []
    # A label filter pages from the cursor too.
    first, cursor = store.page(limit=2, labels=["team=nlp"])
    second, _ = store.page(limit=2, labels=["team=nlp"], after=cursor)
    assert [r.uid for r in first + second] == uids(labels=["team=nlp"])[:4]


@pytest.mark.parametrize(
    ("listing", "field"),
    [
        ({"after": "not-a-cursor"}, "cursor"),
        ({"after": "MTIzIHh5eg=="}, "cursor"),  # "123 xyz": not a run's key
        ({"labels": ["team"]}, "label"),
        ({"labels": ["team=has spaces"]}, "label value"),
        ({"states": ["sleeping"]}, "state"),
    ],
)
def test_a_bad_filter_or_cursor_is_a_clear_error(
    store: RunStore, listing: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidValueError) as refused:
        store.list_runs(**listing)
    assert refused.value.field == field


@contextmanager
def _statements(engine: Engine) -> Iterator[list[tuple[str, Any]]]:
    """The SQL statements the engine sends, with their parameters, while the block runs."""
    sent: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        sent.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", record)


def _reads_runs(statement: str) -> bool:
    return re.search(r"\b(FROM|JOIN) runs\b", statement) is not None


def _plan(engine: Engine, statement: str, parameters: Any) -> list[str]:
    """How the database runs the statement: PostgreSQL's plan nodes (told to avoid a full
    scan and a sort wherever an index can serve, so one in the plan means none can),
    SQLite's query plan lines."""
    with engine.connect() as connection:
        if engine.dialect.name == "sqlite":
            rows = connection.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)
            return [str(row[-1]) for row in rows]
        connection.exec_driver_sql("SET enable_seqscan = off")
        connection.exec_driver_sql("SET enable_sort = off")
        (plan,) = connection.exec_driver_sql("EXPLAIN (FORMAT JSON) " + statement, parameters).one()
        plan = json.loads(plan) if isinstance(plan, str) else plan
        nodes: list[str] = []

        def walk(node: dict[str, Any]) -> None:
            where = node.get("Index Name") or node.get("Relation Name") or ""
            nodes.append(f"{node['Node Type']} {where}".strip())
            for child in node.get("Plans", []):
                walk(child)

        walk(plan[0]["Plan"])
        return nodes


def _no_scan_nor_sort(dialect: str, plan: list[str]) -> str | None:
    """What is wrong with a list query's plan: a full scan of runs or their labels, a sort,
    or no index; ``None`` if nothing."""
    if dialect == "sqlite":
        for line in plan:
            if "TEMP B-TREE" in line:
                return f"sorts: {line}"
            if re.match(r"SCAN (runs|run_labels\w*)\b", line) and "INDEX" not in line:
                return f"scans the table: {line}"
        if not any("INDEX" in line or "PRIMARY KEY" in line for line in plan):
            return "uses no index"
        return None
    for node in plan:
        if node.startswith("Seq Scan"):
            return f"scans the table: {node}"
        if "Sort" in node:
            return f"sorts: {node}"
    if not any("Index" in node for node in plan):
        return "uses no index"
    return None


#: Every filter of the API, the CLI and the UI, alone and as a user's view (owner set).
_LISTINGS: list[dict[str, Any]] = [
    {},
    {"project": "a"},
    {"owner": "bob"},
    {"owner": "bob", "project": "a"},
    {"states": ["running"]},
    {"project": "a", "states": ["completed"]},
    {"owner": "bob", "project": "a", "states": ["completed"]},
    {"owner": "bob", "states": ["running"]},
    {"name": "train"},
    {"owner": "bob", "name": "train"},
    {"labels": ["team=vision"]},
    {"labels": ["team=vision", "tier=1"]},
    {"owner": "bob", "labels": ["team=vision"]},
    {"project": "a", "labels": ["team=vision"]},
    {"owner": "bob", "project": "a", "labels": ["team=vision"]},
    {"created_since": 1.0},
    {"created_until": 2e9},
    {"owner": "bob", "project": "a", "created_since": 1.0, "created_until": 2e9},
    {"project": "a", "updated_since": 1.0},  # a live page's rows changed since it was read
    {"owner": "bob", "project": "a", "updated_since": 1.0},
]


@pytest.mark.parametrize("listing", _LISTINGS, ids=lambda listing: ",".join(listing) or "all")
def test_every_list_query_reads_an_index_in_order(
    engine: Engine, store: RunStore, listing: dict[str, Any]
) -> None:
    # Without statistics SQLite reads a live page's filter index and sorts what it finds rather
    # than reading the few changed runs' index in order (the limit docs/service.md states for
    # SQLite); it must still read an index, never the table.
    sorts_allowed = "updated_since" in listing and engine.dialect.name == "sqlite"
    for n in range(6):
        created_run(
            store, project="ab"[n % 2], owner="bob", name="train", labels={"team": "vision"}
        )
    _, cursor = store.page(limit=2)
    assert cursor is not None
    with _statements(engine) as sent:
        store.list_runs(limit=50, brief=True, **listing)  # a first page
        store.list_runs(limit=50, **listing, after=cursor)  # a page from a cursor
    lists = [(statement, parameters) for statement, parameters in sent if _reads_runs(statement)]
    assert len(lists) == 2
    for statement, parameters in lists:
        if statement.endswith("LIMIT ? OFFSET ?"):  # SQLite's LIMIT: always with an offset
            assert parameters[-1] == 0
        else:
            assert "OFFSET" not in statement.upper()
        plan = _plan(engine, statement, parameters)
        problem = _no_scan_nor_sort(engine.dialect.name, plan)
        if sorts_allowed and problem is not None and problem.startswith("sorts"):
            unsorted = [step for step in plan if "TEMP B-TREE" not in step]
            problem = _no_scan_nor_sort(engine.dialect.name, unsorted)
        assert problem is None, f"{problem}\n{statement}\n{plan}"


def test_several_labels_are_read_from_one_labels_index_and_checked_by_key(
    engine: Engine, store: RunStore
) -> None:
    """One label's index gives the order; each other label is an index probe per run, never a
    second range read whole and joined (at a million runs, that join took 785 ms where the
    probes take 2)."""
    for n in range(6):
        created_run(store, labels={"team": "vision", "tier": str(n % 2)})
    with _statements(engine) as sent:
        found = store.list_runs(labels=["team=vision", "tier=1"], brief=True)
    assert len(found) == 3
    ((statement, parameters),) = [(s, p) for s, p in sent if _reads_runs(s)]
    plan = _plan(engine, statement, parameters)
    assert _no_scan_nor_sort(engine.dialect.name, plan) is None, plan
    if engine.dialect.name == "sqlite":
        labels = [line for line in plan if "run_labels" in line]
        assert any("ix_run_labels_created" in line for line in labels), plan
        assert any("PRIMARY KEY" in line or "autoindex" in line for line in labels), plan
    else:
        probes = [node for node in plan if re.search(r"Index .*run_labels", node)]
        assert len(probes) == 2, plan  # one per label, each an index
        assert not any(node.startswith(("Hash", "Merge")) for node in plan), plan


def test_the_abort_polls_read_their_own_index_and_find_only_live_runs_asked(
    engine: Engine, store: RunStore
) -> None:
    """The monitors ask several times a second which live runs someone asked to abort; with
    35,000 live runs among a million the state index made each ask read them all (170 ms on
    PostgreSQL). The answer comes from a partial index of the runs asked, whatever the number
    of runs, and holds the live ones only."""
    executor = (4242, time.time())
    asked, quiet, ended = (created_run(store, executor=executor) for _ in range(3))
    cluster = created_run(store)  # a run with no executor process: a cluster's
    for uid in (asked, ended, cluster):
        store.request_abort(uid)
    now = time.time()
    store.apply_many([RunEvent(ended, RunState.ABORTED, at=now)])
    with _statements(engine) as sent:
        assert store.abort_requests(4242) == [asked]
        assert store.abort_requests(4243) == []
        assert store.cluster_abort_requests("local") == [cluster]
    polls = [(statement, parameters) for statement, parameters in sent if _reads_runs(statement)]
    assert len(polls) == 3
    for statement, parameters in polls:
        plan = _plan(engine, statement, parameters)
        assert any("ix_runs_abort_asked" in step for step in plan), f"{statement}\n{plan}"
    assert quiet not in store.abort_requests(4242)


def test_the_held_runs_poll_reads_their_own_index(engine: Engine, store: RunStore) -> None:
    """While a budget is set the monitors look for the runs it holds every few seconds: read
    from a partial index of those runs alone, not from every pending run; oldest first."""
    hold = "the project's budget is spent"
    older, newer = (created_run(store, held=hold) for _ in range(2))
    created_run(store, executor=(4242, time.time()), held=hold)  # another process's
    store.apply_many([RunEvent(created_run(store), RunState.PENDING, at=time.time())])  # not held
    with _statements(engine) as sent, engine.connect() as connection:
        assert held_runs(connection, "local", None) == [older, newer]
        assert held_runs(connection, "kubernetes", None) == []
    polls = [(statement, parameters) for statement, parameters in sent if _reads_runs(statement)]
    assert len(polls) == 2
    for statement, parameters in polls:
        plan = _plan(engine, statement, parameters)
        assert any("ix_runs_held" in step for step in plan), f"{statement}\n{plan}"
        assert _no_scan_nor_sort(engine.dialect.name, plan) is None, plan


def test_the_leaders_pick_up_reads_its_own_index(engine: Engine, store: RunStore) -> None:
    """A leader looks four times a second for the runs a replica recorded for it to launch:
    from a partial index of those runs alone, not from every run not yet launched."""
    older, newer = (created_run(store, awaiting_leader=True) for _ in range(2))
    created_run(store)  # recorded here, not awaiting the leader
    with _statements(engine) as sent:
        assert store.awaiting_leader("local") == [older, newer]
        assert store.awaiting_leader("kubernetes") == []
    polls = [(statement, parameters) for statement, parameters in sent if _reads_runs(statement)]
    assert len(polls) == 2
    for statement, parameters in polls:
        plan = _plan(engine, statement, parameters)
        assert any("ix_runs_awaiting_leader" in step for step in plan), f"{statement}\n{plan}"


def test_counts_read_no_run(engine: Engine, store: RunStore) -> None:
    created_run(store)
    with _statements(engine) as sent:
        assert store.count_runs(project="default", owner="bob") == 1
        assert store.state_counts() == {"created": 1}
        assert store.project_counts(owner="bob") == {"default": 1}
    assert sent
    assert not any(_reads_runs(statement) for statement, _ in sent)


def _counted(engine: Engine) -> dict[tuple[str, str, str], int]:
    """The runs counted the slow way, per (project, owner, state)."""
    query = select(RUNS.c.project, RUNS.c.owner, RUNS.c.state, func.count()).group_by(
        RUNS.c.project, RUNS.c.owner, RUNS.c.state
    )
    with engine.connect() as connection:
        return {(p, o, s): n for p, o, s, n in connection.execute(query)}


def _kept(engine: Engine) -> dict[tuple[str, str, str], int]:
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT project, owner, state, runs FROM run_counts"))
        return {(p, o, s): n for p, o, s, n in rows if n}


def test_counts_stay_equal_to_counting_the_runs(engine: Engine, store: RunStore) -> None:
    runs = [
        created_run(store, project="ab"[n % 2], owner=("bob", "carol")[n % 3 == 0])
        for n in range(9)
    ]
    assert _kept(engine) == _counted(engine)
    start = time.time()
    # A burst that moves several runs through several states, some twice.
    store.apply_many(
        [RunEvent(uid, RunState.PENDING, at=start) for uid in runs[:6]]
        + [RunEvent(uid, RunState.RUNNING, at=start) for uid in runs[:4]]
        + [RunEvent(runs[0], RunState.COMPLETED, at=start)]
        + [RunEvent(runs[1], RunState.RUNNING, at=start)]  # the same state again
        + [RunEvent(runs[0], RunState.RUNNING, at=start)]  # refused: it ended
    )
    assert _kept(engine) == _counted(engine)
    retry = RetryDecision(
        attempt=2,
        due_at=start + 5,
        plan=AttemptPlan(),
        requests={},
        limits={},
        preemption_mode="",
        adjustments="",
        message="attempt 2 of 3 in 5s",
    )
    store.apply_many(
        [RunEvent(runs[2], RunState.ERROR, reason="Error", exit_code=1, at=start)], {0: retry}
    )
    assert store.get(runs[2]).state is RunState.PENDING
    assert _kept(engine) == _counted(engine)
    store.request_abort(runs[3])
    store.apply_many(
        [
            RunEvent(runs[3], RunState.ABORTING, at=start),
            RunEvent(runs[3], RunState.ABORTED, at=start),
            RunEvent(runs[2], RunState.RUNNING, attempt=2, at=start),
            RunEvent(runs[2], RunState.COMPLETED, attempt=2, at=start),
        ]
    )
    assert _kept(engine) == _counted(engine)
    store.mark_lost(lambda pid, started: False)
    assert _kept(engine) == _counted(engine)
    assert store.delete_runs([runs[0], runs[4], uuid.uuid4().hex]) == 2
    assert _kept(engine) == _counted(engine)
    assert store.count_runs() == 7
    assert store.count_runs(project="a", states=["completed", "aborted"]) == 1
    assert store.state_counts(owner="carol") == _by_state(_counted(engine), "carol")


def _by_state(counted: dict[tuple[str, str, str], int], owner: str) -> dict[str, int]:
    states: dict[str, int] = {}
    for (_, who, state), n in counted.items():
        if who == owner:
            states[state] = states.get(state, 0) + n
    return states


def test_an_existing_database_is_upgraded_with_its_runs_labels_and_counts(
    empty_database: str,
) -> None:
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine, insert

    from runplane.service.db import MIGRATIONS

    from .run_rows import run_row

    engine = create_engine(empty_database)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0007")
    now = time.time() - 100
    rows = []
    for n in range(5):
        labels = {"team": "vision"} if n % 2 else {}
        function = {"metadata": {"labels": labels}} if n != 4 else {"kind": "job"}
        state = "completed" if n < 3 else "error"
        rows.append(run_row(now + n, project="old", state=state, function=function))
    with engine.begin() as connection:
        connection.execute(insert(RUNS), rows)  # the runs table as of 0007
    engine.dispose()
    store = RunStore(connect(empty_database))
    try:
        assert store.state_counts() == {"completed": 3, "error": 2}
        labelled = [r["uid"] for r in rows if r["function"].get("metadata", {}).get("labels")]
        assert [r.uid for r in store.list_runs(labels=["team=vision"])] == labelled[::-1]
        uid = created_run(store, project="old")
        assert store.count_runs(project="old") == 6
        assert store.list_runs(limit=1)[0].uid == uid
    finally:
        store.close()


def test_the_api_pages_filters_and_counts_as_the_caller_may_see(server: Any, client: Any) -> None:
    from .conftest import ADMIN, USER

    store = server.runs.store
    bobs = [created_run(store, owner="bob", labels={"team": "vision"}) for _ in range(5)]
    carols = [created_run(store, owner="carol", name="serve") for _ in range(2)]
    seen, cursor = [], None
    for _ in range(3):
        params: dict[str, Any] = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        answer = client.get("/api/v1/runs", headers=USER, params=params)
        assert answer.status_code == 200, answer.text
        seen += [run["uid"] for run in answer.json()]
        cursor = answer.headers.get("X-Runplane-Next-Cursor")
    assert seen == bobs[::-1]
    assert cursor is None
    # A user's owner filter is their own, whatever they ask; an admin's is theirs to choose.
    mine = client.get("/api/v1/runs", headers=USER, params={"owner": "carol"}).json()
    assert {run["owner"] for run in mine} == {"bob"}
    theirs = client.get("/api/v1/runs", headers=ADMIN, params={"owner": "carol"}).json()
    assert [run["uid"] for run in theirs] == carols[::-1]
    named = client.get("/api/v1/runs", headers=ADMIN, params={"name": "serve"}).json()
    assert [run["uid"] for run in named] == carols[::-1]
    labelled = client.get("/api/v1/runs", headers=ADMIN, params={"label": "team=vision"})
    assert [run["uid"] for run in labelled.json()] == bobs[::-1]
    since = store.get(bobs[3]).created_at
    recent = client.get("/api/v1/runs", headers=ADMIN, params={"created_since": since}).json()
    assert [run["uid"] for run in recent] == [*carols[::-1], bobs[4], bobs[3]]
    iso = "2000-01-01T00:00:00"
    assert client.get("/api/v1/runs", headers=ADMIN, params={"created_until": iso}).json() == []
    counts = client.get("/api/v1/runs/counts", headers=USER).json()
    assert counts == {"total": 5, "states": {"created": 5}}
    counts = client.get("/api/v1/runs/counts", headers=ADMIN, params={"owner": "carol"}).json()
    assert counts == {"total": 2, "states": {"created": 2}}
    for params in ({"cursor": "garbage"}, {"label": "no-equals"}, {"created_since": "someday"}):
        refused = client.get("/api/v1/runs", headers=ADMIN, params=params)
        assert refused.status_code in (400, 422), refused.text
        assert "Traceback" not in refused.text


def test_the_api_lists_the_runs_changed_since_a_time_latest_change_first(
    server: Any, client: Any
) -> None:
    """What ``runplane runs -w`` asks each tick: the caller's runs changed at or after a time."""
    from .conftest import USER

    store = server.runs.store
    first, second = created_run(store), created_run(store, labels={"team": "vision"})
    created_run(store, owner="carol")  # another user's: never shown to bob
    since = store.get(second).updated_at
    store.apply(RunEvent(first, RunState.PENDING, reason="Queued", at=time.time()))
    answer = client.get("/api/v1/runs", headers=USER, params={"updated_since": since})
    assert answer.status_code == 200, answer.text
    assert [run["uid"] for run in answer.json()] == [first, second]
    changed = store.get(first).updated_at
    later = client.get("/api/v1/runs", headers=USER, params={"updated_since": changed})
    assert [(run["uid"], run["state"]) for run in later.json()] == [(first, "pending")]
    labelled = {"updated_since": since, "label": "team=vision"}
    assert [
        run["uid"] for run in client.get("/api/v1/runs", headers=USER, params=labelled).json()
    ] == [second]
    refused = client.get("/api/v1/runs", headers=USER, params={"updated_since": "soon"})
    assert refused.status_code == 422, refused.text


def test_rows_read_as_named_tuples_hold_what_the_rows_hold(engine: Engine, store: RunStore) -> None:
    """A listing reads its rows as named tuples (runplane.service.db.rows): every column's
    value as the row has it, by name, JSON decoded; one type per shape of row."""
    from runplane.service.db.rows import plain

    uids = {created_run(store, labels={"team": "a"}) for _ in range(3)}
    query = select(RUNS).where(RUNS.c.uid.in_(uids))
    with engine.connect() as connection:
        rows = connection.execute(query).all()
        tuples = plain(connection.execute(query))
        same_shape = plain(connection.execute(query))
        again = plain(connection.execute(query.with_only_columns(RUNS.c.uid, RUNS.c.state)))
    assert [tuple(row) for row in rows] == [tuple(t) for t in tuples]
    for row, read in zip(rows, tuples, strict=True):
        assert {c: getattr(read, c) for c in row._mapping} == dict(row._mapping)
    assert isinstance(tuples[0].function, dict)  # a JSON column, decoded
    assert {type(t) for t in tuples + same_shape} == {type(tuples[0])}
    assert again[0]._fields == ("uid", "state")


def test_retention_reads_an_index_and_its_indexes_hold_no_live_run(
    engine: Engine, store: RunStore, tmp_path: Any
) -> None:
    """Retention's queries by age (runs past theirs, files past theirs) read an index, not
    the table; and its indexes of runs by their end hold ended runs only, so recording a run,
    and every change of a live one, writes none of their pages."""
    from runplane.service.retention import Retention
    from runplane.spec.retention import RetentionPolicy

    live, ended = created_run(store), created_run(store)
    store.apply_many([RunEvent(ended, RunState.COMPLETED, at=time.time())])
    policy = RetentionPolicy(runs_max_age="30d", logs_max_age="1d")
    later = time.time() + 3 * 86400
    with _statements(engine) as sent:
        Retention(engine, tmp_path, batch=100).sweep(policy, {}, later)
    by_age = [(s, p) for s, p in sent if _reads_runs(s) and "ended_at <" in s]
    assert len(by_age) == 2, by_age
    for statement, parameters in by_age:
        plan = _plan(engine, statement, parameters)
        scans = [step for step in plan if re.match(r"(SCAN runs$|Seq Scan)", step)]
        assert not scans, f"{statement}\n{plan}"
        assert any("ix_runs" in step for step in plan), f"{statement}\n{plan}"
    assert store.get(ended).logs_removed_at == later  # its files past their age: removed
    assert store.get(live).logs_removed_at is None
    for index in ("ix_runs_ended", "ix_runs_files_kept_ended"):
        assert "ended_at IS NOT NULL" in _index_definition(engine, index)


def _index_definition(engine: Engine, name: str) -> str:
    """The index's definition as the database keeps it (its ``WHERE`` for a partial one)."""
    with engine.connect() as connection:
        if engine.dialect.name == "sqlite":
            query = "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = :name"
        else:
            query = "SELECT indexdef FROM pg_indexes WHERE indexname = :name"
        return str(connection.execute(text(query), {"name": name}).scalar_one())
