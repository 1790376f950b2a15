"""Runtime events applied to run records, a burst per transaction, in a handful of statements.

Every run's every change passes through here (three events for a no-op run), so a burst is
applied as SQL Core statements, not through the ORM's unit of work: one select of the burst's
runs and attempts, the rules applied in Python, then one executemany per kind of change (the
runs' new columns, the attempts' starts and ends, new transitions, attempts and artifacts).
Which changes an event may make is the run model's rule (:meth:`RunState.may_become`).
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import (
    BindParameter,
    Connection,
    Select,
    Table,
    bindparam,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.sql.dml import Insert, Update

from runplane.bootstrap import RESULTS_LIMIT
from runplane.errors import InvalidValueError
from runplane.runs import Reason, RunState
from runplane.runtimes.events import RunEvent
from runplane.service import resizes, run_counts
from runplane.service.db.models import ARTIFACTS, ATTEMPTS, RUNS, TRANSITIONS
from runplane.service.db.prepared import Prepared, PreparedIn
from runplane.service.retries import RetryDecision
from runplane.spec.bounds import check_json

#: What an event reads and may change of its run (never its function snapshot or parameters).
_RUN_COLUMNS = (
    "state",
    "reason",
    "status_text",
    "results",
    "started_at",
    "ended_at",
    "state_since",
    "updated_at",
    "attempt",
    "retry_at",
    "isolation",
    "peak_memory_bytes",
    "cpu_seconds",
)
_CURRENT = ATTEMPTS.alias("current")


def _runs_of(uids: list[BindParameter[Any]]) -> Select[Any]:
    return (
        select(
            RUNS.c.uid,
            RUNS.c.abort_requested,
            RUNS.c.project,
            RUNS.c.owner,
            *(RUNS.c[n] for n in _RUN_COLUMNS),
            _CURRENT.c.number.label("attempt_number"),
            _CURRENT.c.ended_at.label("attempt_ended_at"),
        )
        .outerjoin(
            _CURRENT,
            (_CURRENT.c.run_uid == RUNS.c.uid)
            & (_CURRENT.c.number == func.coalesce(RUNS.c.attempt, 1)),
        )
        .where(RUNS.c.uid.in_(uids))
        .with_for_update(of=RUNS)
    )


#: A burst's runs, each with its current attempt's end (events of earlier attempts are
#: ignored), by the list of their uids: one statement, compiled once for each length of list
#: it is sent with (a statement made per burst costs four times its execution here, and
#: SQLAlchemy's rendering of a list at each execution twice).
_SELECT_RUNS = PreparedIn(_runs_of)
#: Each statement built once: a statement object keeps its compiled form's cache key.
_STATEMENTS: dict[tuple[str, tuple[str, ...]], Insert | Update] = {}
#: Each of them for each shape of row, sent to the driver as compiled once
#: (:mod:`runplane.service.db.prepared`).
_PREPARED: dict[tuple[tuple[str, tuple[str, ...]], tuple[str, ...]], Prepared] = {}


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


def apply_burst(
    connection: Connection,
    events: Sequence[RunEvent],
    retries: Mapping[int, RetryDecision],
) -> list[RunEvent | None]:
    """Record ``events`` in order within the caller's transaction; for each, the event as
    recorded, or ``None`` if its run had already finished, is unknown, or is on a later
    attempt than the event's (see :meth:`RunStore.apply_many`)."""
    burst = _Burst(connection, {event.uid for event in events})
    applied = [burst.apply(event, retries.get(index)) for index, event in enumerate(events)]
    burst.write()
    resizes.write(connection, [e for e in events if e.resize is not None and burst.holds(e)])
    return applied


