"""A partial index of the live runs someone asked to abort: the monitors' polls read it."""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"

#: As the models write it (runplane.service.db.models.ABORT_ASKED): SQLite matches a partial
#: index to a query by its terms' text, so each dialect's form is the one its queries take.
_LIVE = "state IN ('aborting', 'created', 'pending', 'running')"


def upgrade() -> None:
    op.create_index(
        "ix_runs_abort_asked",
        "runs",
        ["executor_pid"],
        sqlite_where=sa.text(f"abort_requested = 1 AND {_LIVE}"),
        postgresql_where=sa.text(f"abort_requested AND {_LIVE}"),
    )


def downgrade() -> None:
    op.drop_index("ix_runs_abort_asked", table_name="runs")
