"""The MLRun compatibility suite: MLRun's documented calls, made with ``import runplane as
mlrun``, asserting what MLRun's documentation says they do. Runs execute for real on the
embedded default, in a private runplane home, from a private working directory."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


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
    config.current.cache_clear()
