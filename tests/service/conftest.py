"""The service API over a real database, with runs executing on this machine."""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import runplane
from runplane.config import load_settings
from runplane.service import db
from runplane.service.api import create_app
from runplane.service.server import Server
from tests.databases import drop_postgres_database, fresh_postgres_database

ADMIN = {"Authorization": "Bearer admin-token-for-the-tests"}
USER = {"Authorization": "Bearer user-token-for-the-tests"}
OTHER_USER = {"Authorization": "Bearer other-user-token-for-the-tests"}
TOKENS = (
    '[{"token": "admin-token-for-the-tests", "user": "alice", "role": "admin"},'
    ' {"token": "user-token-for-the-tests", "user": "bob", "role": "user"},'
    ' {"token": "other-user-token-for-the-tests", "user": "carol", "role": "user",'
    '  "secrets": ["team-a-*"]}]'
)


def database_urls() -> list[str]:
    """Every test of the service runs on SQLite and on PostgreSQL; ``RUNPLANE_TEST_POSTGRES=skip``
    is the only way to leave PostgreSQL out (CI never sets it)."""
    if os.environ.get("RUNPLANE_TEST_POSTGRES") == "skip":
        return ["sqlite"]
    return ["sqlite", "postgresql"]


def postgres_url() -> str:
    url = os.environ.get("RUNPLANE_TEST_POSTGRES_URL")
    if not url:
        pytest.fail(
            "RUNPLANE_TEST_POSTGRES_URL is not set: start a PostgreSQL with "
            '`eval "$(bash scripts/postgres.sh start)"` (scripts/test.sh does), or set '
            "RUNPLANE_TEST_POSTGRES=skip to run the service tests on SQLite only"
        )
    return url


@pytest.fixture(params=database_urls())
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database with no tables, for the tests of upgrades from older schemas."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'service.db'}"
    return fresh_postgres_database(postgres_url())


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite database at the newest migration, migrated once for the whole run."""
    path = tmp_path_factory.mktemp("migrated") / "service.db"
    db.connect(f"sqlite:///{path}").dispose()
    return path


@pytest.fixture(scope="session")
def migrated_postgres() -> Iterator[str]:
    """A PostgreSQL database at the newest migration, migrated once for the whole run: each
    test's database is a copy of it (``CREATE DATABASE ... TEMPLATE``, a file copy), not a
    fresh migration."""
    url = fresh_postgres_database(postgres_url())
    db.connect(url).dispose()  # nothing stays connected: a template must have no sessions
    yield url.rsplit("/", 1)[1]
    drop_postgres_database(url)


@pytest.fixture(params=database_urls())
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database of its own at the newest migration, as ``runplane serve`` leaves one."""
    if request.param == "sqlite":
        path = tmp_path / "service.db"
        shutil.copy(request.getfixturevalue("migrated_sqlite"), path)  # its mode too
        return f"sqlite:///{path}"
    return fresh_postgres_database(postgres_url(), request.getfixturevalue("migrated_postgres"))


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, database: str) -> Iterator[Server]:
    for name in list(os.environ):
        if name.startswith("RUNPLANE_") and not name.startswith("RUNPLANE_TEST_POSTGRES"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("RUNPLANE_CONFIG", os.devnull)
    monkeypatch.setenv("RUNPLANE_LOCAL__HOME", str(tmp_path / "home"))
    # Runs run as runplane's own user here (as root, a service would give each a user of its
    # own, which test_run_users.py tests: it needs a home and a Python those users can reach).
    monkeypatch.setenv("RUNPLANE_LOCAL__RUN_USERS", "same")
    monkeypatch.setenv("RUNPLANE_LOCAL__CPU", "2")
    monkeypatch.setenv("RUNPLANE_LOCAL__MEMORY", "4Gi")
    monkeypatch.setenv("RUNPLANE_LOCAL__GPUS", "0")
    # Runs inherit only what they are granted; coverage's own variable lets the suite measure
    # the runs' processes too.
    monkeypatch.setenv(
        "RUNPLANE_LOCAL__INHERIT_ENV", '["COVERAGE_PROCESS_CONFIG", "COVERAGE_FILE"]'
    )
    monkeypatch.setenv("RUNPLANE_SERVICE__TOKENS", TOKENS)
    monkeypatch.setenv("RUNPLANE_SERVICE__DATABASE_URL", database)
    monkeypatch.setenv("RUNPLANE_SERVICE__SCHEDULE_INTERVAL", "0.2")
    monkeypatch.setenv("RUNPLANE_PRIORITY_CLASSES__ALLOWED_ROLES", '{"high": ["admin"]}')
    running = Server(load_settings())
    yield running
    running.close()


@pytest.fixture
def client(server: Server) -> TestClient:
    return TestClient(create_app(server))


@pytest.fixture
def function_dict(tmp_path: Path) -> Callable[..., dict[str, Any]]:
    def make(
        code: str = "def handler(context, x: int = 1):\n    return {'double': x * 2}\n",
        name: str = "job",
        **resources: Any,
    ) -> dict[str, Any]:
        path = tmp_path / f"{name.replace('-', '_')}.py"
        path.write_text(code)
        fn = runplane.code_to_function(name, filename=str(path), handler="handler")
        fn.with_requests(cpu="100m", mem="32Mi")
        return fn.to_dict()

    return make


def wait_state(
    client: TestClient,
    uid: str,
    states: set[str],
    timeout: float = 30,
    headers: dict[str, str] = USER,
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = client.get(f"/api/v1/runs/{uid}", headers=headers).json()
        if run["state"] in states:
            return run  # type: ignore[no-any-return]
        time.sleep(0.05)
    raise AssertionError(f"run {uid} did not reach {states}")


def log_in(client, token):
    """The login form, sent as a browser sends it: its nonce from the page and the cookie."""
    page = client.get("/ui/login")
    nonce = re.search(r'name="nonce" value="([^"]+)"', page.text)
    assert nonce is not None
    return client.post(
        "/ui/login",
        data={"nonce": nonce[1], "token": token, "next": "/ui/"},
        follow_redirects=False,
    )
