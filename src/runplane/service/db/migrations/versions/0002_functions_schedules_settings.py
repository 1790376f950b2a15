"""Stored function versions, cron schedules, and service settings changed at run time."""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    op.create_table(
        "functions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("project", sa.String(63), nullable=False),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("tag", sa.String(63), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("spec", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("created_by", sa.String(253), nullable=False),
    )
    op.create_index("ix_functions_project_name", "functions", ["project", "name", "created_at"])
    op.create_index("ux_functions_version", "functions", ["project", "name", "hash"], unique=True)
    op.create_table(
        "schedules",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("project", sa.String(63), nullable=False),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("cron", sa.String(128), nullable=False),
        sa.Column("function", sa.JSON, nullable=False),
        sa.Column("params", sa.JSON, nullable=False),
        sa.Column("state_thresholds", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("created_by", sa.String(253), nullable=False),
        sa.Column("role", sa.String(32), nullable=False),
        sa.Column("last_fired_at", sa.Float, nullable=False),
    )
    op.create_index("ix_schedules_project", "schedules", ["project"])
    op.create_table(
        "service_settings",
        sa.Column("key", sa.String(63), primary_key=True),
        sa.Column("value", sa.JSON, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.Column("updated_by", sa.String(253), nullable=False),
    )


def downgrade() -> None:
    for table in ("service_settings", "schedules", "functions"):
        op.drop_table(table)
