"""Which runs a list shows and from where: filters, the list's key and the cursor that carries
it between pages.

Runs are listed newest first by the key (``created_at``, ``uid``). A page is the next
``limit`` runs after the last key the previous page showed, read as a range of an index that
ends in the key (see :class:`runplane.service.db.models.Run`): a page deep in a million runs
costs what the first does, where an OFFSET reads and drops every run before it. The key
travels as an opaque cursor, so clients never build one.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, exists, select, tuple_
from sqlalchemy.orm import aliased

from runplane.errors import InvalidValueError
from runplane.runs import RunRecord, RunState, check_uid
from runplane.service.db.models import RUNS, Run, RunLabel
from runplane.spec.labels import check_label_key, check_label_value

#: Where a list of runs goes on from: the last shown run's (created_at, uid).
Key = tuple[float, str]

_CURSOR_RULE = "the cursor a previous page of runs returned, as it was given"


def cursor_of(record: RunRecord) -> str:
    """The cursor of the page after ``record``: its key, opaque to clients."""
    return base64.urlsafe_b64encode(f"{record.created_at!r} {record.uid}".encode()).decode()


def key_of(cursor: str) -> Key:
    """The key a cursor carries; a cursor that did not come from a page is a clear error."""
    try:
        created, uid = base64.urlsafe_b64decode(cursor.encode("ascii")).decode().split(" ")
        key = (float(created), check_uid(uid))
    except (ValueError, UnicodeError, binascii.Error, InvalidValueError):
        raise InvalidValueError("cursor", cursor, _CURSOR_RULE, "cursor=MTcwMC4...") from None
    if len(key[1]) != 32 or not math.isfinite(key[0]):
        raise InvalidValueError("cursor", cursor, _CURSOR_RULE, "cursor=MTcwMC4...")
    return key


def label_filter(given: Iterable[str] | Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """``key=value`` labels (or a mapping of them), checked as labels are."""
    if isinstance(given, Mapping):
        pairs = list(given.items())
    else:
        pairs = []
        for item in given:
            key, equals, value = item.partition("=")
            if not equals:
                raise InvalidValueError(
                    "label",
                    item,
                    "a label filter is key=value: runs whose function has that label",
                    "label=team=vision",
                )
            pairs.append((key, value))
    return tuple(
        sorted(
            (check_label_key("label key", key), check_label_value("label value", value))
            for key, value in pairs
        )
    )


@dataclass(frozen=True, slots=True)
class RunFilter:
    """Which runs a list or a count is of; every field left out matches every run.

    ``name`` is the run's function name, matched whole (MLRun's ``list_runs(name=...)``);
    ``labels`` must all be on the run's function as submitted; ``created_since`` is
    inclusive and ``created_until`` exclusive (seconds since the epoch)."""

    project: str | None = None
    states: tuple[str, ...] = ()
    owner: str | None = None
    name: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    created_since: float | None = None
    created_until: float | None = None

    @classmethod
    def of(
        cls,
        project: str | None = None,
        states: Iterable[str] = (),
        owner: str | None = None,
        name: str | None = None,
        labels: Iterable[str] | Mapping[str, str] | None = None,
        created_since: float | None = None,
        created_until: float | None = None,
    ) -> RunFilter:
        """A filter of what callers give, checked: states by name, labels as labels."""
        return cls(
            project=project or None,
            states=tuple(sorted({RunState.named("state", state).value for state in states})),
            owner=owner,
            name=name or None,
            labels=label_filter(labels or ()),
            created_since=created_since,
            created_until=created_until,
        )

    @property
    def counted(self) -> bool:
        """Whether the counts table holds this filter's count (project, owner and states)."""
        return not (self.name or self.labels or self.created_since or self.created_until)

    def query(self, after: Key | None = None) -> Select[Any]:
        """Runs of this filter after ``after``, newest first: the rows as an index gives them.

        With labels, the first label's rows give the order (they carry the run's key, project
        and owner) and the runs are read by their primary key; otherwise one of the runs'
        indexes whose columns this filter sets, ending in the key, does."""
        query = select(RUNS)
        created, uid = Run.created_at, Run.uid
        project, owner = Run.project, Run.owner
        if self.labels:
            (key, value), rest = self.labels[0], self.labels[1:]
            label = aliased(RunLabel)
            query = query.join(label, label.run_uid == Run.uid).where(
                label.key == key, label.value == value
            )
            created, uid = label.created_at, label.run_uid
            project, owner = label.project, label.owner
            for key, value in rest:
                query = query.where(
                    exists().where(
                        RunLabel.run_uid == Run.uid, RunLabel.key == key, RunLabel.value == value
                    )
                )
        if self.project:
            query = query.where(project == self.project)
        if self.owner is not None:
            query = query.where(owner == self.owner)
        if self.name:
            query = query.where(Run.name == self.name)
        if len(self.states) == 1:
            query = query.where(Run.state == self.states[0])
        elif self.states:
            query = query.where(Run.state.in_(self.states))
        if self.created_since is not None:
            query = query.where(created >= self.created_since)
        if self.created_until is not None:
            query = query.where(created < self.created_until)
        if after is not None:
            query = query.where(tuple_(created, uid) < tuple_(*after))
        return query.order_by(created.desc(), uid.desc())
