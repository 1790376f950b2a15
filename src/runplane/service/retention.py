"""Retention carried out: finished runs, their output and files removed by policy.

The policy is the service's (``Settings.retention``) with each project's overrides (its
record's ``retention``; :mod:`runplane.spec.retention`). A pass (:meth:`Retention.sweep`)
removes, in this order: the records (and files) of runs that ended longer ago than
``runs_max_age``; those of a project's finished runs past its newest ``runs_max_count``; then
the files of runs that ended longer ago than ``logs_max_age``, whose records stay, marked
``logs_removed_at`` so that the API and the UI say the output was removed rather than show
none. Only finished runs are ever chosen, and a run is chosen and removed in the same
transaction, so a live run is never removed.

Each batch of at most ``Settings.retention.batch`` runs is its own short transaction, and a
pass runs on a thread of its own (the service's retention loop), never on the event loop: the
API answers between batches however much a pass removes. Files are removed after their
records' transaction, under ``<home>/runs`` only (:func:`runplane.runtimes.output.remove_run_dir`);
a service stopped between the two leaves a directory without a record, which nothing reads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, Select, delete, select, update

from runplane.runtimes.output import remove_run_dir
from runplane.service import run_counts
from runplane.service.db.models import ARTIFACTS, ATTEMPTS, RUNS, TRANSITIONS
from runplane.service.records import TERMINAL_STATES
from runplane.spec.retention import RetentionPolicy

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Swept:
    """What a pass removed: runs (records with their files), and files of runs kept."""

    runs: int = 0
    files: int = 0

    def __add__(self, other: Swept) -> Swept:
        return Swept(self.runs + other.runs, self.files + other.files)


#: Asked between batches: ``True`` stops the pass (the service is stopping).
Stop = Callable[[], bool]


class Retention:
    """Applies retention policies to the run tables and the runs' directories."""

    def __init__(self, engine: Engine, runs: Path, batch: int) -> None:
        self._engine = engine
        self._runs = runs
        self._batch = batch

    def sweep(
        self,
        policy: RetentionPolicy,
        overrides: Mapping[str, Mapping[str, Any]],
        now: float,
        stop: Stop = lambda: False,
    ) -> Swept:
        """One pass of ``policy``, with each project's ``overrides`` of it, as of ``now``."""
        swept = Swept()
        for term, remove in (
            ("runs_max_age", self._expired_runs),
            ("runs_max_count", self._runs_past_count),
            ("logs_max_age", self._expired_files),
        ):
            for project, value in _scopes(policy, overrides, term):
                swept += remove(project, value, now, stop)
                if stop():
                    return swept
        if swept.runs or swept.files:
            log.info("retention removed %d runs and the files of %d more", swept.runs, swept.files)
        return swept

    # -- the terms ------------------------------------------------------------------------

    def _expired_runs(self, scope: Scope, age: Any, now: float, stop: Stop) -> Swept:
        query = _finished(scope).where(RUNS.c.ended_at < now - float(age))
        return self._remove_runs(query.limit(self._batch), stop)

    def _runs_past_count(self, scope: Scope, count: Any, now: float, stop: Stop) -> Swept:
        swept = Swept()
        for project in self._projects(scope):
            query = (
                _finished(Scope(project))
                .order_by(RUNS.c.created_at.desc(), RUNS.c.uid.desc())
                .offset(int(count))
                .limit(self._batch)
            )
            swept += self._remove_runs(query, stop)
            if stop():
                break
        return swept

    def _expired_files(self, scope: Scope, age: Any, now: float, stop: Stop) -> Swept:
        query = (
            _finished(scope)
            .where(RUNS.c.logs_removed_at.is_(None), RUNS.c.ended_at < now - float(age))
            .limit(self._batch)
        )
        removed = 0
        while True:
            with self._engine.connect() as connection:
                uids = list(connection.scalars(query))
            for uid in uids:
                remove_run_dir(self._runs, uid)
            if uids:
                with self._engine.begin() as connection:
                    connection.execute(
                        update(RUNS)
                        .where(RUNS.c.uid.in_(uids), RUNS.c.logs_removed_at.is_(None))
                        .values(logs_removed_at=now)
                    )
            removed += len(uids)
            if len(uids) < self._batch or stop():
                return Swept(files=removed)

    # -- removal --------------------------------------------------------------------------

    def _remove_runs(self, query: Select[Any], stop: Stop) -> Swept:
        """Remove the runs ``query`` chooses, a batch per transaction, until it chooses none;
        then their directories."""
        removed = 0
        while True:
            with self._engine.begin() as connection:
                uids = list(connection.scalars(query))
                if uids:
                    for table in (TRANSITIONS, ATTEMPTS, ARTIFACTS):
                        connection.execute(delete(table).where(table.c.run_uid.in_(uids)))
                    run_counts.delete_runs(connection, uids)  # the runs, off the counts
            for uid in uids:
                remove_run_dir(self._runs, uid)
            removed += len(uids)
            if len(uids) < self._batch or stop():
                return Swept(runs=removed)

    def _projects(self, scope: Scope) -> Iterable[str]:
        if scope.project is not None:
            return [scope.project]
        with self._engine.connect() as connection:
            names = connection.scalars(select(RUNS.c.project).distinct())
            return [name for name in names if name not in scope.excluded]


@dataclass(frozen=True, slots=True)
class Scope:
    """Which runs a term applies to: one project's, or every project's but ``excluded``."""

    project: str | None = None
    excluded: frozenset[str] = frozenset()


def _finished(scope: Scope) -> Select[Any]:
    query = select(RUNS.c.uid).where(RUNS.c.state.in_(TERMINAL_STATES))
    if scope.project is not None:
        return query.where(RUNS.c.project == scope.project)
    if scope.excluded:
        return query.where(RUNS.c.project.not_in(sorted(scope.excluded)))
    return query


def _scopes(
    policy: RetentionPolicy, overrides: Mapping[str, Mapping[str, Any]], term: str
) -> list[tuple[Scope, Any]]:
    """Where ``term`` applies, with its value there: each project that sets it, then every
    other project under the service's. An unset term (``None``) keeps for ever."""

    def value(of: RetentionPolicy) -> Any:
        return of.seconds(term) if term.endswith("age") else getattr(of, term)

    own = {project: terms for project, terms in overrides.items() if term in terms}
    scopes = [(Scope(project), value(policy.over(terms))) for project, terms in sorted(own.items())]
    scopes.append((Scope(excluded=frozenset(own)), value(policy)))
    return [(scope, term_value) for scope, term_value in scopes if term_value is not None]
