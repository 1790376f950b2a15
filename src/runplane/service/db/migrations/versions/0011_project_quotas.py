"""Project quotas: per project, flavor and resource, Kueue's nominal quota and its borrowing
and lending limits, as written."""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"


def upgrade() -> None:
    op.create_table(
        "project_quotas",
        sa.Column("project", sa.String(63), primary_key=True),
        sa.Column("flavor", sa.String(16), primary_key=True),
        sa.Column("resource", sa.String(16), primary_key=True),
        sa.Column("nominal", sa.String(64), nullable=False),
        sa.Column("borrowing_limit", sa.String(64), nullable=True),
        sa.Column("lending_limit", sa.String(64), nullable=True),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.Column("updated_by", sa.String(253), nullable=False, server_default=""),
    )


def downgrade() -> None:
    op.drop_table("project_quotas")
