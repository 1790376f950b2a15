"""Attempts as first-class records (class, node group, resources, usage), and the retry a run
waits for between attempts."""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"

_ATTEMPT_COLUMNS = (
    sa.Column("failure", sa.String(16), nullable=False, server_default=""),
    sa.Column("message", sa.Text, nullable=False, server_default=""),
    sa.Column("node_group", sa.String(63), nullable=False, server_default=""),
    sa.Column("spot", sa.Boolean, nullable=True),
    sa.Column("due_at", sa.Float, nullable=True),
    sa.Column("launched_at", sa.Float, nullable=True),
    sa.Column("requests", sa.JSON, nullable=True),
    sa.Column("limits", sa.JSON, nullable=True),
    sa.Column("preemption_mode", sa.String(16), nullable=False, server_default=""),
    sa.Column("adjustments", sa.Text, nullable=False, server_default=""),
    sa.Column("peak_memory_bytes", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("cpu_seconds", sa.Float, nullable=False, server_default="0"),
)


def upgrade() -> None:
    with op.batch_alter_table("runs") as runs:
        runs.add_column(sa.Column("attempt", sa.Integer, nullable=False, server_default="1"))
        runs.add_column(sa.Column("retry_at", sa.Float, nullable=True))
        # A peak above 2 GiB overflowed PostgreSQL's 32-bit integer.
        runs.alter_column(
            "peak_memory_bytes", type_=sa.BigInteger, existing_type=sa.Integer, nullable=False
        )
    with op.batch_alter_table("run_attempts") as attempts:
        for column in _ATTEMPT_COLUMNS:
            attempts.add_column(column)
    op.create_index("ix_run_attempts_run_number", "run_attempts", ["run_uid", "number"])


def downgrade() -> None:
    op.drop_index("ix_run_attempts_run_number", "run_attempts")
    with op.batch_alter_table("run_attempts") as attempts:
        for column in reversed(_ATTEMPT_COLUMNS):
            attempts.drop_column(column.name)
    with op.batch_alter_table("runs") as runs:
        runs.alter_column(
            "peak_memory_bytes", type_=sa.Integer, existing_type=sa.BigInteger, nullable=False
        )
        for name in ("retry_at", "attempt"):
            runs.drop_column(name)
