"""What the command-line tests share: a ``runplane serve`` with an admin's and a user's token,
and environments free of the caller's runplane settings, for the CLI run as a process."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from testbed import serve

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
def running_service(directory: Path) -> Iterator[str]:
    """A ``runplane serve`` on the embedded default with the two tokens; its URL."""
    env = clean_env(
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
