"""In-place changes of running attempts' limits (live right-sizing): one row per resize."""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"


def upgrade() -> None:
    op.create_table(
        "run_resizes",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column(
            "run_uid",
            sa.String(32),
            sa.ForeignKey("runs.uid", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("at", sa.Float, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("memory_from", sa.BigInteger, nullable=True),
        sa.Column("memory_to", sa.BigInteger, nullable=True),
        sa.Column("cpu_from", sa.BigInteger, nullable=True),
        sa.Column("cpu_to", sa.BigInteger, nullable=True),
        sa.Column("why", sa.Text, nullable=False, server_default=""),
        sa.Column("mode", sa.String(16), nullable=False, server_default="auto"),
        sa.Column("by", sa.String(253), nullable=False, server_default=""),
        sa.Column("outcome", sa.String(16), nullable=False, server_default="applied"),
    )
    op.create_index("ix_run_resizes_run_uid", "run_resizes", ["run_uid"])
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("resized", sa.Integer, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("resized")
    op.drop_index("ix_run_resizes_run_uid", table_name="run_resizes")
    op.drop_table("run_resizes")
