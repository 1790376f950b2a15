"""``runplane label node``: through the service as an admin (a user is refused), and on the
embedded default's own machine without one."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from runplane.runtimes.local.node import NODE_NAME
from tests.service.cli_service import ADMIN, USER, clean_env, running_service, runplane


@pytest.fixture
def service_url(tmp_path: Path) -> Iterator[str]:
    with running_service(tmp_path) as url:
        yield url


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return runplane(env, "label", "node", *args)


def test_label_node_through_the_service(service_url: str, tmp_path: Path) -> None:
    home = str(tmp_path / "client-home")
    as_user = clean_env(RUNPLANE_API=service_url, RUNPLANE_TOKEN=USER, RUNPLANE_LOCAL__HOME=home)
    as_admin = as_user | {"RUNPLANE_TOKEN": ADMIN}
    refused = cli(as_user, NODE_NAME, "runplane.io/pool=training")
    assert refused.returncode == 4  # refused by permission
    assert refused.stderr == "error: user 'bob' may not label nodes; only admins may\n"

    done = cli(as_admin, NODE_NAME, "runplane.io/pool=training", "team=ml")
    assert done.returncode == 0, done.stderr
    assert "runplane.io/pool=training\n" in done.stdout
    assert f"kubernetes.io/hostname={NODE_NAME}\n" in done.stdout
    removed = cli(as_admin, NODE_NAME, "team-")
    assert removed.returncode == 0, removed.stderr
    assert "team=" not in removed.stdout
    assert "runplane.io/pool=training" in removed.stdout

    bad = cli(as_admin, NODE_NAME, "team")
    assert bad.returncode == 2
    assert "key=value to set a label, key- to remove it" in bad.stderr
    missing = cli(as_admin, "elsewhere", "team=ml")
    assert missing.returncode == 3  # not found
    assert "the embedded default has one node" in missing.stderr


def test_label_node_on_the_embedded_default(tmp_path: Path) -> None:
    env = clean_env(RUNPLANE_LOCAL__HOME=str(tmp_path / "home"))
    done = cli(env, NODE_NAME, "runplane.io/pool=local")
    assert done.returncode == 0, done.stderr
    assert "runplane.io/pool=local\n" in done.stdout
    assert (tmp_path / "home" / "node-labels.json").stat().st_mode & 0o777 == 0o600
    refused = cli(env, NODE_NAME, "kubernetes.io/hostname=other")
    assert refused.returncode == 2
    assert "set by Kubernetes itself" in refused.stderr
