"""Databases on the test PostgreSQL server, for tests that must not see each other's rows (the
service tests) or that share one among processes (replicas)."""

from __future__ import annotations

import uuid

from sqlalchemy import create_engine, text


def fresh_postgres_database(url: str, template: str | None = None) -> str:
    """A new database on the server of ``url``, empty or a copy of the database ``template``
    (which nothing may be connected to); returns its URL."""
    name = f"runplane_{uuid.uuid4().hex[:12]}"
    copied = "" if template is None else f" TEMPLATE {template}"
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}{copied}"))
    admin.dispose()
    return url.rsplit("/", 1)[0] + f"/{name}"


def drop_postgres_database(url: str) -> None:
    """Drop the database of ``url`` (through the server's ``postgres`` database)."""
    server, name = url.rsplit("/", 1)
    admin = create_engine(f"{server}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f"DROP DATABASE IF EXISTS {name}"))
    admin.dispose()
