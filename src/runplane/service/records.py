"""The run store: run records as tables, created once, then changed only by runtime events,
aborts and recovery.

A record is written in the same transaction as its first transition, so a run is either fully
recorded or not at all. Which changes an event may make is the run model's rule
(:meth:`RunState.may_become`), applied here to every event.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import Engine, Select, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import defer, load_only, selectinload

from runplane.bootstrap import RESULTS_LIMIT
from runplane.errors import (
    AmbiguousError,
    InvalidValueError,
    NotFoundError,
    RunExistsError,
    RunFinishedError,
)
from runplane.runs import (
    TERMINAL,
    AttemptRecord,
    RunRecord,
    RunState,
    TransitionRecord,
    check_uid,
)
from runplane.runtimes.events import RunEvent
from runplane.service.db import session_factory
from runplane.service.db.models import Artifact, Attempt, Run, Transition
from runplane.spec.bounds import check_json

TERMINAL_STATES = [state.value for state in TERMINAL]
#: What recording an event reads of a run: not its function snapshot or parameters.
_EVENT_COLUMNS = load_only(Run.state, Run.results, Run.started_at, Run.state_since)


def record_of(run: Run, brief: bool = False) -> RunRecord:
    """The run model's record of a row and its children; ``brief`` leaves out the function
    snapshot, transitions and artifacts (see :meth:`RunStore.list_runs`)."""
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
        transitions=[]
        if brief
        else [
            TransitionRecord(RunState(t.state), t.reason, t.message, t.at) for t in run.transitions
        ],
        attempts=[
            AttemptRecord(
                a.number, a.node, a.process_id, a.started_at, a.ended_at, a.exit_code, a.reason
            )
            for a in run.attempts
        ],
        artifacts=[]
        if brief
        else [{"key": a.key, "path": a.path, "size": a.size} for a in run.artifacts],
    )


def _filtered(
    query: Select[Any],
    project: str | None,
    states: Iterable[str],
    owner: str | None,
    uids: Iterable[str] | None,
) -> Select[Any]:
    if project:
        query = query.where(Run.project == project)
    if owner is not None:
        query = query.where(Run.owner == owner)
    if states:
        wanted = [RunState.named("state", state).value for state in states]
        query = query.where(Run.state.in_(wanted))
    if uids is not None:
        query = query.where(Run.uid.in_(list(uids)))
    return query


def recordable_results(results: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The results a run reported that its record can hold, and why each other one is left
    out: a run's own code wrote them, so they are held to the bounds of what users send
    (nesting, finite numbers, size); one beyond them would break every answer that shows it.
    """
    kept: dict[str, Any] = {}
    refused: list[str] = []
    for key, value in results.items():
        try:
            check_json(f"result {key!r}", value, RESULTS_LIMIT, "context.log_artifact(...)")
        except InvalidValueError as error:
            refused.append(f"result {str(key)[:64]!r} not recorded: {error.allowed}")
            continue
        kept[str(key)] = value
    try:
        check_json("results", kept, RESULTS_LIMIT, "context.log_artifact(...)")
    except InvalidValueError as error:
        return {}, [
            *refused,
            f"results not recorded: {error.allowed}; log large values as artifacts",
        ]
    return kept, refused


