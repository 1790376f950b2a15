"""A private runplane home for tests that run the embedded default, and the check that a test
closed the run services its runs started."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from runplane import config
from runplane.service import embedded


def enter_private_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Point runplane at a fresh home under ``tmp_path`` on a machine of known size (2 CPUs,
    4Gi, no GPU), with nothing of the caller's configuration: scheduling tests then mean the
    same on every machine. Returns the home."""
    for name in list(os.environ):
        if name.startswith("RUNPLANE_"):
            monkeypatch.delenv(name)
    home = tmp_path / "home"
    monkeypatch.setenv("RUNPLANE_LOCAL__HOME", str(home))
    monkeypatch.setenv("RUNPLANE_LOCAL__CPU", "2")
    monkeypatch.setenv("RUNPLANE_LOCAL__MEMORY", "4Gi")
    monkeypatch.setenv("RUNPLANE_LOCAL__GPUS", "0")
    # Runs inherit only what they are granted; coverage's own variables let the suite measure
    # the runs' processes too.
    monkeypatch.setenv(
        "RUNPLANE_LOCAL__INHERIT_ENV", '["COVERAGE_PROCESS_CONFIG", "COVERAGE_FILE"]'
    )
    monkeypatch.setenv("RUNPLANE_CONFIG", os.devnull)
    config.current.cache_clear()
    return home


def leave_private_home() -> None:
    """Close the run services the test's SDK runs (``fn.run()``) started for its home: left
    open, they would go on polling beside the tests after it (and cost what those measure).
    Fails the test that left one running."""
    embedded.close_all()
    left = [thread.name for thread in threading.enumerate() if thread.name == "runplane-monitor"]
    assert not left, f"the test left {len(left)} run service(s) running"
    config.current.cache_clear()
