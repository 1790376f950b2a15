"""Retention: a project's own policy, when a run's files were removed, and the indexes the
retention loop finds expired runs by."""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"


def upgrade() -> None:
    op.add_column("projects", sa.Column("retention", sa.JSON, nullable=True))
    op.add_column("runs", sa.Column("logs_removed_at", sa.Float, nullable=True))
    op.create_index("ix_runs_ended", "runs", ["ended_at"])
    op.create_index("ix_runs_logs_removed_ended", "runs", ["logs_removed_at", "ended_at"])


def downgrade() -> None:
    op.drop_index("ix_runs_logs_removed_ended", "runs")
    op.drop_index("ix_runs_ended", "runs")
    with op.batch_alter_table("runs") as runs:
        runs.drop_column("logs_removed_at")
    with op.batch_alter_table("projects") as projects:
        projects.drop_column("retention")
