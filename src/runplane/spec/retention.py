"""A retention policy: how long finished runs and their files are kept.

Its terms, each unset by default (kept for ever): ``runs_max_age``, how long a finished run's
record is kept after it ended; ``runs_max_count``, how many of a project's newest finished
runs are kept; ``logs_max_age``, how long a finished run's output and the files in its
directory (its artifacts, unless it wrote them elsewhere) are kept after it ended, which may be
shorter than its record's. The service has one (``Settings.retention``); a project's record may
override any term of it (``retention`` on the project). Live runs are never removed.
Kubernetes calls an age ``ttlSecondsAfterFinished``; these are the same idea, per project.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic

from runplane.errors import InvalidValueError
from runplane.spec.base import checked
from runplane.spec.durations import ALLOWED as DURATION_ALLOWED
from runplane.spec.durations import NEVER, parse_duration

#: The shortest age a policy may set: a client waiting on a run reads its record once it ends.
MIN_AGE_SECONDS = 60
#: The most runs a count may keep (a bound on the number, not on what a project may hold).
MAX_COUNT = 10_000_000
TERMS = ("runs_max_age", "runs_max_count", "logs_max_age")
EXAMPLE = "{'runs_max_age': '90 days', 'runs_max_count': 1000, 'logs_max_age': '14d'}"


def check_age(field: str, value: object) -> str | None:
    """An age as written (``'30d'``, ``'2 weeks'``), checked; ``None`` (or -1) for never."""
    if value is None:
        return None
    seconds = parse_duration(field, value)
    if seconds == NEVER:
        return None
    if seconds < MIN_AGE_SECONDS:
        raise InvalidValueError(
            field,
            value,
            f"an age of at least {MIN_AGE_SECONDS} seconds ({DURATION_ALLOWED}), or null to "
            "keep for ever",
            "'30d'",
        )
    return str(value).strip()


def check_count(field: str, value: object) -> int | None:
    """A number of runs to keep, from 1; ``None`` (or -1) for all."""
    if value is None or (value == -1 and not isinstance(value, bool)):
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
        raise InvalidValueError(
            field, value, f"a whole number of runs from 1 to {MAX_COUNT}, or null for all", "1000"
        )
    return value


class RetentionPolicy(pydantic.BaseModel):
    """The terms of a policy as written; :meth:`seconds` reads an age."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    runs_max_age: str | None = None
    runs_max_count: int | None = None
    logs_max_age: str | None = None

    _ages = checked("runs_max_age", "logs_max_age", by=check_age, where="retention")
    _count = checked("runs_max_count", by=check_count, where="retention")

    def seconds(self, term: str) -> float | None:
        """The age ``term`` in seconds; ``None`` when it is unset."""
        value = getattr(self, term)
        return None if value is None else parse_duration(term, value)

    def over(self, overrides: Mapping[str, Any]) -> RetentionPolicy:
        """This policy with the terms a project sets (``overrides``, already checked)."""
        return self.model_copy(update={key: overrides[key] for key in TERMS if key in overrides})


def check_overrides(field: str, value: object) -> dict[str, Any]:
    """A project's overrides: a dict of some of :data:`TERMS`, each checked. A term given as
    null keeps for ever, whatever the service's default."""
    if not isinstance(value, Mapping):
        raise InvalidValueError(field, value, "a dict of " + ", ".join(TERMS), EXAMPLE)
    checked_terms: dict[str, Any] = {}
    for key, term in value.items():
        if key not in TERMS:
            raise InvalidValueError(
                f"{field}.{key}", term, "a retention policy has " + ", ".join(TERMS), EXAMPLE
            )
        check = check_count if key == "runs_max_count" else check_age
        checked_terms[key] = check(f"{field}.{key}", term)
    return checked_terms
