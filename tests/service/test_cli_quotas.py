"""``runplane project quota`` and ``runplane get project``: quotas set by an admin through the
service (a user is refused), shown with what the project's runs hold, and bad flags refused by
name without a traceback."""

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


def quota(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return runplane(env, "project", "quota", *args)


def test_quotas_through_the_service(service_url: str, tmp_path: Path) -> None:
    made = httpx.post(
        f"{service_url}/api/v1/projects",
        json={"name": "team-a"},
        headers={"Authorization": f"Bearer {USER}"},
    )
    assert made.status_code == 201, made.text
    home = str(tmp_path / "client-home")
    as_user = clean_env(RUNPLANE_API=service_url, RUNPLANE_TOKEN=USER, RUNPLANE_LOCAL__HOME=home)
    as_admin = as_user | {"RUNPLANE_TOKEN": ADMIN}

    shown = quota(as_user, "team-a")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == "project team-a: no quota (its runs are not limited)\n"
    refused = quota(as_user, "team-a", "--cpu", "4")
    assert refused.returncode == 4  # refused by permission
    assert refused.stderr.startswith("error: quotas: a project's quota decides")

    done = quota(
        as_admin, "team-a", "--cpu", "16", "--memory", "64Gi", "--gpus", "2",
        "--borrowing-limit", "gpus=0", "--lending-limit", "cpu=8",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "project team-a: quotas",
        "FLAVOR      RESOURCE   USED   NOMINAL   BORROWING LIMIT   LENDING LIMIT",
        "on-demand   cpu        0      16        none              8",
        "on-demand   memory     0      64Gi      none              none",
        "on-demand   gpus       0      2         0                 none",
    ]
    # A limit alone changes that limit; the quota stays.
    again = quota(as_admin, "team-a", "--borrowing-limit", "cpu=4", "-o", "json")
    assert again.returncode == 0, again.stderr
    assert '"borrowing_limit": "4"' in again.stdout
    spot = quota(as_admin, "team-a", "--flavor", "spot", "--cpu", "4", "--no-borrowing")
    assert spot.returncode == 0, spot.stderr

    project = runplane(as_user, "get", "project", "team-a")
    assert project.returncode == 0, project.stderr
    assert "name: team-a\nowner: bob\nquotas:\n" in project.stdout
    assert "spot        cpu        0      4         0" in project.stdout

    cleared = quota(as_admin, "team-a", "--clear", "--all-flavors")
    assert cleared.returncode == 0, cleared.stderr
    assert cleared.stdout == "project team-a: no quota (its runs are not limited)\n"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--cpu", "٤"), "error: quotas.on-demand.cpu.nominal: '٤' is not valid"),
        (("--gpus", "1.5"), "GPUs are counted whole"),
        (("--borrowing-limit", "disk=1", "--cpu", "1"), "error: --borrowing-limit: 'disk=1'"),
        (("--lending-limit", "cpu=1"), "give --cpu too"),
    ],
)
def test_bad_flags_are_refused_by_name_on_the_embedded_default(
    tmp_path: Path, args: tuple[str, ...], said: str
) -> None:
    env = clean_env(RUNPLANE_LOCAL__HOME=str(tmp_path / "home"))
    refused = quota(env, "team-a", *args)
    assert refused.returncode != 0
    assert said in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_quota_on_the_embedded_default_needs_its_project(tmp_path: Path) -> None:
    env = clean_env(RUNPLANE_LOCAL__HOME=str(tmp_path / "home"))
    missing = quota(env, "team-a", "--cpu", "1")
    assert missing.returncode != 0
    assert "project 'team-a' does not exist: create it first" in missing.stderr
    made = subprocess.run(
        [sys.executable, "-c", "import runplane; runplane.new_project('team-a')"],
        env=env,
        cwd=tmp_path,  # its project.yaml goes there
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    done = quota(env, "team-a", "--cpu", "1", "--memory", "2Gi")
    assert done.returncode == 0, done.stderr
    assert "on-demand   memory     0      2Gi" in done.stdout
