"""Run records as tables: what a run asked for, what happened to it, what it produced."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    ColumnElement,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    and_,
    bindparam,
)
from sqlalchemy import false as sa_false
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from runplane.runs import LIVE, Reason, RunState


class Base(DeclarativeBase):
    pass


class Run(Base):
    __tablename__ = "runs"

    uid: Mapped[str] = mapped_column(String(32), primary_key=True)
    project: Mapped[str] = mapped_column(String(63))
    name: Mapped[str] = mapped_column(String(63))
    runtime: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(String(64), default="")
    status_text: Mapped[str] = mapped_column(Text, default="")
    function: Mapped[dict[str, Any]] = mapped_column(JSON)
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    inputs: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    thresholds: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    priority_class: Mapped[str] = mapped_column(String(253), default="")
    requests: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    limits: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    results: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    peak_memory_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    cpu_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    state_since: Mapped[float] = mapped_column(Float)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    ended_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    executor_pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    executor_started: Mapped[float | None] = mapped_column(Float, nullable=True)
    abort_requested: Mapped[bool] = mapped_column(default=False)
    #: Who submitted the run: a service user, or the local user of the embedded default.
    owner: Mapped[str] = mapped_column(String(253), default="", server_default="")
    #: The caller's directory, importable by the handler (what a relaunch needs of the call).
    source_dir: Mapped[str] = mapped_column(Text, default="", server_default="")
    #: A service queued it: if that service stops before the run starts, the next start of
    #: the service launches it (a command's queued runs end with the command instead).
    requeue: Mapped[bool] = mapped_column(default=False, server_default=sa_false())
    #: How the run was held where it ran: ``cgroup v1, uid 1000000007 (its own)``, ``watchdog,
    #: uid 0 (runplane's)``; empty until it starts (and for runtimes that do not say).
    isolation: Mapped[str] = mapped_column(String(128), default="", server_default="")
    #: The attempt the run is on, and while it waits between attempts, when the next is due
    #: (how that attempt runs is on its row).
    attempt: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    retry_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: When retention removed the run's output and files, which its record outlives.
    logs_removed_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: How many resizes its attempts had (rows of ``run_resizes``): a record's read asks for
    #: them only when there are some.
    resized: Mapped[int] = mapped_column(Integer, server_default="0")

    transitions: Mapped[list[Transition]] = relationship(
        back_populates="run", cascade="all, delete-orphan", order_by="Transition.id"
    )
    attempts: Mapped[list[Attempt]] = relationship(
        back_populates="run", cascade="all, delete-orphan", order_by="Attempt.number"
    )
    artifacts: Mapped[list[Artifact]] = relationship(
        back_populates="run", cascade="all, delete-orphan", order_by="Artifact.id"
    )

    #: Lists are newest first by (created_at, uid), a page at a time from the last key
    #: shown: each filter has an index that ends in that key, so a page of any filter is a
    #: range of one index read in order, however many runs there are.
    __table_args__ = (
        Index("ix_runs_created", "created_at", "uid"),
        Index("ix_runs_project_created", "project", "created_at", "uid"),
        Index("ix_runs_owner_created", "owner", "created_at", "uid"),
        Index("ix_runs_owner_project_created", "owner", "project", "created_at", "uid"),
        Index("ix_runs_state_created", "state", "created_at", "uid"),
        Index("ix_runs_project_state_created", "project", "state", "created_at", "uid"),
        Index("ix_runs_name_created", "name", "created_at", "uid"),
        # What changed since a live page was read, most recent first.
        Index("ix_runs_updated", "updated_at"),
        # Retention's indexes (ENDED, FILES_KEPT) are partial: below.
    )


class RunLabel(Base):
    """A label of a run's function as it was submitted, one row per key, with what a label
    filter is combined with (the run's project and owner, which never change) and the run's
    key: a label filter, alone, in a project or of a user, reads its runs newest first from
    one index."""

    __tablename__ = "run_labels"

    run_uid: Mapped[str] = mapped_column(
        ForeignKey("runs.uid", ondelete="CASCADE"), primary_key=True
    )
    key: Mapped[str] = mapped_column(String(317), primary_key=True)
    value: Mapped[str] = mapped_column(String(63))
    project: Mapped[str] = mapped_column(String(63))
    owner: Mapped[str] = mapped_column(String(253))
    created_at: Mapped[float] = mapped_column(Float)

    __table_args__ = (
        Index("ix_run_labels_created", "key", "value", "created_at", "run_uid"),
        Index("ix_run_labels_project_created", "key", "value", "project", "created_at", "run_uid"),
        Index("ix_run_labels_owner_created", "key", "value", "owner", "created_at", "run_uid"),
    )


class RunUsage(Base):
    """A run's memory and CPU over time (:mod:`runplane.service.usage_samples`), a bounded
    JSON list in one row, written apart from the run's own row."""

    __tablename__ = "run_usage"

    run_uid: Mapped[str] = mapped_column(
        ForeignKey("runs.uid", ondelete="CASCADE"), primary_key=True
    )
    points: Mapped[str] = mapped_column(Text)


class RunCount(Base):
    """How many runs each (project, owner) has in each state, changed in the transaction
    that creates, moves or deletes a run: counts are read from these few rows, never by
    counting runs."""

    __tablename__ = "run_counts"

    project: Mapped[str] = mapped_column(String(63), primary_key=True)
    owner: Mapped[str] = mapped_column(String(253), primary_key=True)
    state: Mapped[str] = mapped_column(String(16), primary_key=True)
    runs: Mapped[int] = mapped_column(BigInteger, default=0)

    __table_args__ = (Index("ix_run_counts_owner", "owner"),)


class Transition(Base):
    __tablename__ = "run_transitions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_uid: Mapped[str] = mapped_column(ForeignKey("runs.uid", ondelete="CASCADE"), index=True)
    state: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(String(64), default="")
    message: Mapped[str] = mapped_column(Text, default="")
    at: Mapped[float] = mapped_column(Float)

    run: Mapped[Run] = relationship(back_populates="transitions")


class Attempt(Base):
    __tablename__ = "run_attempts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    #: Found by ix_run_attempts_run_number, which begins with it (an index of its own would
    #: be one more page written for every attempt, read by nothing).
    run_uid: Mapped[str] = mapped_column(ForeignKey("runs.uid", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer)
    node: Mapped[str] = mapped_column(String(253), default="")
    process_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    started_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    ended_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    reason: Mapped[str] = mapped_column(String(64), default="")
    failure: Mapped[str] = mapped_column(String(16), default="", server_default="")
    message: Mapped[str] = mapped_column(Text, default="", server_default="")
    node_group: Mapped[str] = mapped_column(String(63), default="", server_default="")
    spot: Mapped[bool | None] = mapped_column(nullable=True)
    due_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    launched_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    requests: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    limits: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    preemption_mode: Mapped[str] = mapped_column(String(16), default="", server_default="")
    adjustments: Mapped[str] = mapped_column(Text, default="", server_default="")
    peak_memory_bytes: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    cpu_seconds: Mapped[float] = mapped_column(Float, default=0.0, server_default="0")

    run: Mapped[Run] = relationship(back_populates="attempts")

    __table_args__ = (Index("ix_run_attempts_run_number", "run_uid", "number"),)


class Artifact(Base):
    __tablename__ = "run_artifacts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_uid: Mapped[str] = mapped_column(ForeignKey("runs.uid", ondelete="CASCADE"), index=True)
    key: Mapped[str] = mapped_column(String(253))
    path: Mapped[str] = mapped_column(Text)
    size: Mapped[int] = mapped_column(Integer, default=0)

    run: Mapped[Run] = relationship(back_populates="artifacts")


class RunResize(Base):
    """One in-place change of a running attempt's limits, or one refused (live right-sizing,
    :mod:`runplane.service.resizes`); deleted with its run."""

    __tablename__ = "run_resizes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_uid: Mapped[str] = mapped_column(ForeignKey("runs.uid", ondelete="CASCADE"), index=True)
    at: Mapped[float] = mapped_column(Float)
    attempt: Mapped[int] = mapped_column(Integer)
    memory_from: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    memory_to: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    cpu_from: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    cpu_to: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    why: Mapped[str] = mapped_column(Text, default="")
    #: ``auto`` (runplane decided it) or ``manual`` (a person asked, ``by``).
    mode: Mapped[str] = mapped_column(String(16), default="auto")
    by: Mapped[str] = mapped_column(String(253), default="")
    #: ``applied``, ``refused`` or ``fallback`` (see :class:`runplane.runs.ResizeRecord`).
    outcome: Mapped[str] = mapped_column(String(16), default="applied")


class FunctionVersion(Base):
    """A stored function; every distinct content is a version, addressed by its hash."""

    __tablename__ = "functions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    project: Mapped[str] = mapped_column(String(63))
    name: Mapped[str] = mapped_column(String(63))
    tag: Mapped[str] = mapped_column(String(63), default="")
    hash: Mapped[str] = mapped_column(String(64))
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[float] = mapped_column(Float)
    created_by: Mapped[str] = mapped_column(String(253), default="")

    __table_args__ = (
        Index("ix_functions_project_name", "project", "name", "created_at"),
        Index("ux_functions_version", "project", "name", "hash", unique=True),
    )


class FunctionOwner(Base):
    """Who a function name belongs to within its project: whoever stored its first version.

    A row of its own, keyed by the name, so two users storing the same new name at once
    cannot both become its owner: the database lets one insert win.
    """

    __tablename__ = "function_owners"

    project: Mapped[str] = mapped_column(String(63), primary_key=True)
    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    owner: Mapped[str] = mapped_column(String(253))
    created_at: Mapped[float] = mapped_column(Float)


class Schedule(Base):
    """A cron schedule that runs a function snapshot; ``last_fired_at`` makes firing idempotent."""

    __tablename__ = "schedules"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    project: Mapped[str] = mapped_column(String(63), index=True)
    name: Mapped[str] = mapped_column(String(63))
    cron: Mapped[str] = mapped_column(String(128))
    function: Mapped[dict[str, Any]] = mapped_column(JSON)
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    state_thresholds: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[float] = mapped_column(Float)
    created_by: Mapped[str] = mapped_column(String(253), default="")
    role: Mapped[str] = mapped_column(String(32), default="")
    last_fired_at: Mapped[float] = mapped_column(Float)


class ServiceSetting(Base):
    """Service defaults changed at run time by an admin, layered over the configuration."""

    __tablename__ = "service_settings"

    key: Mapped[str] = mapped_column(String(63), primary_key=True)
    value: Mapped[dict[str, Any]] = mapped_column(JSON)
    updated_at: Mapped[float] = mapped_column(Float)
    updated_by: Mapped[str] = mapped_column(String(253), default="")


class Project(Base):
    """A project's own record: who made it, what it is for, the parameters and default image
    its runs get. Runs, functions and schedules name their project by its name; a name with
    runs but no record is still a project (one made before records existed, or by a run)."""

    __tablename__ = "projects"

    name: Mapped[str] = mapped_column(String(63), primary_key=True)
    owner: Mapped[str] = mapped_column(String(253))
    description: Mapped[str] = mapped_column(Text, default="")
    params: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    default_image: Mapped[str] = mapped_column(String(512), default="")
    labels: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
    #: The terms of the service's retention policy this project overrides (``None``: none).
    retention: Mapped[dict[str, Any] | None] = mapped_column(JSON(none_as_null=True), nullable=True)


class ProjectQuota(Base):
    """One resource's quota of a project on one flavor of capacity, as an admin wrote it
    (:mod:`runplane.placement.quotas`); a project with no rows is not limited."""

    __tablename__ = "project_quotas"

    project: Mapped[str] = mapped_column(String(63), primary_key=True)
    flavor: Mapped[str] = mapped_column(String(16), primary_key=True)
    resource: Mapped[str] = mapped_column(String(16), primary_key=True)
    nominal: Mapped[str] = mapped_column(String(64))
    borrowing_limit: Mapped[str | None] = mapped_column(String(64), nullable=True)
    lending_limit: Mapped[str | None] = mapped_column(String(64), nullable=True)
    updated_at: Mapped[float] = mapped_column(Float)
    updated_by: Mapped[str] = mapped_column(String(253), default="")


class ProjectBudget(Base):
    """What a project may spend in a period, and what happens to its new runs at the limit
    (:mod:`runplane.service.budgets`). A table of its own: a project known only from its
    runs may have a budget too."""

    __tablename__ = "project_budgets"

    project: Mapped[str] = mapped_column(String(63), primary_key=True)
    amount: Mapped[float] = mapped_column(Float)
    period: Mapped[str] = mapped_column(String(8))
    action: Mapped[str] = mapped_column(String(16))
    updated_at: Mapped[float] = mapped_column(Float)
    updated_by: Mapped[str] = mapped_column(String(253), default="")


#: The run tables as SQL Core sees them, for the statements on the path of every run (its
#: record, its events, its waiter's read), which skip the ORM's per-object bookkeeping.
RUNS = cast(Table, Run.__table__)
TRANSITIONS = cast(Table, Transition.__table__)
ATTEMPTS = cast(Table, Attempt.__table__)
ARTIFACTS = cast(Table, Artifact.__table__)
LABELS = cast(Table, RunLabel.__table__)
COUNTS = cast(Table, RunCount.__table__)
USAGE = cast(Table, RunUsage.__table__)
RESIZES = cast(Table, RunResize.__table__)


def _partial_index(name: str, where: ColumnElement[bool], *columns: Column[Any]) -> Index:
    """An index of the runs ``where`` holds alone, on either database."""
    return Index(name, *columns, sqlite_where=where, postgresql_where=where)


#: The states of a run not yet ended, in one order.
LIVE_STATES = sorted(state.value for state in LIVE)
#: A live run someone asked to abort. The monitors look for these several times a second,
#: so they have a partial index of their own, a few entries at most: the state index would
#: make each look read every live run (170 ms for 35,000 on PostgreSQL, five times a
#: second). The states are written into the statement, not bound: SQLite uses a partial
#: index only for a query whose terms match the index's own, and a parameter matches none.
ABORT_ASKED: ColumnElement[bool] = and_(
    RUNS.c.abort_requested,
    RUNS.c.state.in_(bindparam("live_states", LIVE_STATES, expanding=True, literal_execute=True)),
)
_partial_index("ix_runs_abort_asked", ABORT_ASKED, RUNS.c.executor_pid)
#: A run its project's budget holds (``runplane.service.budget_holds``), looked for every few
#: seconds while any budget is set: its partial index has the held runs alone, by runtime and
#: executor process, where the state index would give every pending run (10,000 pending:
#: 470 ms on PostgreSQL, cold). Written into the statement for SQLite, as above.
HELD_BY_BUDGET: ColumnElement[bool] = and_(
    RUNS.c.state == bindparam("held_state", RunState.PENDING.value, literal_execute=True),
    RUNS.c.reason == bindparam("held_reason", Reason.BUDGET.value, literal_execute=True),
)
_partial_index("ix_runs_held", HELD_BY_BUDGET, RUNS.c.runtime, RUNS.c.executor_pid)
#: A run a replica that does not lead recorded, for the leader to launch: the leader looks for
#: them four times a second (``leader_election.pickup_interval``), from their own partial
#: index, where the state index would give every run not yet launched (5,067: 1.8 s cold).
AWAITING_LEADER: ColumnElement[bool] = and_(
    RUNS.c.state == bindparam("awaiting_state", RunState.CREATED.value, literal_execute=True),
    RUNS.c.reason
    == bindparam("awaiting_reason", Reason.AWAITING_LEADER.value, literal_execute=True),
)
_partial_index("ix_runs_awaiting_leader", AWAITING_LEADER, RUNS.c.runtime)
#: A run that ended: retention removes runs by when they ended, and the files of those whose
#: files remain. Live runs have no entry in either index, so recording a run, and every
#: change of a live run, writes neither (a fifth of a record's pages were theirs).
ENDED: ColumnElement[bool] = RUNS.c.ended_at.is_not(None)
_partial_index("ix_runs_ended", ENDED, RUNS.c.ended_at)
FILES_KEPT: ColumnElement[bool] = and_(RUNS.c.logs_removed_at.is_(None), ENDED)
_partial_index("ix_runs_files_kept_ended", FILES_KEPT, RUNS.c.ended_at)
