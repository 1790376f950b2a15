"""``runplane project retention``: a project's policy shown and changed through the service by
an admin (a user is refused), and on the embedded default without one; bad terms refused by
flag, without a traceback."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.service.cli_service import ADMIN, USER, clean_env, running_service, runplane


@pytest.fixture
def service_url(tmp_path: Path) -> Iterator[str]:
    with running_service(tmp_path) as url:
        yield url


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return runplane(env, "project", "retention", *args)


def test_retention_through_the_service(service_url: str, tmp_path: Path) -> None:
    made = httpx.post(
        f"{service_url}/api/v1/projects",
        json={"name": "churn"},
        headers={"Authorization": f"Bearer {USER}"},
    )
    assert made.status_code == 201, made.text
    home = str(tmp_path / "client-home")
    as_user = clean_env(RUNPLANE_API=service_url, RUNPLANE_TOKEN=USER, RUNPLANE_LOCAL__HOME=home)
    as_admin = as_user | {"RUNPLANE_TOKEN": ADMIN}

    shown = cli(as_user, "churn")  # anyone reads it
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == (
        "project churn: retention\n"
        "  runs_max_age: the service's policy\n"
        "  runs_max_count: the service's policy\n"
        "  logs_max_age: the service's policy\n"
    )
    refused = cli(as_user, "churn", "--runs-max-count", "5")  # its owner included
    assert refused.returncode == 4  # refused by permission
    assert refused.stderr.startswith("error: retention: a project's retention policy removes")

    done = cli(as_admin, "churn", "--runs-max-count", "500", "--logs-max-age", "14d")
    assert done.returncode == 0, done.stderr
    assert "  runs_max_count: 500\n  logs_max_age: 14d\n" in done.stdout
    again = cli(as_admin, "churn", "--runs-max-age", "never", "--logs-max-age", "default")
    assert again.returncode == 0, again.stderr
    record = httpx.get(
        f"{service_url}/api/v1/projects/churn", headers={"Authorization": f"Bearer {USER}"}
    ).json()
    assert record["retention"] == {"runs_max_age": None, "runs_max_count": 500}
    assert "  runs_max_age: kept for ever\n" in again.stdout
    assert "  logs_max_age: the service's policy\n" in again.stdout

    reset = cli(as_admin, "churn", "--reset")
    assert reset.returncode == 0, reset.stderr
    assert reset.stdout == shown.stdout

    missing = cli(as_admin, "chrun", "--runs-max-count", "5")
    assert missing.returncode == 3  # not found
    assert missing.stderr.startswith("error: project 'chrun' does not exist")


BAD = [
    (
        ["--runs-max-count", "lots"],
        "error: --runs-max-count: 'lots' is not valid; a whole number of runs from 1",
    ),
    (["--runs-max-count", "0"], "example: --runs-max-count 500"),
    (
        ["--logs-max-age", "10s"],
        "error: --logs-max-age: '10s' is not valid; an age of at least 60 seconds",
    ),
    (["--runs-max-age", "a month"], "example: --runs-max-age 30d"),
    (["--reset", "--runs-max-age", "3d"], "--reset takes no terms"),
]


def test_retention_on_the_embedded_default_and_bad_terms_refused_by_flag(tmp_path):
    env = clean_env(RUNPLANE_LOCAL__HOME=str(tmp_path / "home"))
    made = cli(env, "churn")
    assert made.returncode == 3  # no such project yet: a typo makes none
    assert "project 'churn' does not exist" in made.stderr
    made_here = (
        "import runplane; runplane.get_or_create_project('churn'); "
        "runplane.new_function('stored', project='models', image='python:3.11').save()"
    )
    subprocess.run(
        [sys.executable, "-c", made_here],
        env=env,
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    for args, said in BAD:
        done = cli(env, "churn", *args)
        assert done.returncode == 2, args
        assert said in done.stderr
        assert "Traceback" not in done.stderr
    shown = cli(env, "churn", "--runs-max-count", "20", "--runs-max-age", "2 weeks")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == (
        "project churn: retention\n"
        "  runs_max_age: 2 weeks\n"
        "  runs_max_count: 20\n"
        "  logs_max_age: 90 days (the default)\n"
        "(the embedded default removes nothing: `runplane serve` on this store does)\n"
    )
    # A project known from its stored function only gets a record with its policy.
    models = cli(env, "models", "--runs-max-count", "7")
    assert models.returncode == 0, models.stderr
    assert "  runs_max_count: 7\n" in models.stdout
    assert cli(env, "models").stdout == models.stdout
