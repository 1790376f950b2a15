"""Budgets: what each project may spend in a day, week or month, and the action at the limit."""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"


def upgrade() -> None:
    op.create_table(
        "project_budgets",
        sa.Column("project", sa.String(63), primary_key=True),
        sa.Column("amount", sa.Float, nullable=False),
        sa.Column("period", sa.String(8), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.Column("updated_by", sa.String(253), nullable=False, server_default=""),
    )


def downgrade() -> None:
    op.drop_table("project_budgets")