class _Burst:
    """The burst's runs and attempts as read, the changes the events make to them, and the
    statements that write those changes."""

    def __init__(self, connection: Connection, uids: set[str]) -> None:
        self._connection = connection
        # FOR UPDATE holds the rows on PostgreSQL until the burst is written (SQLite's write
        # lock, taken as the transaction began, already does).
        self._runs: dict[str, dict[str, Any]] = {}
        #: (run, number) → whether that attempt has ended, of the runs' current attempts and
        #: those this burst adds.
        self._ended: dict[tuple[str, int], bool] = {}
        for run in _SELECT_RUNS.rows(connection, sorted(uids)):
            number, ended_at = run.pop("attempt_number"), run.pop("attempt_ended_at")
            self._runs[run["uid"]] = run
            if number is not None:
                self._ended[run["uid"], number] = ended_at is not None
        self._changed: set[str] = set()
        self._new_attempts: dict[tuple[str, int], dict[str, Any]] = {}
        self._attempt_changes: dict[tuple[str, int], dict[str, Any]] = defaultdict(dict)
        self._transitions: list[dict[str, Any]] = []
        self._artifacts: list[dict[str, Any]] = []
        #: How the burst moves runs between states, for the counts (see :mod:`run_counts`).
        self._moved: Counter[run_counts.Key] = Counter()

    def holds(self, event: RunEvent) -> bool:
        """Whether the event's run is recorded and on the event's attempt."""
        run = self._runs.get(event.uid)
        return run is not None and event.attempt == (run["attempt"] or 1)

    def apply(self, event: RunEvent, retry: RetryDecision | None) -> RunEvent | None:
        run = self._runs.get(event.uid)
        if run is None or event.attempt != (run["attempt"] or 1):
            return None  # an earlier attempt's news (its pod lingers), or nothing known
        current = RunState(run["state"])
        if (
            retry is not None
            and event.state.terminal
            and current.may_retry
            and not run["abort_requested"]
            and retry.attempt == event.attempt + 1
        ):
            return self._retry(run, event, retry)
        if not current.may_become(event.state):
            return None
        # A cluster stamps its times in whole seconds: never let a run end before it began, nor
        # a change happen after the service learnt of it.
        at = min(event.at, time.time())
        if run["state_since"] is not None:
            at = max(at, run["state_since"])
        if at != event.at:
            event = replace(event, at=at)
        entered = event.state.value != run["state"]
        if entered:
            self._transition(run, event.state, event.reason, event.message, event.at)
        run["reason"], run["status_text"] = event.reason, event.message
        if event.state.terminal:
            results, refused = recordable_results(event.results)
            if refused:
                run["status_text"] = "; ".join(filter(None, [event.message, *refused]))
            event = replace(event, results=results)
        run["updated_at"] = time.time()  # when the service learnt it (event.at is the source's)
        self._changed.add(event.uid)
        if event.state is RunState.RUNNING and entered:
            run["started_at"] = run["started_at"] or event.at
            if event.isolation:
                run["isolation"] = event.isolation
            self._started(event)
        if event.state.terminal:
            run["ended_at"] = event.at
            run["retry_at"] = None
            run["results"] = {**run["results"], **event.results}
            self._artifacts += (
                {"run_uid": event.uid, "key": a["key"], "path": a["path"], "size": a["size"]}
                for a in event.artifacts
            )
            self._end_attempt(run, event)
        return event

    def _transition(
        self, run: dict[str, Any], state: RunState, reason: str, message: str, at: float
    ) -> None:
        row = {"run_uid": run["uid"], "state": state.value, "reason": reason, "at": at}
        self._transitions.append(row | {"message": message})
        self._moved[run["project"], run["owner"], run["state"]] -= 1
        self._moved[run["project"], run["owner"], state.value] += 1
        run["state"], run["state_since"] = state.value, at

    def _started(self, event: RunEvent) -> None:
        """The attempt has a node and a process: its row (recorded when it was decided) says
        so; a run recorded before attempts were gets its row now."""
        values = {
            "node": event.node,
            "node_group": event.node_group,
            "spot": event.spot,
            "process_id": event.process_id,
            "started_at": event.at,
        }
        key = (event.uid, event.attempt)
        if key in self._ended:
            self._change_attempt(key, values)
        else:
            self._add_attempt(event.uid, event.attempt, reason="", **values)

    def _end_attempt(self, run: dict[str, Any], event: RunEvent) -> None:
        """The attempt's end, class and usage; the run's usage is its attempts' (the highest
        peak, the sum of CPU time)."""
        usage = event.usage
        if usage is not None:
            run["peak_memory_bytes"] = max(run["peak_memory_bytes"] or 0, usage.peak_memory_bytes)
            run["cpu_seconds"] = (run["cpu_seconds"] or 0.0) + usage.cpu_seconds
        key = (event.uid, event.attempt)
        if self._ended.get(key, True):
            return  # ended already, or never recorded
        self._ended[key] = True
        values: dict[str, Any] = {
            "ended_at": event.at,
            "exit_code": event.exit_code,
            "reason": event.reason,
            "failure": event.failure.value if event.failure else "",
            "message": event.message,
        }
        if usage is not None:
            values |= {
                "peak_memory_bytes": usage.peak_memory_bytes,
                "cpu_seconds": usage.cpu_seconds,
            }
        self._change_attempt(key, values)

    def _retry(self, run: dict[str, Any], event: RunEvent, retry: RetryDecision) -> RunEvent:
        """End the attempt, record the next one and when it is due, and put the run back to
        ``pending`` saying so; returns the event that says it."""
        at = max(min(event.at, time.time()), run["state_since"] or 0.0)
        self._end_attempt(run, replace(event, at=at))
        self._add_attempt(
            event.uid,
            retry.attempt,
            node="",
            reason="",
            due_at=retry.due_at,
            requests=retry.requests,
            limits=retry.limits,
            preemption_mode=retry.preemption_mode,
            adjustments=retry.adjustments,
        )
        self._transition(run, RunState.PENDING, Reason.RETRYING, retry.message, at)
        run["reason"], run["status_text"] = Reason.RETRYING, retry.message
        run["updated_at"] = time.time()
        run["attempt"], run["retry_at"] = retry.attempt, retry.due_at
        run["results"] = {**run["results"], **event.results}
        self._changed.add(event.uid)
        return RunEvent(
            uid=event.uid,
            state=RunState.PENDING,
            reason=Reason.RETRYING,
            message=retry.message,
            attempt=retry.attempt,
            at=at,
        )

    def _add_attempt(self, uid: str, number: int, **values: Any) -> None:
        self._new_attempts[uid, number] = {"run_uid": uid, "number": number, **values}
        self._ended[uid, number] = False

    def _change_attempt(self, key: tuple[str, int], values: dict[str, Any]) -> None:
        new = self._new_attempts.get(key)
        (new if new is not None else self._attempt_changes[key]).update(values)

    def write(self) -> None:
        """The burst's changes, one statement per kind and shape of change."""
        connection = self._connection
        changes = [
            {"_uid": uid, "_number": number, **values}
            for (uid, number), values in self._attempt_changes.items()
        ]
        _execute(connection, ATTEMPTS, changes, {"run_uid": "_uid", "number": "_number"})
        _execute(connection, ATTEMPTS, list(self._new_attempts.values()))
        runs = [
            {"_uid": uid, **{name: self._runs[uid][name] for name in _RUN_COLUMNS}}
            for uid in self._changed
        ]
        _execute(connection, RUNS, runs, {"uid": "_uid"})
        _execute(connection, TRANSITIONS, self._transitions)
        _execute(connection, ARTIFACTS, self._artifacts)
        run_counts.add(connection, self._moved)


def _execute(
    connection: Connection,
    table: Table,
    rows: Iterable[dict[str, Any]],
    where: Mapping[str, str] | None = None,
) -> None:
    """Insert ``rows`` into ``table``; or, with ``where`` (column → key of a row), set the
    columns each row names on the row whose ``where`` columns equal those keys' values. Rows
    naming the same columns go in one executemany."""
    shapes: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        shapes[tuple(row)].append(row)
    key = (table.name, tuple(where or {}))
    statement = _STATEMENTS.get(key)
    if statement is None:
        statement = _STATEMENTS[key] = (
            update(table).where(*(table.c[c] == bindparam(k) for c, k in where.items()))
            if where
            else insert(table)
        )
    for shape, group in shapes.items():
        prepared = _PREPARED.get((key, shape))
        if prepared is None:
            keys = {k: c for c, k in (where or {}).items()}
            prepared = _PREPARED[key, shape] = Prepared(statement, table, shape, keys)
        prepared.execute(connection, group)
