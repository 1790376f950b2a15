"""Who owns each stored function name: the creator of its first version."""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"


def upgrade() -> None:
    op.create_table(
        "function_owners",
        sa.Column("project", sa.String(63), primary_key=True),
        sa.Column("name", sa.String(63), primary_key=True),
        sa.Column("owner", sa.String(253), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    # Functions stored before owners were recorded belong to whoever stored their first version.
    op.execute(
        """
        INSERT INTO function_owners (project, name, owner, created_at)
        SELECT f.project, f.name, f.created_by, f.created_at FROM functions f
        WHERE f.id = (SELECT MIN(g.id) FROM functions g
                      WHERE g.project = f.project AND g.name = f.name)
        """
    )


def downgrade() -> None:
    op.drop_table("function_owners")
