"""Who owns a run, and what a service needs to start a queued run again after a restart."""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    with op.batch_alter_table("runs") as runs:
        runs.add_column(sa.Column("owner", sa.String(253), nullable=False, server_default=""))
        runs.add_column(sa.Column("source_dir", sa.Text, nullable=False, server_default=""))
        runs.add_column(sa.Column("requeue", sa.Boolean, nullable=False, server_default=sa.false()))
    op.create_index("ix_runs_owner_created", "runs", ["owner", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_runs_owner_created", "runs")
    with op.batch_alter_table("runs") as runs:
        for column in ("requeue", "source_dir", "owner"):
            runs.drop_column(column)
