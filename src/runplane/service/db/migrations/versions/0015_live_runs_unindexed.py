"""Retention's indexes hold ended runs only, and run attempts lose the index that
ix_run_attempts_run_number covers: recording a run writes three index pages fewer."""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"

#: As the models write them (runplane.service.db.models: ENDED, FILES_KEPT).
_ENDED = "ended_at IS NOT NULL"
_FILES_KEPT = f"logs_removed_at IS NULL AND {_ENDED}"


def upgrade() -> None:
    op.drop_index("ix_runs_ended", table_name="runs")
    op.drop_index("ix_runs_logs_removed_ended", table_name="runs")
    op.drop_index("ix_run_attempts_run_uid", table_name="run_attempts")
    for name, where in (("ix_runs_ended", _ENDED), ("ix_runs_files_kept_ended", _FILES_KEPT)):
        op.create_index(
            name, "runs", ["ended_at"], sqlite_where=sa.text(where), postgresql_where=sa.text(where)
        )


def downgrade() -> None:
    op.drop_index("ix_runs_files_kept_ended", table_name="runs")
    op.drop_index("ix_runs_ended", table_name="runs")
    op.create_index("ix_run_attempts_run_uid", "run_attempts", ["run_uid"])
    op.create_index("ix_runs_logs_removed_ended", "runs", ["logs_removed_at", "ended_at"])
    op.create_index("ix_runs_ended", "runs", ["ended_at"])
