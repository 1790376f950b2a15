"""The MLRun compatibility suite: MLRun's documented calls, made with ``import runplane as
mlrun``, asserting what MLRun's documentation says they do. Runs execute for real on the
embedded default, in a private runplane home, from a private working directory."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from runplane.service import embedded


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
    monkeypatch.setenv(
        "RUNPLANE_LOCAL__INHERIT_ENV", '["COVERAGE_PROCESS_CONFIG", "COVERAGE_FILE"]'
    )
    monkeypatch.setenv("RUNPLANE_CONFIG", os.devnull)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    from runplane import bootstrap, config, projects

    config.current.cache_clear()
    monkeypatch.setattr(projects, "_current", None)
    monkeypatch.setattr(bootstrap.current, "_current", None)
    yield home
    # The runs this test made started a service for its home: closed, not left polling.
    embedded.close_all()
    left = [thread.name for thread in threading.enumerate() if thread.name == "runplane-monitor"]
    assert not left, f"the test left {len(left)} run service(s) running"
    config.current.cache_clear()
