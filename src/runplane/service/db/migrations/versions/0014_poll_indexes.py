"""Partial indexes for what the monitors poll: the live runs asked to abort, the runs a budget
holds, the runs awaiting the leader."""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"

#: As the models write them (runplane.service.db.models: ABORT_ASKED, HELD_BY_BUDGET,
#: AWAITING_LEADER): SQLite matches a partial index to a query by its terms' text, so each
#: dialect's form is the one its queries take.
_LIVE = "state IN ('aborting', 'created', 'pending', 'running')"
_HELD = "state = 'pending' AND reason = 'Budget'"
_AWAITING = "state = 'created' AND reason = 'AwaitingLeader'"


def upgrade() -> None:
    op.create_index(
        "ix_runs_abort_asked",
        "runs",
        ["executor_pid"],
        sqlite_where=sa.text(f"abort_requested = 1 AND {_LIVE}"),
        postgresql_where=sa.text(f"abort_requested AND {_LIVE}"),
    )
    op.create_index(
        "ix_runs_held",
        "runs",
        ["runtime", "executor_pid"],
        sqlite_where=sa.text(_HELD),
        postgresql_where=sa.text(_HELD),
    )
    op.create_index(
        "ix_runs_awaiting_leader",
        "runs",
        ["runtime"],
        sqlite_where=sa.text(_AWAITING),
        postgresql_where=sa.text(_AWAITING),
    )


def downgrade() -> None:
    op.drop_index("ix_runs_awaiting_leader", table_name="runs")
    op.drop_index("ix_runs_held", table_name="runs")
    op.drop_index("ix_runs_abort_asked", table_name="runs")
