"""How many runs each (project, owner) has in each state, kept beside the runs so that no
count reads them.

A count changes in the transaction that changes what it counts: a run's creation
(:meth:`RunStore.create`), each change of its state (:mod:`runplane.service.recording`), and
its deletion (:func:`delete_runs`, the one way runs are deleted). Each change is an upsert of
a difference, so writers never read a count first; several changes of one transaction go in
one statement, in the order of their keys, so two transactions never wait for each other's
rows in opposite orders.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable
from typing import Any

from sqlalchemy import Connection, bindparam, delete, exists, func, select
from sqlalchemy.dialects import postgresql, sqlite

from runplane.service.db.models import COUNTS, RUNS
from runplane.service.db.prepared import Prepared

#: (project, owner, state): a row of counts.
Key = tuple[str, str, str]

_UPSERTS: dict[str, Any] = {}
_COUNTS_OF_RUNS = (
    select(RUNS.c.project, RUNS.c.owner, RUNS.c.state, func.count())
    .where(RUNS.c.uid.in_(bindparam("uids", expanding=True)))
    .group_by(RUNS.c.project, RUNS.c.owner, RUNS.c.state)
)
_NEXT = COUNTS.alias("later")
_WALK = select(func.min(COUNTS.c.project).label("project")).cte("walk", recursive=True)
_WALK = _WALK.union_all(
    select(
        select(func.min(_NEXT.c.project)).where(_NEXT.c.project > _WALK.c.project).scalar_subquery()
    ).where(_WALK.c.project.is_not(None))
)
#: The projects with runs: the counts' keys walked one project at a time (each step the next
#: project's first key, from the primary key), so it costs one index probe per project however
#: many owners and states each has, where DISTINCT reads every row of the counts.
PROJECTS = select(_WALK.c.project).where(
    _WALK.c.project.is_not(None),
    exists().where(COUNTS.c.project == _WALK.c.project, COUNTS.c.runs > 0),
)
_DELETE_RUNS = delete(RUNS).where(RUNS.c.uid.in_(bindparam("uids", expanding=True)))


def _upsert(dialect: str) -> Any:
    """``runs = runs + :runs`` on the row of the key, made if missing: the one statement of
    every change, built once per dialect."""
    statement = _UPSERTS.get(dialect)
    if statement is None:
        insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
        new = insert(COUNTS)
        statement = _UPSERTS[dialect] = new.on_conflict_do_update(
            index_elements=[COUNTS.c.project, COUNTS.c.owner, COUNTS.c.state],
            set_={"runs": COUNTS.c.runs + new.excluded.runs},
        )
    return statement


#: Each dialect's upsert, sent to its driver (every run's record and each burst of events
#: change a count).
_PREPARED_UPSERT = {
    dialect: Prepared(_upsert(dialect), COUNTS, ("project", "owner", "state", "runs"))
    for dialect in ("sqlite", "postgresql")
}


def add(connection: Connection, changes: Counter[Key]) -> None:
    """Add ``changes`` (a difference per key, negative to take away) to the counts, in the
    caller's transaction."""
    rows = [
        {"project": project, "owner": owner, "state": state, "runs": runs}
        for (project, owner, state), runs in sorted(changes.items())
        if runs
    ]
    if not rows:
        return
    _PREPARED_UPSERT[connection.dialect.name].execute(connection, rows)


def delete_runs(connection: Connection, uids: Collection[str]) -> int:
    """Delete these runs (their transitions, attempts, artifacts and labels go with them) and
    take them off the counts, in the caller's transaction; how many were deleted. Whatever
    deletes runs does it here, or the counts drift from the runs."""
    if not uids:
        return 0
    keys = {"uids": sorted(uids)}
    counted: Counter[Key] = Counter()
    for project, owner, state, runs in connection.execute(_COUNTS_OF_RUNS, keys):
        counted[project, owner, state] -= runs
    add(connection, counted)
    connection.execute(_DELETE_RUNS, keys)
    return -sum(counted.values())


def by_state(
    connection: Connection, project: str | None = None, owner: str | None = None
) -> dict[str, int]:
    """Runs per state (states with none left out), of a project and an owner when given."""
    query = select(COUNTS.c.state, func.sum(COUNTS.c.runs)).group_by(COUNTS.c.state)
    if project:
        query = query.where(COUNTS.c.project == project)
    if owner is not None:
        query = query.where(COUNTS.c.owner == owner)
    return {state: int(runs) for state, runs in connection.execute(query) if runs}


def by_project(connection: Connection, owner: str | None = None) -> dict[str, int]:
    """Runs per project (projects with none left out), of an owner when given."""
    query = select(COUNTS.c.project, func.sum(COUNTS.c.runs)).group_by(COUNTS.c.project)
    if owner is not None:
        query = query.where(COUNTS.c.owner == owner)
    return {project: int(runs) for project, runs in connection.execute(query) if runs}


def of_states(counts: dict[str, int], states: Iterable[str]) -> int:
    """How many of ``counts`` are in ``states`` (all of them for none)."""
    wanted = set(states)
    return sum(runs for state, runs in counts.items() if not wanted or state in wanted)
