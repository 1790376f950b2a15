"""The run model: the states a run passes through, the rules between them, and its record.

Every layer speaks of runs in these terms. Runtimes report a :class:`RunState` and a
:class:`Condition` in their events, the service keeps :class:`RunRecord` values (its stores map
them to tables), and clients read them. Nothing here touches a database or a runtime, so the
rules can be read in one place and hold the same for every backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
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

    @property
    def may_retry(self) -> bool:
        """Whether the end of an attempt may send the run back to ``pending`` for another one.

        Observations never move a run backwards (:meth:`may_become`); a retry is not an
        observation but a decision, recorded with the attempt that failed. An abort under way
        may end in a retry too: a threshold's or the spot fallback's abort stops one attempt,
        not the run (an abort a person asked for is refused by the store, which knows).
        """
        return not self.terminal

    def may_become(self, new: RunState) -> bool:
        """Whether an observation may move a run from this state to ``new``.

        A live state may be observed again (its reason or message changes). The first end wins,
        so a late or repeated event never reopens a finished run, and once an abort is under way
        the run only ends: its process or pod reporting ``running`` again does not undo it.
        """
        return (new is self and not self.terminal) or new in _NEXT[self]


TERMINAL = frozenset({RunState.COMPLETED, RunState.ERROR, RunState.ABORTED})
#: A new live state needs a migration that writes the partial index of the live runs asked to
#: abort again (``ix_runs_abort_asked``, whose definition names these states).
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


class FailureClass(StrEnum):
    """Why an attempt failed, in the words retry policies use; every failed attempt has one.

    :func:`classify` is the one place a runtime's reason becomes a class, so the same failure
    reads the same on every runtime.
    """

    #: Stopped to make room or to leave: spot reclaim, eviction by a higher priority class,
    #: a drain, ``DisruptionTarget``, a pod deleted by someone else than runplane.
    PREEMPTED = "preempted"
    #: Its node (or, here, the process that executed it) disappeared under it.
    NODE_LOST = "node_lost"
    #: Killed for using more memory than its limit.
    OOM = "oom"
    #: Its image could not be pulled (aborted by the ``image_pull_backoff`` threshold).
    IMAGE_PULL = "image_pull"
    #: It found no node in time (a ``pending`` threshold, or the spot fallback's wait).
    UNSCHEDULABLE = "unschedulable"
    #: It ran longer than its ``running`` threshold.
    DEADLINE = "deadline"
    #: The handler failed: a non-zero exit code (recorded with the attempt), or a launch the
    #: runtime refused.
    ERROR = "error"
    #: A person aborted it; never retried.
    ABORTED = "aborted"

    @classmethod
    def named(cls, field_name: str, name: object) -> FailureClass:
        try:
            return cls(str(name))
        except ValueError:
            raise InvalidValueError(
                field_name, name, "failure classes are " + ", ".join(cls), "'preempted'"
            ) from None


#: Classes a retry policy may name: everything but a person's abort.
RETRYABLE = frozenset(FailureClass) - {FailureClass.ABORTED}


class Reason(StrEnum):
    """The short words that say why a run is where it is, whoever writes them: runtimes in their
    events, the service in the ends and waits it records. Stored and shown as they are (the
    values are what runs' records have always held); a runtime may also pass on a word of its
    own (a container's reason, a signal's name), classed ``error`` when an attempt ends ``error``.
    """

    #: Waiting: for capacity or a node, for the scheduler's place to start, for the next
    #: attempt, for the service's next start, for the leading replica to launch it.
    PENDING = "Pending"
    UNSCHEDULABLE = "Unschedulable"
    #: Admitted by no queue yet: the run's project has not the quota for it now (a node
    #: might well fit it: that is ``Unschedulable``'s to say).
    WAITING_FOR_QUOTA = "WaitingForQuota"
    SCHEDULED = "Scheduled"
    RETRYING = "Retrying"
    REQUEUED = "Requeued"
    #: Recorded by a replica of the service that does not lead, for the leader to launch.
    AWAITING_LEADER = "AwaitingLeader"
    #: Held pending by its project's spend budget until the period rolls over or the budget
    #: is raised (the status text says how much was spent of how much).
    BUDGET = "Budget"
    STARTED = "Started"
    RUNNING = "Running"
    COMPLETED = "Completed"
    #: The handler's process exited non-zero.
    ERROR = "Error"
    OOM_KILLED = "OOMKilled"
    PIDS_LIMIT = "PidsLimit"
    IMAGE_PULL_BACKOFF = "ImagePullBackOff"
    ERR_IMAGE_PULL = "ErrImagePull"
    DEADLINE_EXCEEDED = "DeadlineExceeded"
    #: Stopped to make room or to leave (see :attr:`FailureClass.PREEMPTED`).
    PREEMPTED = "Preempted"
    POD_DELETED = "PodDeleted"
    EVICTED = "Evicted"
    #: Its node, pod or executing process disappeared under it.
    NODE_LOST = "NodeLost"
    POD_LOST = "PodLost"
    EXECUTOR_LOST = "executor lost"
    #: The runtime could not take the run, or failed while it held it.
    LAUNCH_FAILED = "LaunchFailed"
    EXECUTOR_ERROR = "ExecutorError"
    #: Aborted: by a person, by a state threshold, or by the spot fallback after it waited
    #: too long for a spot node.
    ABORTED = "Aborted"
    THRESHOLD = "ThresholdExceeded"
    SPOT_UNAVAILABLE = "SpotUnavailable"
    #: Why the service stops what a runtime still has: a run it does not know, or one that
    #: has ended.
    ORPHAN = "Orphan"
    ENDED = "Ended"
    #: A running attempt's limits were changed in place (live right-sizing).
    RESIZED = "Resized"


#: How a threshold's abort is worded; the condition follows it.
THRESHOLD_TEXT = "Run aborted due to exceeded state threshold: "

_BY_REASON: dict[str, FailureClass] = {
    Reason.PREEMPTED: FailureClass.PREEMPTED,
    Reason.POD_DELETED: FailureClass.PREEMPTED,
    Reason.EVICTED: FailureClass.PREEMPTED,
    Reason.NODE_LOST: FailureClass.NODE_LOST,
    Reason.POD_LOST: FailureClass.NODE_LOST,
    Reason.EXECUTOR_LOST: FailureClass.NODE_LOST,
    Reason.OOM_KILLED: FailureClass.OOM,
    Reason.IMAGE_PULL_BACKOFF: FailureClass.IMAGE_PULL,
    Reason.ERR_IMAGE_PULL: FailureClass.IMAGE_PULL,
    Reason.DEADLINE_EXCEEDED: FailureClass.DEADLINE,
    Reason.SPOT_UNAVAILABLE: FailureClass.UNSCHEDULABLE,
}
_BY_CONDITION: dict[str, FailureClass] = {
    Condition.PENDING_SCHEDULED: FailureClass.UNSCHEDULABLE,
    Condition.PENDING_NOT_SCHEDULED: FailureClass.UNSCHEDULABLE,
    Condition.IMAGE_PULL_BACKOFF: FailureClass.IMAGE_PULL,
    Condition.RUNNING: FailureClass.DEADLINE,
}


def classify(state: RunState, reason: str, message: str = "") -> FailureClass | None:
    """The class of an attempt that ended in ``state`` for ``reason``; ``None`` unless it failed.

    A threshold's abort is classed by the condition it watched (named in ``message``), the
    spot fallback's by what it waited for; every other abort is a person's. The service asks
    once per event, as the event enters it (:meth:`RunEvent.classified
    <runplane.runtimes.events.RunEvent.classified>`), and keeps the answer on the event.
    """
    if state not in (RunState.ERROR, RunState.ABORTED):
        return None
    if reason == Reason.THRESHOLD and message.startswith(THRESHOLD_TEXT):
        condition = message[len(THRESHOLD_TEXT) :].split(" ", 1)[0]
        return _BY_CONDITION.get(condition, FailureClass.UNSCHEDULABLE)
    if state is RunState.ABORTED:
        spot_wait = reason == Reason.SPOT_UNAVAILABLE
        return FailureClass.UNSCHEDULABLE if spot_wait else FailureClass.ABORTED
    return _BY_REASON.get(reason, FailureClass.ERROR)


@dataclass(frozen=True, slots=True)
class Usage:
    """What a run really used, observed while it ran."""

    peak_memory_bytes: int = 0
    cpu_seconds: float = 0.0
    #: The memory the run holds now (0 where the runtime knows only the peak).
    memory_bytes: int = 0


@dataclass(frozen=True, slots=True)
class TransitionRecord:
    """The run entered ``state`` at ``at`` (the source's clock: when the pod or process did)."""

    state: RunState
    reason: str
    message: str
    at: float


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One execution of the run: a process here or a pod on a cluster.

    An attempt is recorded when it is decided (the first with the run, a retry when the one
    before failed), with the resources and placement it runs with and why they differ from
    the function's; it gets its node when it starts, and its end, class and usage when it ends.
    """

    number: int
    node: str
    process_id: int | None
    started_at: float | None
    ended_at: float | None
    exit_code: int | None
    reason: str
    #: Why it failed (a :class:`FailureClass` value); empty while it runs or if it completed.
    failure: str = ""
    #: The status text it ended with.
    message: str = ""
    #: The node's group (its ``runplane.io/node-group`` label) and whether it is a spot node;
    #: ``None`` when the runtime could not tell.
    node_group: str = ""
    spot: bool | None = None
    #: When it was due to start (a retry waits out its back-off) and when it was handed to the
    #: runtime.
    due_at: float | None = None
    launched_at: float | None = None
    #: What it ran with: effective requests and limits, and the preemption mode.
    requests: dict[str, Any] = field(default_factory=dict)
    limits: dict[str, Any] = field(default_factory=dict)
    preemption_mode: str = ""
    #: Why its placement or resources differ from the function's (the spot fallback, more
    #: memory after an OOM kill); empty when they do not.
    adjustments: str = ""
    peak_memory_bytes: int = 0
    cpu_seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class ResizeRecord:
    """One in-place change of a running attempt's limits, or one refused (live right-sizing):
    when, from what to what (bytes; millicores, ``None`` where unchanged or unlimited), why,
    and whether runplane decided it (``auto``) or a person asked for it (``manual``, ``by``
    them)."""

    at: float
    attempt: int
    memory_from: int | None
    memory_to: int | None
    cpu_from: int | None
    cpu_to: int | None
    why: str
    mode: str = "auto"
    by: str = ""
    #: ``applied``; ``refused`` (the runtime or node could not grant it; the run goes on as
    #: it was); ``fallback`` (it could not, and the attempt's OOM kill is retried larger).
    outcome: str = "applied"

    @property
    def applied(self) -> bool:
        return self.outcome == "applied"


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
    #: The attempt the run is on (the last one once it ended), and when it is due while the
    #: run waits between attempts (``None`` otherwise).
    attempt: int = 1
    retry_at: float | None = None
    #: When retention removed the run's output and files; its record outlives them.
    logs_removed_at: float | None = None
    transitions: list[TransitionRecord] = field(default_factory=list)
    attempts: list[AttemptRecord] = field(default_factory=list)
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    #: Its attempts' limits changed in place (live right-sizing), oldest first.
    resizes: list[ResizeRecord] = field(default_factory=list)

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
        values["attempts"] = [AttemptRecord(**_known(AttemptRecord, a)) for a in values["attempts"]]
        values["resizes"] = [
            ResizeRecord(**_known(ResizeRecord, r)) for r in values.get("resizes", [])
        ]
        return cls(**_known(cls, values))


def _known(kind: type, values: Mapping[str, Any]) -> dict[str, Any]:
    """The fields ``kind`` has: a record from a newer service, with fields this client does not
    know yet, still reads."""
    names = {item.name for item in fields(kind)}
    return {key: value for key, value in values.items() if key in names}


def _plain(items: list[tuple[str, Any]]) -> dict[str, Any]:
    return {key: value.value if isinstance(value, StrEnum) else value for key, value in items}
