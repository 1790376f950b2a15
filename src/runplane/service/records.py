"""The run store: run records as tables, created once, then changed only by runtime events,
aborts and recovery.

A record is written in the same transaction as its first transition, so a run is either fully
recorded or not at all. Events are applied by :mod:`runplane.service.recording`.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, TypedDict, Unpack

from sqlalchemy import Connection, Engine, Table, bindparam, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload

from runplane.errors import AmbiguousError, NotFoundError, RunExistsError, RunFinishedError
from runplane.runs import (
    TERMINAL,
    AttemptRecord,
    Reason,
    RunRecord,
    RunState,
    TransitionRecord,
    check_uid,
)
from runplane.runtimes.events import RunEvent
from runplane.service import resizes, run_counts
from runplane.service.db import READ_ONLY, session_factory
from runplane.service.db.group_commit import GroupCommit
from runplane.service.db.held import HeldConnection
from runplane.service.db.models import (
    ABORT_ASKED,
    ARTIFACTS,
    ATTEMPTS,
    AWAITING_LEADER,
    LABELS,
    RESIZES,
    RUNS,
    TRANSITIONS,
    Attempt,
    Run,
)
from runplane.service.db.prepared import Prepared, PreparedRead
from runplane.service.db.rows import oldest_first, plain
from runplane.service.listing import RunFilter, cursor_of, key_of
from runplane.service.recording import apply_burst
from runplane.service.retries import RetryDecision

TERMINAL_STATES = [state.value for state in TERMINAL]
#: Live runs of an executor process asked to abort (:meth:`RunStore.abort_requests`).
_ABORT_REQUESTS = select(RUNS.c.uid).where(
    ABORT_ASKED, RUNS.c.executor_pid == bindparam("executor")
)
#: What a run recorded by a replica that does not lead says until the leader launches it.
_AWAITING_TEXT = "recorded by a replica that does not lead; the leading replica launches it"


class RunListing(TypedDict, total=False):
    """What :meth:`RunStore.list_runs` takes besides its limit, for those that pass a listing
    on: which runs (see :class:`RunFilter`), from where in the list (``after``, a cursor), and
    whether brief."""

    project: str | None
    states: Iterable[str]
    owner: str | None
    name: str | None
    labels: Iterable[str] | Mapping[str, str] | None
    created_since: float | None
    created_until: float | None
    after: str | None
    uids: Iterable[str] | None
    updated_since: float | None
    brief: bool


def attempt_of(a: Attempt) -> AttemptRecord:
    return AttemptRecord(
        a.number,
        a.node,
        a.process_id,
        a.started_at,
        a.ended_at,
        a.exit_code,
        a.reason,
        failure=a.failure or "",
        message=a.message or "",
        node_group=a.node_group or "",
        spot=a.spot,
        due_at=a.due_at,
        launched_at=a.launched_at,
        requests=dict(a.requests or {}),
        limits=dict(a.limits or {}),
        preemption_mode=a.preemption_mode or "",
        adjustments=a.adjustments or "",
        peak_memory_bytes=a.peak_memory_bytes or 0,
        cpu_seconds=a.cpu_seconds or 0.0,
    )


def record_of(run: Run, brief: bool = False) -> RunRecord:
    """The run model's record of a row and its children; ``brief`` leaves out the function
    snapshot, transitions and artifacts (see :meth:`RunStore.list_runs`)."""
    if brief:
        return _record(run, [], run.attempts, [], brief=True)
    return _record(run, run.transitions, run.attempts, run.artifacts)


def _record(
    run: Any,
    transitions: Iterable[Any],
    attempts: Iterable[Any],
    artifacts: Iterable[Any],
    brief: bool = False,
    resized: Iterable[Any] = (),
) -> RunRecord:
    """The record of a run's row and its children's, read as ORM objects or as rows (the
    same names either way)."""
    return RunRecord(
        uid=run.uid,
        project=run.project,
        name=run.name,
        runtime=run.runtime,
        state=RunState(run.state),
        reason=run.reason,
        status_text=run.status_text,
        params=run.params,
        inputs=run.inputs,
        thresholds=run.thresholds,
        priority_class=run.priority_class,
        requests=run.requests,
        limits=run.limits,
        results=run.results,
        peak_memory_bytes=run.peak_memory_bytes,
        cpu_seconds=run.cpu_seconds,
        created_at=run.created_at,
        updated_at=run.updated_at,
        state_since=run.state_since,
        started_at=run.started_at,
        ended_at=run.ended_at,
        owner=run.owner,
        isolation=run.isolation,
        function={} if brief else run.function,
        transitions=[
            TransitionRecord(RunState(t.state), t.reason, t.message, t.at) for t in transitions
        ],
        attempts=[attempt_of(a) for a in attempts],
        artifacts=[{"key": a.key, "path": a.path, "size": a.size} for a in artifacts],
        attempt=run.attempt or 1,
        retry_at=run.retry_at,
        logs_removed_at=run.logs_removed_at,
        resizes=resizes.records(resized),
    )


#: A run's whole record in four statements, each compiled once: its row, transitions,
#: attempts and artifacts.
_READ = (
    PreparedRead(select(RUNS).where(RUNS.c.uid == bindparam("uid")), RUNS),
    *(
        PreparedRead(
            select(table).where(table.c.run_uid == bindparam("uid")).order_by(order), table
        )
        for table, order in (
            (TRANSITIONS, TRANSITIONS.c.id),
            (ATTEMPTS, ATTEMPTS.c.number),
            (ARTIFACTS, ARTIFACTS.c.id),
        )
    ),
)
#: The columns :meth:`RunStore.create` gives a new run's row and its first attempt's.
_CREATED_RUN = (
    "uid",
    "project",
    "name",
    "runtime",
    "state",
    "reason",
    "status_text",
    "function",
    "params",
    "inputs",
    "thresholds",
    "priority_class",
    "requests",
    "limits",
    "results",
    "peak_memory_bytes",
    "cpu_seconds",
    "created_at",
    "updated_at",
    "state_since",
    "started_at",
    "ended_at",
    "executor_pid",
    "executor_started",
    "abort_requested",
    "owner",
    "source_dir",
    "requeue",
    "isolation",
    "attempt",
    "retry_at",
    "logs_removed_at",
)
_FIRST_ATTEMPT = (
    "run_uid",
    "number",
    "node",
    "process_id",
    "started_at",
    "ended_at",
    "exit_code",
    "reason",
    "failure",
    "message",
    "node_group",
    "spot",
    "due_at",
    "launched_at",
    "requests",
    "limits",
    "preemption_mode",
    "adjustments",
    "peak_memory_bytes",
    "cpu_seconds",
)
#: A new run's row, first transition and first attempt, each executed as compiled once.
_INSERTS = (
    Prepared(insert(RUNS), RUNS, _CREATED_RUN),
    Prepared(insert(TRANSITIONS), TRANSITIONS, ("run_uid", "state", "reason", "message", "at")),
    Prepared(insert(ATTEMPTS), ATTEMPTS, _FIRST_ATTEMPT),
)
_INSERT_LABELS = insert(LABELS)


@dataclass(frozen=True, slots=True)
class _NewRun:
    """A new run's rows: its own, its first transition's and first attempt's (in
    :data:`_INSERTS`' order), and its labels'."""

    rows: tuple[dict[str, Any], dict[str, Any], dict[str, Any]]
    labels: list[dict[str, Any]]


def _write_new_runs(connection: Connection, runs: Sequence[_NewRun]) -> None:
    """Insert new runs' rows, each table's in one statement, and add them to the counts."""
    for index, statement in enumerate(_INSERTS):
        statement.execute(connection, [run.rows[index] for run in runs])
    labels = [label for run in runs for label in run.labels]
    if labels:
        connection.execute(_INSERT_LABELS, labels)
    keys = ((row["project"], row["owner"], row["state"]) for row in (run.rows[0] for run in runs))
    run_counts.add(connection, Counter(keys))


def _children(
    connection: Connection, table: Table, order: Any, uids: list[str]
) -> dict[str, list[Any]]:
    """The rows of a run's children (its attempts, transitions or artifacts) for several runs
    in one statement, by run, in order."""
    found: dict[str, list[Any]] = {}
    if uids:
        query = select(table).where(table.c.run_uid.in_(uids)).order_by(order)
        for row in plain(connection.execute(query)):
            found.setdefault(row.run_uid, []).append(row)
    return found


def _missing(uid: str) -> str:
    return f"run {uid!r} does not exist (list runs with `runplane runs`)"


def _read(connection: Connection, uid: str) -> RunRecord:
    """A run's whole record without the ORM's identity map: the waiter of every run reads it."""
    run_row, transitions, attempts, artifacts = _READ
    found = list(run_row.rows(connection, uid=uid))  # read whole: the cursor ends closed
    if not found:
        raise NotFoundError(_missing(uid))
    run = found[0]
    return _record(
        run,
        transitions.rows(connection, uid=uid),
        attempts.rows(connection, uid=uid),
        artifacts.rows(connection, uid=uid),
        resized=connection.execute(resizes.READ, {"uid": uid}) if run.resized else (),
    )


#: How a run ended, as what it left behind tells: ``(uid, runtime, attempt)`` to the end its
#: attempt reported there, or ``None`` (see ``Runtime.end_left``).
EndLeft = Callable[[str, str, int], RunEvent | None]


@dataclass(slots=True)
class Settled:
    """What :meth:`RunStore.mark_lost` did with the runs of executors that are gone."""

    #: Ended ``executor lost``: nothing says how they ended.
    lost: list[str] = field(default_factory=list)
    #: Ended as they reported in what they left behind.
    ended: list[str] = field(default_factory=list)
    #: A service's runs taken over by the one starting: to launch, and to settle.
    adopted: list[str] = field(default_factory=list)
    orphaned: list[str] = field(default_factory=list)


class RunStore:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._sessions = session_factory(engine)
        #: New runs' records, those that arrive together written in one transaction.
        self._created = GroupCommit(engine, _write_new_runs)
        #: Bursts of events: the recorder writes one after another, all the time.
        self._bursts = HeldConnection(engine)
        #: Reads: on SQLite they see a snapshot beside a writer instead of taking the write
        #: lock (see :mod:`runplane.service.db`).
        self._reader = engine.execution_options(**READ_ONLY)
        self._reads = session_factory(self._reader)

    @property
    def engine(self) -> Engine:
        """The database, for the stores that keep a run's other tables (its usage series)."""
        return self._engine

    def close(self) -> None:
        """Close the pooled connections: a closed service holds none of the database's (a
        PostgreSQL server has a fixed number to share); a later call opens one again."""
        self._created.close()
        self._bursts.close()
        self._engine.dispose()

    def create(
        self,
        *,
        uid: str,
        project: str,
        name: str,
        runtime: str,
        function: dict[str, Any],
        params: dict[str, Any],
        inputs: dict[str, Any],
        thresholds: dict[str, Any],
        priority_class: str,
        requests: dict[str, Any],
        limits: dict[str, Any],
        executor: tuple[int, float] | None,
        owner: str = "",
        source_dir: str = "",
        requeue: bool = False,
        preemption_mode: str = "",
        awaiting_leader: bool = False,
        held: str = "",
        adjustments: str = "",
    ) -> RunRecord:
        """Record a new run and its first attempt; returns its record (built here, not read
        back). A replica that does not lead records it ``awaiting_leader``, for the leader's
        :meth:`awaiting_leader` to find; a run its project's budget holds is recorded
        ``pending`` with ``held`` as its status text (:mod:`.budget_holds` launches it)."""
        now = time.time()
        state = RunState.PENDING if held else RunState.CREATED
        row: dict[str, Any] = {
            "uid": uid,
            "project": project,
            "name": name,
            "runtime": runtime,
            "state": state.value,
            "reason": Reason.AWAITING_LEADER.value if awaiting_leader else "",
            "status_text": _AWAITING_TEXT if awaiting_leader else "",
            "function": function,
            "params": params,
            "inputs": inputs,
            "thresholds": thresholds,
            "priority_class": priority_class,
            "requests": requests,
            "limits": limits,
            "results": {},
            "peak_memory_bytes": 0,
            "cpu_seconds": 0.0,
            "created_at": now,
            "updated_at": now,
            "state_since": now,
            "started_at": None,
            "ended_at": None,
            "executor_pid": executor[0] if executor else None,
            "executor_started": executor[1] if executor else None,
            "abort_requested": False,
            "owner": owner,
            "source_dir": source_dir,
            "requeue": requeue,
            "isolation": "",
            "attempt": 1,
            "retry_at": None,
            "logs_removed_at": None,
        }
        if held:
            row |= {"reason": Reason.BUDGET.value, "status_text": held}
        transition: dict[str, Any] = {"run_uid": uid, "state": state.value}
        transition |= {"reason": row["reason"] if held else "", "message": held, "at": now}
        attempt: dict[str, Any] = {
            "run_uid": uid,
            "number": 1,
            "node": "",
            "process_id": None,
            "started_at": None,
            "ended_at": None,
            "exit_code": None,
            "reason": "",
            "failure": "",
            "message": "",
            "node_group": "",
            "spot": None,
            "due_at": now,
            "launched_at": None if held else now,  # the caller launches it next
            "requests": requests,
            "limits": limits,
            "preemption_mode": preemption_mode,
            "adjustments": adjustments,
            "peak_memory_bytes": 0,
            "cpu_seconds": 0.0,
        }
        labels = [
            {"run_uid": uid, "key": key, "value": value, "created_at": now}
            | {"project": project, "owner": owner}
            for key, value in dict(function.get("metadata", {}).get("labels") or {}).items()
        ]
        try:
            self._created.commit(_NewRun((row, transition, attempt), labels))
        except IntegrityError:
            raise RunExistsError(f"run {uid} is already recorded") from None
        return _record(
            SimpleNamespace(**row),
            [SimpleNamespace(**transition)],
            [SimpleNamespace(**attempt)],
            [],
        )

    def _load(self, session: Any, uid: str) -> Run:
        run = session.get(
            Run,
            uid,
            options=[
                selectinload(Run.transitions),
                selectinload(Run.attempts),
                selectinload(Run.artifacts),
            ],
        )
        if run is None:
            raise NotFoundError(_missing(uid))
        return run  # type: ignore[no-any-return]

    def exists(self, uid: str) -> bool:
        return self.state_of(uid) is not None

    def known(self, uids: Iterable[str]) -> set[str]:
        """Which of ``uids`` are recorded: a query per thousand, not one per uid (a restart
        asks it of every run on the cluster)."""
        wanted, found = sorted(set(uids)), set()
        with self._reads() as session:
            for at in range(0, len(wanted), 1000):
                chunk = wanted[at : at + 1000]
                found |= set(session.scalars(select(Run.uid).where(Run.uid.in_(chunk))))
        return found

    def state_of(self, uid: str) -> RunState | None:
        """The run's state; ``None`` if there is no such run (one column of one row)."""
        with self._reads() as session:
            state = session.scalar(select(Run.state).where(Run.uid == uid))
        return None if state is None else RunState(state)

    def get(self, uid: str, owner: str | None = None) -> RunRecord:
        """The run ``uid`` (or a unique prefix) names; with ``owner``, among that owner's runs
        only: another's run is answered as no run, and a prefix is matched against the
        owner's runs alone, so neither a refusal nor an ambiguity tells of runs not theirs."""
        with self._reader.begin() as connection:
            record = _read(connection, self._resolve(connection, uid, owner))
        if owner is not None and record.owner != owner:
            raise NotFoundError(_missing(uid))
        return record

    def _resolve(self, session: Session | Connection, uid: str, owner: str | None = None) -> str:
        """Full uids pass through; a unique prefix of at least 6 characters is accepted too
        (of ``owner``'s runs, when given)."""
        if len(check_uid(uid)) == 32:
            return uid
        query = select(Run.uid).where(Run.uid.startswith(uid, autoescape=True))
        if owner is not None:
            query = query.where(Run.owner == owner)
        matches = session.scalars(query.limit(2)).all()
        if len(matches) == 1:
            return str(matches[0])
        if len(matches) > 1:
            raise AmbiguousError("uid", f"{uid!r} starts the uids of several runs; give more of it")
        return uid

    def list_runs(
        self,
        project: str | None = None,
        states: Iterable[str] = (),
        limit: int = 50,
        owner: str | None = None,
        uids: Iterable[str] | None = None,
        updated_since: float | None = None,
        brief: bool = False,
        name: str | None = None,
        labels: Iterable[str] | Mapping[str, str] | None = None,
        created_since: float | None = None,
        created_until: float | None = None,
        after: str | None = None,
    ) -> list[RunRecord]:
        """Runs of a :class:`RunFilter`, newest first, from the cursor ``after`` (see
        :mod:`runplane.service.listing`); ``uids`` picks those runs only and
        ``updated_since`` those changed since then, the most recently changed first (a live
        page's rows).

        ``brief`` records, for lists that show a run per row, have no function snapshot,
        transitions or artifacts (empty): reading the snapshots, embedded code included, is
        most of the cost of a page of runs.
        """
        wanted = RunFilter.of(project, states, owner, name, labels, created_since, created_until)
        query = wanted.query(key_of(after) if after else None)
        if uids is not None:
            query = query.where(Run.uid.in_(list(uids)))
        if updated_since is not None:  # the most recently changed first, from their index
            query = query.where(Run.updated_at >= updated_since)
            query = query.order_by(None).order_by(Run.updated_at.desc())
        if brief:
            query = query.with_only_columns(*(c for c in RUNS.c if c.name != "function"))
        with self._reader.begin() as connection:
            runs = plain(connection.execute(query.limit(limit)))
            found = [run.uid for run in runs]
            children = [_children(connection, ATTEMPTS, ATTEMPTS.c.number, found)]
            # Resizes only where a run had some: most pages cost no statement more.
            grown = [run.uid for run in runs if run.resized]
            resized = _children(connection, RESIZES, RESIZES.c.id, grown) if grown else {}
            if not brief:
                children += [
                    _children(connection, TRANSITIONS, TRANSITIONS.c.id, found),
                    _children(connection, ARTIFACTS, ARTIFACTS.c.id, found),
                ]
        attempts, transitions, artifacts = (*children, {}, {})[:3]
        return [
            _record(
                run,
                transitions.get(run.uid, ()),
                attempts.get(run.uid, ()),
                artifacts.get(run.uid, ()),
                brief=brief,
                resized=resized.get(run.uid, ()),
            )
            for run in runs
        ]

    def page(
        self, limit: int = 50, **listing: Unpack[RunListing]
    ) -> tuple[list[RunRecord], str | None]:
        """A page of :meth:`list_runs` and the cursor of the next (``None`` after the last)."""
        runs = self.list_runs(limit=limit + 1, **listing)
        return runs[:limit], cursor_of(runs[limit - 1]) if len(runs) > limit else None

    def count_runs(
        self, project: str | None = None, states: Iterable[str] = (), owner: str | None = None
    ) -> int:
        """How many runs of a project, owner and states there are, from the counts (see
        :mod:`runplane.service.run_counts`), not from the runs."""
        wanted = RunFilter.of(project, states, owner)
        return run_counts.of_states(self.state_counts(project, owner), wanted.states)

    def state_counts(self, project: str | None = None, owner: str | None = None) -> dict[str, int]:
        """Runs per state, of a project and an owner when given, from the counts."""
        with self._reader.begin() as connection:
            return run_counts.by_state(connection, project, owner)

    def project_counts(self, owner: str | None = None) -> dict[str, int]:
        """Runs per project, of an owner when given, from the counts."""
        with self._reader.begin() as connection:
            return run_counts.by_project(connection, owner)

    def delete_runs(self, uids: Iterable[str]) -> int:
        """Delete these runs' records, counts included (see :func:`run_counts.delete_runs`);
        how many were deleted."""
        with self._engine.begin() as connection:
            return run_counts.delete_runs(connection, set(uids))

    def apply(self, event: RunEvent, retry: RetryDecision | None = None) -> RunEvent | None:
        """Record what a runtime reported (see :meth:`apply_many`)."""
        return self.apply_many([event], {0: retry} if retry else None)[0]

    def apply_many(
        self, events: Sequence[RunEvent], retries: Mapping[int, RetryDecision] | None = None
    ) -> list[RunEvent | None]:
        """Record several events in one transaction (a watch delivers them in bursts), in
        order; for each, the event as recorded, or ``None`` if its run had already finished,
        is unknown, or is on a later attempt than the event's.

        ``retries`` holds, by position, the decision to try again after an event that ends an
        attempt: the attempt ends, the next is recorded with when it is due, and the run goes
        back to ``pending`` (the recorded event says so), all in this transaction, before
        anything is launched. A run a person asked to abort, or one that ended meanwhile, ends
        as the event says instead.

        Transitions, attempts and artifacts are written as rows of their own, and of the run
        only the columns an event changes are loaded: this is on the path of every event.
        """
        with self._bursts.begin() as connection:
            return apply_burst(connection, events, retries or {})

    def attempt_launched(self, uid: str, attempt: int) -> None:
        """The runtime has the attempt: the run no longer waits for it (a restart before this
        launches it again, which a runtime with deterministic names makes no copy of)."""
        now = time.time()
        with self._sessions.begin() as session:
            session.execute(
                update(Run).where(Run.uid == uid, Run.attempt == attempt).values(retry_at=None)
            )
            session.execute(
                update(Attempt)
                .where(Attempt.run_uid == uid, Attempt.number == attempt)
                .values(launched_at=now)
            )

    def pending_retries(
        self, runtime: str, executor_pid: int | None = None
    ) -> list[tuple[str, int, float]]:
        """Runs waiting for their next attempt: (uid, attempt, due time), of ``runtime`` and,
        when given, of that executor."""
        query = select(Run.uid, Run.attempt, Run.retry_at).where(
            Run.retry_at.is_not(None),
            Run.runtime == runtime,
            Run.state.not_in(TERMINAL_STATES),
        )
        if executor_pid is not None:
            query = query.where(Run.executor_pid == executor_pid)
        with self._reads() as session:
            rows = session.execute(query).all()
        return [(uid, attempt, due) for uid, attempt, due in rows if due is not None]

    def request_abort(self, uid: str) -> RunRecord:
        """Flag a run for its owner to abort; a finished run answers with a clear error."""
        with self._sessions.begin() as session:
            run = self._load(session, self._resolve(session, uid))
            if RunState(run.state).terminal:
                raise RunFinishedError(
                    f"run {run.uid} already finished ({run.state}); only pending or running "
                    "runs can be aborted"
                )
            run.abort_requested = True
            return record_of(run)

    def abort_requests(self, executor_pid: int) -> list[str]:
        """Live runs of ``executor_pid`` that another process asked to abort. The monitor
        asks five times a second: one prebuilt select of the few entries of their own partial
        index (``ABORT_ASKED``), never a read of every live run."""
        with self._reader.begin() as connection:
            return list(connection.scalars(_ABORT_REQUESTS, {"executor": executor_pid}))

    def cluster_abort_requests(self, runtime: str) -> list[str]:
        """Runs of ``runtime`` (one whose runs have no executor process: a cluster's) that a
        replica was asked to abort, for the leader to carry out."""
        query = select(Run.uid).where(
            ABORT_ASKED, Run.executor_pid.is_(None), Run.runtime == runtime
        )
        with self._reads() as session:
            return list(session.scalars(query))

    def awaiting_leader(self, runtime: str) -> list[str]:
        """Runs of ``runtime`` that a replica which does not lead recorded and nobody launched
        yet, oldest first: read from their own partial index (``AWAITING_LEADER``)."""
        query = select(Run.uid, Run.created_at).where(
            AWAITING_LEADER, Run.runtime == runtime, ~Run.abort_requested
        )
        with self._reads() as session:
            waiting = session.execute(query).all()
        return oldest_first(waiting)

    def owner(self, uid: str) -> tuple[int | None, float | None]:
        with self._reads() as session:
            run = self._load(session, uid)
            return run.executor_pid, run.executor_started

    def mark_lost(
        self,
        alive: Callable[[int, float], bool],
        runtime: str = "",
        adopt: tuple[int, float] | None = None,
        left: EndLeft | None = None,
    ) -> Settled:
        """Settle runs whose executor process is gone.

        A service's runs (``requeue``) wait for that service, not for whoever looks. With
        ``adopt`` (a service starting on the same runtime) they become ``adopt``'s: those that
        had not started, or were between attempts, to launch (``adopted``); those whose attempt
        was running when the service died, to settle, retrying the attempt when the run's
        policy says so (``orphaned``). Every other run of a dead executor ends as ``left``
        finds it ended in what it left behind (``ended``), else ``error``, reason ``executor
        lost``, saying whether it had started.
        """
        settled = Settled()
        ends: list[RunEvent] = []
        with self._sessions.begin() as session:
            runs = session.scalars(
                select(Run).where(
                    Run.state.not_in(TERMINAL_STATES),
                    Run.executor_pid.is_not(None) | Run.requeue,
                )
            )
            for run in runs:
                if run.executor_pid is not None and alive(
                    run.executor_pid, run.executor_started or 0.0
                ):
                    continue
                if run.requeue:
                    if adopt is not None and run.runtime == runtime:
                        run.executor_pid, run.executor_started = adopt
                        waiting = run.started_at is None or run.retry_at is not None
                        (settled.adopted if waiting else settled.orphaned).append(run.uid)
                    continue
                end = None
                if left is not None and run.retry_at is None:
                    end = left(run.uid, run.runtime, run.attempt or 1)
                if end is not None:
                    ends.append(end.classified())
                    settled.ended.append(run.uid)
                    continue
                started = run.started_at is not None
                message = (
                    f"the process that {'executed' if started else 'queued'} this run "
                    f"(pid {run.executor_pid}) is gone{'' if started else '; it never started'}"
                )
                ends.append(_end(run, RunState.ERROR, Reason.EXECUTOR_LOST, message))
                settled.lost.append(run.uid)
            apply_burst(session.connection(), ends, {})
        return settled

    def settle_queued(self, executor_pid: int) -> tuple[list[str], list[str]]:
        """Runs of this executor that never started, as it stops; returns (requeued, aborted).

        Runs a service queued wait for its next start, with no executor, saying so; the others
        (queued by a command or a program that is ending) end ``aborted``, saying why.
        """
        now = time.time()
        requeued, aborted = [], []
        ends: list[RunEvent] = []
        with self._sessions.begin() as session:
            runs = session.scalars(
                select(Run).where(
                    Run.executor_pid == executor_pid,
                    Run.started_at.is_(None) | Run.retry_at.is_not(None),
                    Run.state.not_in(TERMINAL_STATES),
                )
            ).all()
            for run in runs:
                what = "the run" if run.retry_at is None else f"attempt {run.attempt}"
                if run.requeue and run.reason == Reason.BUDGET.value:
                    run.executor_pid = run.executor_started = None  # still held by its budget
                    requeued.append(run.uid)
                elif run.requeue:
                    run.executor_pid = run.executor_started = None
                    run.reason, run.updated_at = Reason.REQUEUED.value, now
                    run.status_text = (
                        f"the service stopped before {what} started; it starts when the "
                        "service starts again"
                    )
                    requeued.append(run.uid)
                else:
                    message = "the runplane process that queued the run exited before " + (
                        "it started" if run.retry_at is None else f"attempt {run.attempt}"
                    )
                    ends.append(_end(run, RunState.ABORTED, Reason.ABORTED, message))
                    aborted.append(run.uid)
            apply_burst(session.connection(), ends, {})
        return requeued, aborted

    def source_dir(self, uid: str) -> str:
        with self._reads() as session:
            return str(session.scalar(select(Run.source_dir).where(Run.uid == uid)) or "")


def _end(run: Run, state: RunState, reason: Reason, message: str) -> RunEvent:
    """The end of a run whose executor cannot report it (gone, or stopping before the run
    started), as the event it would have sent, classified as it enters the service: recorded
    like every other end, by :mod:`runplane.service.recording`, so a run's state has one
    writer and one set of rules (:meth:`RunState.may_become`)."""
    event = RunEvent(run.uid, state, reason=reason, message=message, attempt=run.attempt or 1)
    return event.classified()
