"""Fixtures for the embedded default: a private runplane home and a machine of known size.

Runs are real processes in real cgroups; capacity is pinned (2 CPUs, 4Gi, 2 GPUs on request)
so scheduling tests mean the same on every machine.
"""

from __future__ import annotations

import os
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import runplane
from runplane.config import Settings, load_settings
from runplane.service import embedded
from runplane.service.embedded import EmbeddedService
from runplane.spec import Function


@pytest.fixture(autouse=True)
def private_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    for name in list(os.environ):
        if name.startswith("RUNPLANE_"):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    monkeypatch.setenv("RUNPLANE_LOCAL__HOME", str(home))
    monkeypatch.setenv("RUNPLANE_LOCAL__CPU", "2")
    monkeypatch.setenv("RUNPLANE_LOCAL__MEMORY", "4Gi")
    monkeypatch.setenv("RUNPLANE_LOCAL__GPUS", "0")
    # Runs inherit only what they are granted; coverage's own variable lets the suite measure
    # the runs' processes too.
    monkeypatch.setenv(
        "RUNPLANE_LOCAL__INHERIT_ENV", '["COVERAGE_PROCESS_CONFIG", "COVERAGE_FILE"]'
    )
    monkeypatch.setenv("RUNPLANE_CONFIG", os.devnull)
    # Runs are held in cgroups, as on any machine where one is writable (this one, as root):
    # named, so that a machine where none is fails these tests instead of falling back.
    monkeypatch.setenv("RUNPLANE_LOCAL__ISOLATION", "cgroup")
    from runplane import config

    config.current.cache_clear()
    yield home
    # The SDK's runs (``fn.run()``) started a service for this home; left open, it would go
    # on polling beside the tests after it (and cost what they measure).
    embedded.close_all()
    left = [thread.name for thread in threading.enumerate() if thread.name == "runplane-monitor"]
    assert not left, f"the test left {len(left)} run service(s) running"


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
