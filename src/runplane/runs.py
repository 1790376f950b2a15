"""The run model: the states a run passes through, the rules between them, and its record.

Every layer speaks of runs in these terms. Runtimes report a :class:`RunState` and a
:class:`Condition` in their events, the service keeps :class:`RunRecord` values (its stores map
them to tables), and clients read them. Nothing here touches a database or a runtime, so the
rules can be read in one place and hold the same for every backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from runplane.errors import InvalidValueError

#: The most runs one listing returns.
MAX_LISTED = 1000
#: The fewest characters of a uid that name a run (a unique prefix is accepted).
MIN_UID_PREFIX = 6
_UID_CHARACTERS = frozenset("0123456789abcdef")


def check_uid(uid: object) -> str:
    """A run's uid, or a prefix of one: 6 to 32 lowercase hex characters. Checked before it
    goes into a URL or a query, where an empty or odd one would name something else."""
    if (
        not isinstance(uid, str)
        or not MIN_UID_PREFIX <= len(uid) <= 32
        or not set(uid) <= _UID_CHARACTERS
    ):
        raise InvalidValueError(
            "uid",
            uid,
            f"a run uid is 32 hex characters, or a unique prefix of at least {MIN_UID_PREFIX} "
            "of them, as run listings show",
            "'3f2a9c1b'",
        )
    return uid


def check_limit(field: str, limit: object) -> int:
    """How many runs a listing returns: 1 to :data:`MAX_LISTED`."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LISTED:
        raise InvalidValueError(
            field, limit, f"a listing returns 1 to {MAX_LISTED} runs", f"{field}=50"
        )
    return limit


class RunState(StrEnum):
    """Where a run is: ``created → pending → running → completed | error | aborted``, with
    ``aborting`` between a request to stop and the stop."""

    CREATED = "created"
    PENDING = "pending"
    RUNNING = "running"
    ABORTING = "aborting"
    COMPLETED = "completed"
    ERROR = "error"
    ABORTED = "aborted"

    @property
    def terminal(self) -> bool:
        """A terminal state is final: no later event changes the run."""
        return self in TERMINAL

    @classmethod
    def named(cls, field_name: str, name: object) -> RunState:
        """The state a user names (in a filter, say), or an error listing the states."""
        try:
            return cls(str(name))
        except ValueError:
            raise InvalidValueError(
                field_name, name, "run states are " + ", ".join(cls), "state='running'"
            ) from None

    def may_become(self, new: RunState) -> bool:
        """Whether an observation may move a run from this state to ``new``.

        A live state may be observed again (its reason or message changes). The first end wins,
        so a late or repeated event never reopens a finished run, and once an abort is under way
        the run only ends: its process or pod reporting ``running`` again does not undo it.
        """
        return (new is self and not self.terminal) or new in _NEXT[self]


TERMINAL = frozenset({RunState.COMPLETED, RunState.ERROR, RunState.ABORTED})
LIVE = frozenset(RunState) - TERMINAL
_NEXT: dict[RunState, frozenset[RunState]] = {
    RunState.CREATED: TERMINAL | {RunState.PENDING, RunState.RUNNING, RunState.ABORTING},
    RunState.PENDING: TERMINAL | {RunState.RUNNING, RunState.ABORTING},
    RunState.RUNNING: TERMINAL | {RunState.ABORTING},
    RunState.ABORTING: TERMINAL,
    RunState.COMPLETED: frozenset(),
    RunState.ERROR: frozenset(),
    RunState.ABORTED: frozenset(),
}


class Condition(StrEnum):
    """The finer states that state thresholds watch; a run is in at most one at a time."""

    PENDING_SCHEDULED = "pending_scheduled"
    PENDING_NOT_SCHEDULED = "pending_not_scheduled"
    IMAGE_PULL_BACKOFF = "image_pull_backoff"
    RUNNING = "running"

    @classmethod
    def named(cls, field_name: str, name: object) -> Condition:
        """The condition a user means by ``name``, accepting the documents' other names."""
        canonical = CONDITION_ALIASES.get(name, name) if isinstance(name, str) else name
        try:
            return cls(str(canonical))
        except ValueError:
            raise InvalidValueError(
                field_name,
                name,
                "allowed states are " + ", ".join([*cls, *CONDITION_ALIASES]),
                "{'running': '1 min'}",
            ) from None


#: Other names users write for a condition (MLRun calls a running run ``executing``).
CONDITION_ALIASES = {"executing": Condition.RUNNING.value}


@dataclass(frozen=True, slots=True)
class Usage:
    """What a run really used, observed while it ran."""

    peak_memory_bytes: int = 0
    cpu_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class TransitionRecord:
    """The run entered ``state`` at ``at`` (the source's clock: when the pod or process did)."""

    state: RunState
    reason: str
    message: str
    at: float


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One execution of the run: a process here or a pod on a cluster."""

    number: int
    node: str
    process_id: int | None
    started_at: float | None
    ended_at: float | None
    exit_code: int | None
    reason: str


@dataclass(frozen=True, slots=True)
class RunRecord:
    """A run as recorded: a plain snapshot, safe to hand to any client."""

    uid: str
    project: str
    name: str
    runtime: str
    state: RunState
    reason: str
    status_text: str
    params: dict[str, Any]
    inputs: dict[str, Any]
    thresholds: dict[str, Any]
    priority_class: str
    requests: dict[str, Any]
    limits: dict[str, Any]
    results: dict[str, Any]
    peak_memory_bytes: int
    cpu_seconds: float
    created_at: float
    updated_at: float
    state_since: float
    started_at: float | None
    ended_at: float | None
    function: dict[str, Any] = field(repr=False)
    #: Who submitted it: a service user, or the local user of the embedded default.
    owner: str = ""
    #: How the run was held where it ran (``cgroup v1, uid 1000000007 (its own)``; locally
    #: ``watchdog, ...`` where no cgroup is writable); empty until it starts.
    isolation: str = ""
    transitions: list[TransitionRecord] = field(default_factory=list)
    attempts: list[AttemptRecord] = field(default_factory=list)
    artifacts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.state.terminal

    @property
    def usage(self) -> Usage:
        return Usage(self.peak_memory_bytes, self.cpu_seconds)

    def to_json(self) -> dict[str, Any]:
        """The record as plain JSON data (states as their names)."""
        return asdict(self, dict_factory=_plain)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunRecord:
        """A record from its JSON form, as the service's API answers with it."""
        values = dict(data)
        values["state"] = RunState(values["state"])
        values["transitions"] = [
            TransitionRecord(**{**t, "state": RunState(t["state"])}) for t in values["transitions"]
        ]
        values["attempts"] = [AttemptRecord(**a) for a in values["attempts"]]
        return cls(**values)


def _plain(items: list[tuple[str, Any]]) -> dict[str, Any]:
    return {key: value.value if isinstance(value, StrEnum) else value for key, value in items}
