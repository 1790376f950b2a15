"""The MLRun compatibility suite: MLRun's documented calls, made with ``import runplane as
mlrun``, asserting what MLRun's documentation says they do. Runs execute for real on the
embedded default, in a private runplane home, from a private working directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.homes import enter_private_home, leave_private_home


@pytest.fixture(autouse=True)
def private_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    home = enter_private_home(monkeypatch, tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    from runplane import bootstrap, projects

    monkeypatch.setattr(projects, "_current", None)
    monkeypatch.setattr(bootstrap.current, "_current", None)
    yield home
    leave_private_home()
