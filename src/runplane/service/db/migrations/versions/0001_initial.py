"""Run records: runs, their state transitions, attempts and artifacts."""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("uid", sa.String(32), primary_key=True),
        sa.Column("project", sa.String(63), nullable=False),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("runtime", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("status_text", sa.Text, nullable=False),
        sa.Column("function", sa.JSON, nullable=False),
        sa.Column("params", sa.JSON, nullable=False),
        sa.Column("inputs", sa.JSON, nullable=False),
        sa.Column("thresholds", sa.JSON, nullable=False),
        sa.Column("priority_class", sa.String(253), nullable=False),
        sa.Column("requests", sa.JSON, nullable=False),
        sa.Column("limits", sa.JSON, nullable=False),
        sa.Column("results", sa.JSON, nullable=False),
        sa.Column("peak_memory_bytes", sa.Integer, nullable=False),
        sa.Column("cpu_seconds", sa.Float, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.Column("state_since", sa.Float, nullable=False),
        sa.Column("started_at", sa.Float),
        sa.Column("ended_at", sa.Float),
        sa.Column("executor_pid", sa.Integer),
        sa.Column("executor_started", sa.Float),
        sa.Column("abort_requested", sa.Boolean, nullable=False),
    )
    op.create_index("ix_runs_project", "runs", ["project"])
    op.create_index("ix_runs_state", "runs", ["state"])
    op.create_index("ix_runs_project_created", "runs", ["project", "created_at"])
    for table, columns in (
        (
            "run_transitions",
            [
                sa.Column("state", sa.String(16), nullable=False),
                sa.Column("reason", sa.String(64), nullable=False),
                sa.Column("message", sa.Text, nullable=False),
                sa.Column("at", sa.Float, nullable=False),
            ],
        ),
        (
            "run_attempts",
            [
                sa.Column("number", sa.Integer, nullable=False),
                sa.Column("node", sa.String(253), nullable=False),
                sa.Column("process_id", sa.Integer),
                sa.Column("started_at", sa.Float),
                sa.Column("ended_at", sa.Float),
                sa.Column("exit_code", sa.Integer),
                sa.Column("reason", sa.String(64), nullable=False),
            ],
        ),
        (
            "run_artifacts",
            [
                sa.Column("key", sa.String(253), nullable=False),
                sa.Column("path", sa.Text, nullable=False),
                sa.Column("size", sa.Integer, nullable=False),
            ],
        ),
    ):
        op.create_table(
            table,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column(
                "run_uid",
                sa.String(32),
                sa.ForeignKey("runs.uid", ondelete="CASCADE"),
                nullable=False,
            ),
            *columns,
        )
        op.create_index(f"ix_{table}_run_uid", table, ["run_uid"])


def downgrade() -> None:
    for table in ("run_artifacts", "run_attempts", "run_transitions", "runs"):
        op.drop_table(table)
