"""Stored functions: every distinct content of a function is a version, addressed by its hash.

A function name belongs, within its project, to whoever stored its first version: only they
(and admins) may store further versions under it or delete it, so nobody can replace the code
another user's runs and schedules start from.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from runplane.errors import AmbiguousError, InvalidValueError, NotFoundError, PolicyError
from runplane.service.db import session_factory
from runplane.service.db.models import FunctionOwner, FunctionVersion, Run
from runplane.spec.function import Function

#: The fewest hex characters of a hash that select a version: shorter prefixes would soon match
#: several versions, and would let anyone enumerate hashes a character at a time.
MIN_VERSION_PREFIX = 8
_HEX = re.compile(r"^[0-9a-f]+$")


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


def _not_yours(project: str, name: str, user: str) -> PolicyError:
    """The refusal never names the owner: who else uses the service is not a user's business."""
    return PolicyError(
        "metadata.name",
        f"function {project}/{name} belongs to the user who stored its first version; user "
        f"{user!r} may store versions of and delete only their own functions (admins: any); "
        f"choose another name (example: metadata.name '{name[:58]}-mine')",
    )


class FunctionCatalog:
    def __init__(self, engine: Engine) -> None:
        self._sessions = session_factory(engine)

    def store(self, function: Function, user: str, admin: bool = False) -> StoredFunction:
        """Store ``function`` as the newest version. Content equal to an older version's
        makes that version the newest again (saved now, by ``user``): what was just saved is
        what the name means, whatever was stored between.

        The first version makes ``user`` the name's owner; later versions are the owner's or
        an admin's to store (``PolicyError`` otherwise).
        """
        digest = content_hash(function)
        project, name = function.metadata.project, function.metadata.name
        try:
            with self._sessions.begin() as session:
                owner = self._claim(session, project, name, user)
                if owner != user and not admin:
                    raise _not_yours(project, name, user)
                newest = session.scalars(self._versions(project, name).limit(1)).first()
                if newest is not None and newest.hash == digest:
                    return _record(newest)
                same = session.scalars(self._versions(project, name, hash=digest)).first()
                if same is not None:  # an older version: it moves to the top, a new row
                    session.delete(same)
                    session.flush()
                row = FunctionVersion(
                    project=project,
                    name=name,
                    tag=function.metadata.tag,
                    hash=digest,
                    spec=function.to_dict(),
                    created_at=time.time(),
                    created_by=user,
                )
                session.add(row)
            return _record(row)
        except IntegrityError:  # the same content, stored at the same moment by another call
            return self.get(project, name, digest)

    @staticmethod
    def _claim(session: Session, project: str, name: str, user: str) -> str:
        """The name's owner, ``user`` when the name is new. One insert wins a race: the other
        caller then reads the winner."""
        found = session.get(FunctionOwner, (project, name))
        if found is not None:
            return found.owner
        try:
            with session.begin_nested():
                session.add(
                    FunctionOwner(project=project, name=name, owner=user, created_at=time.time())
                )
            return user
        except IntegrityError:
            winner = session.get(FunctionOwner, (project, name), populate_existing=True)
            if winner is None:  # deleted again at once: let the caller try again
                raise
            return winner.owner

    def delete(self, project: str, name: str, user: str, admin: bool = False) -> None:
        """Delete every version of a function, and the name with them: the owner's or an
        admin's to do."""
        with self._sessions.begin() as session:
            owner = session.get(FunctionOwner, (project, name))
            exists = session.scalars(self._versions(project, name).limit(1)).first()
            if owner is None and exists is None:
                raise NotFoundError(f"function '{project}/{name}' does not exist")
            if owner is not None and owner.owner != user and not admin:
                raise _not_yours(project, name, user)
            session.execute(
                delete(FunctionVersion).where(
                    FunctionVersion.project == project, FunctionVersion.name == name
                )
            )
            if owner is not None:
                session.delete(owner)

    @staticmethod
    def _versions(project: str, name: str, hash: str | None = None) -> Any:
        query = select(FunctionVersion).where(
            FunctionVersion.project == project, FunctionVersion.name == name
        )
        if hash is not None:
            query = query.where(FunctionVersion.hash == hash)
        return query.order_by(FunctionVersion.created_at.desc(), FunctionVersion.id.desc())

    def get(self, project: str, name: str, version: str | None = None) -> StoredFunction:
        """The newest version; or the one ``version`` names: at least
        :data:`MIN_VERSION_PREFIX` hex characters of its hash, or its tag (the newest so
        tagged). A prefix of several versions' hashes is refused, saying how many."""
        wanted = f"{project}/{name}" + (f"@{version}" if version else "")
        with self._sessions() as session:
            query = self._versions(project, name)
            if version and _HEX.match(version) and len(version) >= MIN_VERSION_PREFIX:
                prefixed = FunctionVersion.hash.startswith(version, autoescape=True)
                matches = session.scalar(
                    select(func.count())
                    .select_from(FunctionVersion)
                    .where(
                        FunctionVersion.project == project,
                        FunctionVersion.name == name,
                        prefixed,
                    )
                )
                if matches and matches > 1:
                    raise AmbiguousError(
                        "version",
                        f"{version!r} starts the hashes of {matches} versions of "
                        f"{project}/{name}; give more of the hash",
                    )
                if matches == 1:
                    query = query.where(prefixed)
                else:
                    query = query.where(FunctionVersion.tag == version)
            elif version:
                query = query.where(FunctionVersion.tag == version)
            row = session.scalars(query.limit(1)).first()
            if row is not None:
                return _record(row)
        if version and _HEX.match(version) and len(version) < MIN_VERSION_PREFIX:
            raise InvalidValueError(
                "version",
                version,
                f"no version is tagged so; a hash prefix is at least {MIN_VERSION_PREFIX} hex "
                "characters",
                "version=3f2a9c1b",
            )
        raise NotFoundError(f"function {wanted!r} does not exist")

    def versions(self, project: str, name: str) -> list[StoredFunction]:
        with self._sessions() as session:
            rows = [_record(row) for row in session.scalars(self._versions(project, name))]
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