class RunStore:
    def __init__(self, engine: Engine) -> None:
        self._sessions = session_factory(engine)

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
    ) -> RunRecord:
        """Record a new run; returns its record (built here, not read back)."""
        now = time.time()
        try:
            with self._sessions.begin() as session:
                session.add(
                    run := Run(
                        uid=uid,
                        project=project,
                        name=name,
                        runtime=runtime,
                        state=RunState.CREATED.value,
                        reason="",
                        status_text="",
                        function=function,
                        params=params,
                        inputs=inputs,
                        thresholds=thresholds,
                        priority_class=priority_class,
                        requests=requests,
                        limits=limits,
                        results={},
                        peak_memory_bytes=0,
                        cpu_seconds=0.0,
                        created_at=now,
                        updated_at=now,
                        state_since=now,
                        executor_pid=executor[0] if executor else None,
                        executor_started=executor[1] if executor else None,
                        abort_requested=False,
                        owner=owner,
                        source_dir=source_dir,
                        requeue=requeue,
                        transitions=[
                            Transition(state=RunState.CREATED.value, reason="", message="", at=now)
                        ],
                        attempts=[],
                        artifacts=[],
                    )
                )
        except IntegrityError:
            raise RunExistsError(f"run {uid} is already recorded") from None
        return record_of(run)

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
            raise NotFoundError(f"run {uid!r} does not exist (list runs with `runplane runs`)")
        return run  # type: ignore[no-any-return]

    def exists(self, uid: str) -> bool:
        return self.state_of(uid) is not None

    def state_of(self, uid: str) -> RunState | None:
        """The run's state; ``None`` if there is no such run (one column of one row)."""
        with self._sessions() as session:
            state = session.scalar(select(Run.state).where(Run.uid == uid))
        return None if state is None else RunState(state)

    def get(self, uid: str) -> RunRecord:
        with self._sessions() as session:
            return record_of(self._load(session, self._resolve(session, uid)))

    def _resolve(self, session: Any, uid: str) -> str:
        """Full uids pass through; a unique prefix of at least 6 characters is accepted too."""
        if len(check_uid(uid)) == 32:
            return uid
        matches = session.scalars(
            select(Run.uid).where(Run.uid.startswith(uid, autoescape=True)).limit(2)
        ).all()
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
        offset: int = 0,
        uids: Iterable[str] | None = None,
        updated_since: float | None = None,
        brief: bool = False,
    ) -> list[RunRecord]:
        """Runs, newest first; ``uids`` picks those runs only and ``updated_since`` those
        changed since then (a live page's rows).

        ``brief`` records, for lists that show a run per row, have no function snapshot,
        transitions or artifacts (empty): reading the snapshots, embedded code included, is
        most of the cost of a page of runs.
        """
        query = _filtered(select(Run), project, states, owner, uids)
        if updated_since is not None:
            query = query.where(Run.updated_at >= updated_since)
        children = [selectinload(Run.attempts)]
        if brief:
            query = query.options(defer(Run.function, raiseload=True))
        else:
            children += [selectinload(Run.transitions), selectinload(Run.artifacts)]
        query = (
            query.order_by(Run.created_at.desc(), Run.uid)
            .offset(offset)
            .limit(limit)
            .options(*children)
        )
        with self._sessions() as session:
            return [record_of(run, brief) for run in session.scalars(query)]

    def count_runs(
        self, project: str | None = None, states: Iterable[str] = (), owner: str | None = None
    ) -> int:
        """How many runs :meth:`list_runs` would find without a limit (for pages)."""
        query = _filtered(select(func.count()).select_from(Run), project, states, owner, None)
        with self._sessions() as session:
            return int(session.scalar(query) or 0)

    def apply(self, event: RunEvent) -> bool:
        """Record what a runtime reported; ``False`` if the run had already finished."""
        return self.apply_many([event])[0]

    def apply_many(self, events: Sequence[RunEvent]) -> list[bool]:
        """Record several events in one transaction (a watch delivers them in bursts), in
        order; for each, ``False`` if its run had already finished or is unknown.

        Transitions, attempts and artifacts are written as rows of their own, and of the run
        only the columns an event changes are loaded: this is on the path of every event.
        """
        applied = []
        with self._sessions.begin() as session:
            # One query loads every run of the burst into the session; each event then finds
            # its run there instead of querying again.
            session.scalars(
                select(Run)
                .options(_EVENT_COLUMNS)
                .where(Run.uid.in_({event.uid for event in events}))
            ).all()
            for event in events:
                applied.append(self._apply(session, event))
        return applied

    def _apply(self, session: Any, event: RunEvent) -> bool:
        run = session.get(Run, event.uid, options=[_EVENT_COLUMNS])
        if run is None or not RunState(run.state).may_become(event.state):
            return False
        # A cluster stamps its times in whole seconds: never let a run end before it began, nor
        # a change happen after the service learnt of it.
        at = min(event.at, time.time())
        if run.state_since is not None:
            at = max(at, run.state_since)
        if at != event.at:
            event = replace(event, at=at)
        state = event.state.value
        entered = state != run.state
        if entered:
            session.add(
                Transition(
                    run_uid=run.uid,
                    state=state,
                    reason=event.reason,
                    message=event.message,
                    at=event.at,
                )
            )
            run.state = state
            run.state_since = event.at
        run.reason = event.reason
        run.status_text = event.message
        if event.state.terminal:
            results, refused = recordable_results(event.results)
            if refused:
                run.status_text = "; ".join(filter(None, [event.message, *refused]))
            event = replace(event, results=results)
        run.updated_at = time.time()  # when the service learnt it (event.at is the source's)
        if event.state is RunState.RUNNING and entered:
            run.started_at = run.started_at or event.at
            if event.isolation:
                run.isolation = event.isolation
            session.add(
                Attempt(
                    run_uid=run.uid,
                    number=event.attempt,
                    node=event.node,
                    process_id=event.process_id,
                    started_at=event.at,
                    reason="",
                )
            )
        if event.state.terminal:
            run.ended_at = event.at
            run.results = {**run.results, **event.results}
            session.add_all(
                Artifact(run_uid=run.uid, key=a["key"], path=a["path"], size=a["size"])
                for a in event.artifacts
            )
            if event.usage is not None:
                run.peak_memory_bytes = event.usage.peak_memory_bytes
                run.cpu_seconds = event.usage.cpu_seconds
            session.flush()
            session.execute(
                update(Attempt)
                .where(
                    Attempt.run_uid == run.uid,
                    Attempt.number == event.attempt,
                    Attempt.ended_at.is_(None),
                )
                .values(ended_at=event.at, exit_code=event.exit_code, reason=event.reason)
            )
        return True

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
        query = select(Run.uid).where(
            Run.abort_requested, Run.executor_pid == executor_pid, Run.state.not_in(TERMINAL_STATES)
        )
        with self._sessions() as session:
            return list(session.scalars(query))

    def owner(self, uid: str) -> tuple[int | None, float | None]:
        with self._sessions() as session:
            run = self._load(session, uid)
            return run.executor_pid, run.executor_started

    def mark_lost(
        self,
        alive: Callable[[int, float], bool],
        runtime: str = "",
        adopt: tuple[int, float] | None = None,
    ) -> tuple[list[str], list[str]]:
        """Settle runs whose executor process is gone; returns (lost, adopted).

        With ``adopt`` (a service starting on the same runtime), runs a service queued that
        never started, because the service stopped (then they have no executor) or died,
        become ``adopt``'s to launch again. Every other run of a dead executor ends ``error``,
        reason ``executor lost``, saying whether it had started.
        """
        lost, adopted = [], []
        now = time.time()
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
                if run.requeue and run.started_at is None:
                    # A service's queued run waits for that service, not for whoever looks.
                    if adopt is not None and run.runtime == runtime:
                        run.executor_pid, run.executor_started = adopt
                        adopted.append(run.uid)
                    continue
                started = run.started_at is not None
                message = (
                    f"the process that {'executed' if started else 'queued'} this run "
                    f"(pid {run.executor_pid}) is gone{'' if started else '; it never started'}"
                )
                self._end(run, RunState.ERROR, "executor lost", message, now)
                lost.append(run.uid)
        return lost, adopted

    def settle_queued(self, executor_pid: int) -> tuple[list[str], list[str]]:
        """Runs of this executor that never started, as it stops; returns (requeued, aborted).

        Runs a service queued wait for its next start, with no executor, saying so; the others
        (queued by a command or a program that is ending) end ``aborted``, saying why.
        """
        now = time.time()
        requeued, aborted = [], []
        with self._sessions.begin() as session:
            runs = session.scalars(
                select(Run).where(
                    Run.executor_pid == executor_pid,
                    Run.started_at.is_(None),
                    Run.state.not_in(TERMINAL_STATES),
                )
            ).all()
            for run in runs:
                if run.requeue:
                    run.executor_pid = run.executor_started = None
                    run.reason, run.updated_at = "Requeued", now
                    run.status_text = (
                        "the service stopped before the run started; it starts when the "
                        "service starts again"
                    )
                    requeued.append(run.uid)
                else:
                    message = "the runplane process that queued the run exited before it started"
                    self._end(run, RunState.ABORTED, "Aborted", message, now)
                    aborted.append(run.uid)
        return requeued, aborted

    def source_dir(self, uid: str) -> str:
        with self._sessions() as session:
            return str(session.scalar(select(Run.source_dir).where(Run.uid == uid)) or "")

    @staticmethod
    def _end(run: Run, state: RunState, reason: str, message: str, now: float) -> None:
        run.transitions.append(
            Transition(state=state.value, reason=reason, message=message, at=now)
        )
        run.state, run.reason, run.status_text = state.value, reason, message
        run.state_since = run.updated_at = run.ended_at = now
        for attempt in run.attempts:
            if attempt.ended_at is None:
                attempt.ended_at, attempt.reason = now, reason
