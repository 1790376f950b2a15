"""Stored functions: every distinct content of a function is a version, addressed by its hash."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, func, select
from sqlalchemy.exc import IntegrityError

from runplane.errors import NotFoundError
from runplane.service.db import session_factory
from runplane.service.db.models import FunctionVersion, Run
from runplane.spec.function import Function


@dataclass(frozen=True, slots=True)
class StoredFunction:
    project: str
    name: str
    tag: str
    hash: str
    created_at: float
    created_by: str
    function: dict[str, Any]


def content_hash(function: Function) -> str:
    """A stable hash of what the function is (its tag is a label, not content)."""
    data = function.to_dict()
    data.get("metadata", {}).pop("tag", None)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def _record(row: FunctionVersion) -> StoredFunction:
    return StoredFunction(
        row.project, row.name, row.tag, row.hash, row.created_at, row.created_by, row.spec
    )


class FunctionCatalog:
    def __init__(self, engine: Engine) -> None:
        self._sessions = session_factory(engine)

    def store(self, function: Function, user: str) -> StoredFunction:
        """Store ``function`` as a new version, or return the version with the same content."""
        digest = content_hash(function)
        project, name = function.metadata.project, function.metadata.name
        row = FunctionVersion(
            project=project,
            name=name,
            tag=function.metadata.tag,
            hash=digest,
            spec=function.to_dict(),
            created_at=time.time(),
            created_by=user,
        )
        try:
            with self._sessions.begin() as session:
                session.add(row)
            return _record(row)
        except IntegrityError:
            return self.get(project, name, digest)

    def get(self, project: str, name: str, version: str | None = None) -> StoredFunction:
        """The newest version, or the one whose hash starts with (or whose tag is) ``version``."""
        query = select(FunctionVersion).where(
            FunctionVersion.project == project, FunctionVersion.name == name
        )
        if version:
            query = query.where(
                FunctionVersion.hash.startswith(version, autoescape=True)
                | (FunctionVersion.tag == version)
            )
        query = query.order_by(FunctionVersion.created_at.desc(), FunctionVersion.id.desc())
        with self._sessions() as session:
            row = session.scalars(query.limit(1)).first()
            if row is None:
                wanted = f"{project}/{name}" + (f"@{version}" if version else "")
                raise NotFoundError(f"function {wanted!r} does not exist")
            return _record(row)

    def versions(self, project: str, name: str) -> list[StoredFunction]:
        query = (
            select(FunctionVersion)
            .where(FunctionVersion.project == project, FunctionVersion.name == name)
            .order_by(FunctionVersion.created_at.desc(), FunctionVersion.id.desc())
        )
        with self._sessions() as session:
            rows = [_record(row) for row in session.scalars(query)]
        if not rows:
            raise NotFoundError(f"function {project}/{name!s} does not exist")
        return rows

    def latest(self, project: str) -> list[StoredFunction]:
        newest = (
            select(FunctionVersion.name, func.max(FunctionVersion.id).label("id"))
            .where(FunctionVersion.project == project)
            .group_by(FunctionVersion.name)
            .subquery()
        )
        query = (
            select(FunctionVersion)
            .join(newest, FunctionVersion.id == newest.c.id)
            .order_by(FunctionVersion.name)
        )
        with self._sessions() as session:
            return [_record(row) for row in session.scalars(query)]

    def projects(self) -> list[str]:
        with self._sessions() as session:
            names = set(session.scalars(select(FunctionVersion.project).distinct()))
            names |= set(session.scalars(select(Run.project).distinct()))
        return sorted(names)
