"""A database as an older runplane left it: migrated only up to a given revision, with the
projects and runs it recorded then, for the tests that a migration upgrades it with its data."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def older_database(
    database: str,
    revision: str,
    projects: Mapping[str, str] | None = None,
    runs: Sequence[dict[str, Any]] = (),
) -> None:
    """Migrate ``database`` up to ``revision`` and record ``projects`` (name → description,
    owned by ``bob``) and ``runs`` (rows of the runs table as of that revision, see
    :func:`tests.service.run_rows.run_row`) in it, in one transaction."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine, insert, text

    from runplane.service.db import MIGRATIONS
    from runplane.service.db.models import RUNS

    engine = create_engine(database)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    try:
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
            for name, description in (projects or {}).items():
                connection.execute(
                    text(
                        "INSERT INTO projects (name, owner, description, params, default_image,"
                        " labels, created_at, updated_at)"
                        " VALUES (:name, 'bob', :description, '{}', '', '{}', 1, 1)"
                    ),
                    {"name": name, "description": description},
                )
            if runs:
                connection.execute(insert(RUNS), list(runs))
    finally:
        engine.dispose()
