"""Fixtures for the embedded default: a private runplane home and a machine of known size.

Runs are real processes in real cgroups; capacity is pinned (2 CPUs, 4Gi, 2 GPUs on request)
so scheduling tests mean the same on every machine.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import runplane
from runplane.config import Settings, load_settings
from runplane.service.embedded import EmbeddedService
from runplane.spec import Function
from tests.homes import enter_private_home, leave_private_home


@pytest.fixture(autouse=True)
def private_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    home = enter_private_home(monkeypatch, tmp_path)
    # Runs are held in cgroups, as on any machine where one is writable (this one, as root):
    # named, so that a machine where none is fails these tests instead of falling back.
    monkeypatch.setenv("RUNPLANE_LOCAL__ISOLATION", "cgroup")
    yield home
    leave_private_home()


@pytest.fixture
def isolation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How runs are held: ``cgroup`` unless a test asks for both, with
    ``@pytest.mark.parametrize("isolation", ["cgroup", "watchdog"], indirect=True)``."""
    mode: str = getattr(request, "param", "cgroup")
    monkeypatch.setenv("RUNPLANE_LOCAL__ISOLATION", mode)
    return mode


@pytest.fixture
def settings(isolation: str) -> Settings:
    return load_settings()


@pytest.fixture
def service(settings: Settings) -> Iterator[EmbeddedService]:
    started = EmbeddedService(settings).start()
    yield started
    started.close()


@pytest.fixture
def make_function(tmp_path: Path) -> Callable[..., Function]:
    """A function from handler source code (dedented), written to a file as a user would."""

    def make(code: str, handler: str = "handler", name: str = "job", **kwargs: Any) -> Function:
        path = tmp_path / f"{name.replace('-', '_')}.py"
        path.write_text(textwrap.dedent(code))
        return runplane.code_to_function(name, filename=str(path), handler=handler, **kwargs)

    return make
