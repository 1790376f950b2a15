"""Runs listed a page at a time from a key: an index per filter ending in (created_at, uid),
runs' labels as rows of their own, and the counts of runs per project, owner and state.

An existing database gets its runs' labels from their function snapshots and its counts from
one pass over its runs, both in SQL."""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"

#: The indexes this migration adds (name, columns), each ending in the list's order.
_INDEXES = (
    ("ix_runs_created", ["created_at", "uid"]),
    ("ix_runs_project_created", ["project", "created_at", "uid"]),
    ("ix_runs_owner_created", ["owner", "created_at", "uid"]),
    ("ix_runs_owner_project_created", ["owner", "project", "created_at", "uid"]),
    ("ix_runs_state_created", ["state", "created_at", "uid"]),
    ("ix_runs_project_state_created", ["project", "state", "created_at", "uid"]),
    ("ix_runs_name_created", ["name", "created_at", "uid"]),
    ("ix_runs_updated", ["updated_at"]),
)
#: The labels' indexes: a label alone, in a project, of an owner.
_LABEL_INDEXES = (
    ("ix_run_labels_created", ["key", "value", "created_at", "run_uid"]),
    ("ix_run_labels_project_created", ["key", "value", "project", "created_at", "run_uid"]),
    ("ix_run_labels_owner_created", ["key", "value", "owner", "created_at", "run_uid"]),
)
#: The indexes they replace (name, columns).
_REPLACED = (
    ("ix_runs_project", ["project"]),
    ("ix_runs_state", ["state"]),
    ("ix_runs_project_created", ["project", "created_at"]),
    ("ix_runs_owner_created", ["owner", "created_at"]),
)

#: A run's labels, from its function snapshot, in each dialect's JSON functions.
_LABELS_FROM_RUNS = {
    "postgresql": (
        "INSERT INTO run_labels (run_uid, key, value, project, owner, created_at) "
        "SELECT runs.uid, label.key, label.value, runs.project, runs.owner, runs.created_at "
        "FROM runs, "
        "json_each_text(runs.function -> 'metadata' -> 'labels') AS label "
        "WHERE json_typeof(runs.function -> 'metadata' -> 'labels') = 'object'"
    ),
    "sqlite": (
        "INSERT INTO run_labels (run_uid, key, value, project, owner, created_at) "
        "SELECT runs.uid, label.key, label.value, runs.project, runs.owner, runs.created_at "
        "FROM runs, "
        "json_each(runs.function, '$.metadata.labels') AS label "
        "WHERE json_type(runs.function, '$.metadata.labels') = 'object'"
    ),
}


def upgrade() -> None:
    for name, _ in _REPLACED:
        op.drop_index(name, "runs")
    for name, columns in _INDEXES:
        op.create_index(name, "runs", columns)
    op.create_table(
        "run_labels",
        sa.Column(
            "run_uid",
            sa.String(32),
            sa.ForeignKey("runs.uid", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("key", sa.String(317), primary_key=True),
        sa.Column("value", sa.String(63), nullable=False),
        sa.Column("project", sa.String(63), nullable=False),
        sa.Column("owner", sa.String(253), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    for name, columns in _LABEL_INDEXES:
        op.create_index(name, "run_labels", columns)
    op.create_table(
        "run_counts",
        sa.Column("project", sa.String(63), primary_key=True),
        sa.Column("owner", sa.String(253), primary_key=True),
        sa.Column("state", sa.String(16), primary_key=True),
        sa.Column("runs", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_run_counts_owner", "run_counts", ["owner"])
    bind = op.get_bind()
    labels = _LABELS_FROM_RUNS.get(bind.dialect.name)
    if labels is not None:
        op.execute(labels)
    op.execute(
        "INSERT INTO run_counts (project, owner, state, runs) "
        "SELECT project, owner, state, count(*) FROM runs GROUP BY project, owner, state"
    )


def downgrade() -> None:
    op.drop_table("run_counts")
    op.drop_table("run_labels")
    for name, _ in _INDEXES:
        op.drop_index(name, "runs")
    for name, columns in _REPLACED:
        op.create_index(name, "runs", columns)
