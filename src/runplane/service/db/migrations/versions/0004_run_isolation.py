"""How a run was held where it ran (its cgroup or the watchdog, and its user)."""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    with op.batch_alter_table("runs") as runs:
        runs.add_column(sa.Column("isolation", sa.String(128), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("runs") as runs:
        runs.drop_column("isolation")
