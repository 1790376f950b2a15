"""A run's memory and CPU over time, sampled while it runs: one row per run."""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"


def upgrade() -> None:
    op.create_table(
        "run_usage",
        sa.Column(
            "run_uid",
            sa.String(32),
            sa.ForeignKey("runs.uid", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("points", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("run_usage")
