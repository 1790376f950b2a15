"""A fresh database on the test PostgreSQL server, for tests that must not see each other's
rows (the service tests) or that share one among processes (replicas)."""

from __future__ import annotations

import uuid

from sqlalchemy import create_engine, text


def fresh_postgres_database(url: str) -> str:
    """A new, empty database on the server of ``url``; returns its URL."""
    name = f"runplane_{uuid.uuid4().hex[:12]}"
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    return url.rsplit("/", 1)[0] + f"/{name}"
