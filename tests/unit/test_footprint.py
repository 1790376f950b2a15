"""The footprint a warm run is charged: measured once per interpreter, kept, never in the way."""

from __future__ import annotations

import logging
import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from runplane.runtimes.local import footprint

HIERARCHY: Any = SimpleNamespace(version="cgroup v1")


@pytest.fixture
def python(tmp_path: Path) -> str:
    """An interpreter file of the test's own, whose stamp the test can change."""
    copy = tmp_path / "python3"
    shutil.copy(sys.executable, copy)
    return str(copy)


def test_measured_once_and_again_when_the_interpreter_changes(
    python: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    measured: list[str] = []

    def measure(interpreter: str, env: dict[str, str], hierarchy: Any) -> int:
        measured.append(interpreter)
        return 7 * 2**20 + len(measured)

    monkeypatch.setattr(footprint, "measure", measure)
    home = tmp_path / "home"
    assert footprint.inherited(python, {}, HIERARCHY, home) == 7 * 2**20 + 1
    assert footprint.inherited(python, {}, HIERARCHY, home) == 7 * 2**20 + 1
    assert len(measured) == 1  # kept in the home: a restarted runplane measures nothing
    stamp = os.stat(python)
    os.utime(python, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 10**9))  # an upgrade
    assert footprint.inherited(python, {}, HIERARCHY, home) == 7 * 2**20 + 2
    other = SimpleNamespace(version="cgroup v2")
    assert footprint.inherited(python, {}, other, home) == 7 * 2**20 + 3
    assert len(measured) == 3


def test_a_footprint_that_cannot_be_measured_is_none_and_said(
    python: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def measure(interpreter: str, env: dict[str, str], hierarchy: Any) -> int:
        raise RuntimeError("python3 child.py --footprint exited with 1: no bootstrap")

    monkeypatch.setattr(footprint, "measure", measure)
    with caplog.at_level(logging.WARNING):
        assert footprint.inherited(python, {}, HIERARCHY, tmp_path) == 0
    assert "cannot measure a fresh interpreter's memory" in caplog.text
    assert "no bootstrap" in caplog.text
    assert not (tmp_path / "footprints.json").exists()  # tried again at the next start


def test_a_damaged_cache_is_measured_anew(
    python: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(footprint, "measure", lambda *_: 5 * 2**20)
    (tmp_path / "footprints.json").write_text('{"cut short')
    assert footprint.inherited(python, {}, HIERARCHY, tmp_path) == 5 * 2**20
    assert footprint.inherited(python, {}, HIERARCHY, tmp_path / "none") == 5 * 2**20
