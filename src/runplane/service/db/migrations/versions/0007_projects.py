"""Projects as records of their own: owner, description, parameters, default image, labels."""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"


def upgrade() -> None:
    op.create_table(
        "projects",
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("owner", sa.String(253), nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("params", sa.JSON, nullable=False),
        sa.Column("default_image", sa.String(512), nullable=False),
        sa.Column("labels", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("projects")
