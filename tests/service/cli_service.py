"""What the command-line tests share: a ``runplane serve`` with an admin's and a user's token,
and environments free of the caller's runplane settings, for the CLI run as a process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from runplane import config
from testbed import serve
from tests.homes import enter_private_home, leave_private_home

ADMIN = "cli-admin-token-for-the-tests"
USER = "cli-user-token-for-the-tests"
TOKENS = (
    f'[{{"token": "{ADMIN}", "user": "alice", "role": "admin"}},'
    f' {{"token": "{USER}", "user": "bob", "role": "user"}}]'
)


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without runplane's settings, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPLANE_")}
    return env | {"RUNPLANE_CONFIG": os.devnull, **extra}


@contextmanager
def running_service(directory: Path, **settings: str) -> Iterator[str]:
    """A ``runplane serve`` on the embedded default with the two tokens (and any other
    ``settings``, as environment variables); its URL. Its output is ``service.log`` there."""
    env = clean_env(
        **settings,
        RUNPLANE_LOCAL__HOME=str(directory / "server-home"),
        RUNPLANE_LOCAL__RUN_USERS="same",  # users of their own: test_run_users.py
        RUNPLANE_LOCAL__CPU="2",
        RUNPLANE_LOCAL__INHERIT_ENV='["COVERAGE_PROCESS_CONFIG"]',
        RUNPLANE_SERVICE__TOKENS=TOKENS,
    )
    server, url = serve.start_service(env, directory / "service.log")
    try:
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


def runplane(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``runplane ARGS`` as a user types it, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "runplane", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@dataclass(frozen=True)
class Invoked:
    code: int
    stdout: str
    stderr: str


def invoke(*args: str) -> Invoked:
    """``runplane ARGS`` in this process (click's test runner: fast), exit code and all, as
    :func:`runplane.cli.main.main` gives them; the environment is this process's."""
    from click.testing import CliRunner

    from runplane import config
    from runplane.cli.main import main

    config.current.cache_clear()
    with CliRunner().isolation() as (stdout, stderr, _):
        try:
            main(list(args))
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else 1
    return Invoked(code, stdout.getvalue().decode(), stderr.getvalue().decode())


def use_service(monkeypatch: pytest.MonkeyPatch, url: str, token: str, home: Path) -> None:
    """This process's runplane goes to the service at ``url`` as ``token``'s holder."""
    enter_private_home(monkeypatch, home)
    monkeypatch.setenv("RUNPLANE_API", url)
    monkeypatch.setenv("RUNPLANE_TOKEN", token)
    config.current.cache_clear()


def api_schema() -> dict[str, Any]:
    """The service's OpenAPI document, built from its routes (no server needed)."""
    from fastapi import FastAPI

    from runplane.service.routes import cluster, deployments, functions, projects, runs, schedules
    from runplane.service.wire import API

    app = FastAPI(title="runplane")
    for resource in (projects, functions, runs, deployments, schedules, cluster):
        app.include_router(resource.router, prefix=API)
    return app.openapi()


def response_model(path: str) -> Any:
    """The model a ``GET`` route of the API answers with (its pydantic type)."""
    from fastapi.routing import APIRoute

    from runplane.service.routes import cluster, deployments, functions, projects, runs, schedules
    from runplane.service.wire import API

    for resource in (projects, functions, runs, deployments, schedules, cluster):
        for route in resource.router.routes:
            if isinstance(route, APIRoute) and API + route.path == path and "GET" in route.methods:
                return route.response_model
    raise LookupError(path)


@pytest.fixture(scope="module", name="service_url")
def module_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A ``runplane serve`` for a test module's command lines."""
    with running_service(tmp_path_factory.mktemp("cli")) as url:
        yield url


@pytest.fixture(params=["embedded", "service"], name="where")
def both_backends(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[str]:
    """Where this process's runs go: the embedded default (a private home), or the module's
    service as a user."""
    if request.param == "embedded":
        enter_private_home(monkeypatch, tmp_path)
    else:
        use_service(monkeypatch, request.getfixturevalue("service_url"), USER, tmp_path)
    yield request.param
    leave_private_home()
