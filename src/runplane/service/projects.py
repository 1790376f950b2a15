"""Projects as records: a name, its owner, a description, the parameters and default image its
runs get, labels.

Runs, stored functions and schedules name their project; a project is any name that has a
record or any of those. A record belongs to whoever created it: only they (and admins) change
or delete it. Creating is get-or-create, so ``get_or_create_project`` in several notebooks
of several users converges on one record, the first creator's.

A project with runs, functions or schedules is not deleted unless the caller asks for
``cascading``: its stored functions and schedules go with it, while its runs' records stay
(until the retention policy removes them), so its name goes on naming them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sqlalchemy import Engine, delete, func, select, union
from sqlalchemy.exc import IntegrityError

from runplane.errors import InvalidValueError, NotFoundError, PolicyError, RunplaneError
from runplane.service import run_counts
from runplane.service.db import session_factory
from runplane.service.db.models import FunctionOwner, FunctionVersion, RunCount, Schedule
from runplane.service.db.models import Project as ProjectRow
from runplane.spec.bounds import MAX_ITEMS, check_count, check_json, check_text
from runplane.spec.labels import check_dns_label, check_labels
from runplane.spec.retention import check_overrides

#: The longest description, and the most a project's parameters take as JSON.
MAX_DESCRIPTION_BYTES = 4096
MAX_PARAMS_BYTES = 64 << 10
MAX_IMAGE_LENGTH = 512
#: Fields a caller may set; the name, owner and times are the record's own.
EDITABLE = ("description", "params", "default_image", "labels", "retention")


class DeletionStrategy(StrEnum):
    """What deleting a project that is in use does (MLRun's words)."""

    #: Refuse while the project has runs, stored functions or schedules.
    RESTRICTED = "restricted"
    #: Delete its stored functions and schedules with it; its runs' records stay.
    CASCADING = "cascading"


class ProjectInUseError(RunplaneError):
    """A project still holds runs, functions or schedules (restricted deletion)."""

    http_status = 409

    def __init__(self, message: str) -> None:
        self.field = "deletion_strategy"
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class ProjectRecord:
    name: str
    #: Who created the record; empty for a project that has runs or functions but no record.
    owner: str = ""
    description: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    default_image: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    #: The terms of the service's retention policy this project overrides
    #: (:mod:`runplane.spec.retention`); a term set to ``None`` keeps for ever.
    retention: dict[str, Any] = field(default_factory=dict)
    created_at: float | None = None
    updated_at: float | None = None
    #: Whether the project has a record of its own (else it is known from its runs).
    recorded: bool = False


def check_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    """The editable fields of ``values``, each checked and bounded; an unknown field is
    refused by name."""
    checked: dict[str, Any] = {}
    for key, value in values.items():
        if key not in EDITABLE:
            raise InvalidValueError(
                key,
                value,
                "a project has " + ", ".join(EDITABLE),
                "{'description': 'churn models', 'params': {'label_column': 'label'}}",
            )
        if value is None:
            continue
        if key == "description":
            checked[key] = check_text(key, value, MAX_DESCRIPTION_BYTES, "'churn models'")
        elif key == "default_image":
            checked[key] = check_text(key, value, MAX_IMAGE_LENGTH, "'python:3.11'")
        elif key == "retention":
            checked[key] = check_overrides(key, value)
        elif key == "params":
            if not isinstance(value, Mapping):
                raise InvalidValueError(key, value, "a dict of parameters", "{'lr': 0.1}")
            check_count(key, value, MAX_ITEMS)
            checked[key] = check_json(key, dict(value), MAX_PARAMS_BYTES, "{'lr': 0.1}")
        else:
            check_count(key, value, MAX_ITEMS)
            checked[key] = check_labels(key, value)
    return checked


def _check_may_set_retention(values: Mapping[str, Any], user: str, admin: bool) -> None:
    """A project's retention policy removes the runs of every user in it, and a project's
    record belongs to whoever named it first: only admins set it."""
    if "retention" in values and not admin:
        raise PolicyError(
            "retention",
            f"a project's retention policy removes every user's runs in it; user {user!r} "
            "may not set it (admins: any project's)",
        )


def _record(row: ProjectRow) -> ProjectRecord:
    return ProjectRecord(
        name=row.name,
        owner=row.owner,
        description=row.description,
        params=dict(row.params or {}),
        default_image=row.default_image,
        labels=dict(row.labels or {}),
        retention=dict(row.retention or {}),
        created_at=row.created_at,
        updated_at=row.updated_at,
        recorded=True,
    )


def _not_yours(name: str, user: str) -> PolicyError:
    """The refusal never names the owner."""
    return PolicyError(
        "project",
        f"project {name!r} belongs to the user who created it; user {user!r} may change and "
        "delete only their own projects (admins: any)",
    )


class ProjectStore:
    def __init__(self, engine: Engine) -> None:
        self._sessions = session_factory(engine)

    def names(self) -> list[str]:
        """Every project: those with a record, and those that only have runs, functions or
        schedules."""
        # One statement: projects with runs come from the runs' counts, not from the runs.
        named = union(
            select(ProjectRow.name),
            select(FunctionVersion.project),
            select(Schedule.project),
            run_counts.PROJECTS,
        )
        with self._sessions() as session:
            return sorted(session.scalars(select(named.subquery().c[0])))

    def record(self, name: str) -> ProjectRecord | None:
        """The project's record; ``None`` if it has none (see :meth:`get`)."""
        with self._sessions() as session:
            row = session.get(ProjectRow, name)
            return None if row is None else _record(row)

    def list_projects(self) -> list[ProjectRecord]:
        with self._sessions() as session:
            rows = {row.name: _record(row) for row in session.scalars(select(ProjectRow))}
        return [rows.get(name) or ProjectRecord(name) for name in self.names()]

    def retention_overrides(self) -> dict[str, dict[str, Any]]:
        """Each project that overrides the service's retention policy, with its terms."""
        with self._sessions() as session:
            rows = session.execute(
                select(ProjectRow.name, ProjectRow.retention).where(
                    ProjectRow.retention.is_not(None)
                )
            )
            return {name: dict(terms) for name, terms in rows if terms}

    def get(self, name: str) -> ProjectRecord:
        """The project's record; a project known only from its runs, functions or schedules
        reads as a record without owner."""
        with self._sessions() as session:
            row = session.get(ProjectRow, name)
            if row is not None:
                return _record(row)
            if any(self._uses(session, name).values()):
                return ProjectRecord(name)
        raise NotFoundError(f"project {name!r} does not exist")

    def create(
        self,
        name: str,
        owner: str,
        values: Mapping[str, Any] | None = None,
        admin: bool = False,
    ) -> tuple[ProjectRecord, bool]:
        """The record of ``name``, made with ``values`` and ``owner`` when there is none;
        ``(record, created)``. An existing record is returned as it is (get-or-create)."""
        check_dns_label("name", name, "'churn-models'")
        checked = check_fields(values or {})
        _check_may_set_retention(checked, owner, admin)
        now = time.time()
        try:
            with self._sessions.begin() as session:
                found = session.get(ProjectRow, name)
                if found is not None:
                    return _record(found), False
                row = ProjectRow(
                    name=name,
                    owner=owner,
                    description=checked.get("description", ""),
                    params=checked.get("params", {}),
                    default_image=checked.get("default_image", ""),
                    labels=checked.get("labels", {}),
                    retention=checked.get("retention") or None,
                    created_at=now,
                    updated_at=now,
                )
                session.add(row)
            return _record(row), True
        except IntegrityError:  # made at the same moment by another call: that one wins
            return self.get(name), False

    def update(
        self, name: str, values: Mapping[str, Any], user: str, admin: bool = False
    ) -> ProjectRecord:
        """Change the given fields of the record: its owner's or an admin's to do (its
        retention policy: an admin's only)."""
        checked = check_fields(values)
        _check_may_set_retention(checked, user, admin)
        with self._sessions.begin() as session:
            row = session.get(ProjectRow, name)
            if row is None:
                raise NotFoundError(
                    f"project {name!r} has no record to change; create it first "
                    f"(POST /api/v1/projects {{'name': '{name}'}})"
                )
            if row.owner != user and not admin:
                raise _not_yours(name, user)
            for key, value in checked.items():
                setattr(row, key, (value or None) if key == "retention" else value)
            row.updated_at = time.time()
        return _record(row)

    def delete(
        self,
        name: str,
        user: str,
        admin: bool = False,
        strategy: DeletionStrategy = DeletionStrategy.RESTRICTED,
    ) -> None:
        """Delete the record; with ``cascading`` also the project's stored functions and
        schedules, which must all be the caller's (admins: any)."""
        with self._sessions.begin() as session:
            row = session.get(ProjectRow, name)
            uses = self._uses(session, name)
            if row is None and not any(uses.values()):
                raise NotFoundError(f"project {name!r} does not exist")
            if row is not None and row.owner != user and not admin:
                raise _not_yours(name, user)
            if row is None and not admin:  # a name without a record has no owner
                raise PolicyError(
                    "project",
                    f"project {name!r} has no record, so no owner; only admins delete it",
                )
            if strategy is DeletionStrategy.RESTRICTED:
                held = [f"{count} {what}" for what, count in uses.items() if count]
                if held:
                    raise ProjectInUseError(
                        f"project {name!r} still has " + ", ".join(held) + "; delete them "
                        "first, or delete with deletion_strategy=cascading (its stored "
                        "functions and schedules are deleted with it; its runs' records stay)"
                    )
            else:
                self._cascade(session, name, user, admin)
            if row is not None:
                session.delete(row)

    @staticmethod
    def _uses(session: Any, name: str) -> dict[str, int]:
        def count(column: Any, *where: Any) -> int:
            return int(session.scalar(select(func.count()).where(*where).select_from(column)))

        return {
            "runs": int(
                session.scalar(select(func.sum(RunCount.runs)).where(RunCount.project == name)) or 0
            ),
            "stored functions": int(
                session.scalar(
                    select(func.count(func.distinct(FunctionVersion.name))).where(
                        FunctionVersion.project == name
                    )
                )
            ),
            "schedules": count(Schedule, Schedule.project == name),
        }

    @staticmethod
    def _cascade(session: Any, name: str, user: str, admin: bool) -> None:
        if not admin:
            others = session.scalar(
                select(func.count())
                .select_from(FunctionOwner)
                .where(FunctionOwner.project == name, FunctionOwner.owner != user)
            ) or session.scalar(
                select(func.count())
                .select_from(Schedule)
                .where(Schedule.project == name, Schedule.created_by != user)
            )
            if others:
                raise PolicyError(
                    "deletion_strategy",
                    f"project {name!r} has functions or schedules of other users; only "
                    "admins delete those with it",
                )
        session.execute(delete(Schedule).where(Schedule.project == name))
        session.execute(delete(FunctionVersion).where(FunctionVersion.project == name))
        session.execute(delete(FunctionOwner).where(FunctionOwner.project == name))
