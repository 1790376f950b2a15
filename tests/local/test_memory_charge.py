"""A run is charged the memory a fresh interpreter running the bootstrap is, warm or fresh: one
function with one limit ends here as it does in a pod."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from runplane.config import load_settings
from runplane.runs import RunState
from runplane.service.embedded import EmbeddedService
from runplane.spec import Function
from runplane.spec.run_options import RunOptions

MiB = 2**20

HOLD = """
def handler(context, mib: int = 0):
    held = bytearray(mib * 2**20)
    return len(held)
"""

LAUNCHERS = pytest.mark.parametrize("launcher", ["warm", "fresh"])


@contextmanager
def launched(monkeypatch: pytest.MonkeyPatch, launcher: str) -> Iterator[EmbeddedService]:
    """An embedded service whose runs' processes are forked warm or started fresh."""
    monkeypatch.setenv("RUNPLANE_LOCAL__LAUNCHER", launcher)
    service = EmbeddedService(load_settings()).start()
    try:
        yield service
    finally:
        service.close()


def held(service: EmbeddedService, fn: Function, mib: int) -> tuple[str, str, int]:
    record = service.wait(service.submit(fn, RunOptions(params={"mib": str(mib)})).uid, 60)
    return record.state, record.reason, record.peak_memory_bytes


def test_a_warm_no_op_is_charged_what_a_fresh_interpreter_is(
    monkeypatch: pytest.MonkeyPatch, make_function: Callable[..., Function]
) -> None:
    fn = make_function(HOLD)
    with launched(monkeypatch, "fresh") as service:  # the kernel charges the whole interpreter
        # The kernel charges a group the file pages its process is first to read: a fresh
        # interpreter whose files were pushed out of the page cache reads them again and is
        # charged several MiB more. The second of two runs finds them cached, as the
        # footprint's measurement and a warm run's interpreter do.
        tries = [held(service, fn, 0) for _ in range(2)]
    assert [state for state, _, _ in tries] == [RunState.COMPLETED] * 2
    fresh = min(peak for _, _, peak in tries)
    with launched(monkeypatch, "warm") as service:
        state, _, warm = held(service, fn, 0)
        cached = service.settings.local.home / "footprints.json"
    assert state == RunState.COMPLETED
    assert fresh > 6 * MiB, f"a fresh interpreter's peak is {fresh / MiB:.1f} MiB"
    # Without counting what it inherits, a forked run is charged only ~1-2 MiB of its own. Run
    # alone, the two agree within 2 MiB; inside the whole suite a fresh run has read up to
    # 5 MiB more (15.3 against 10.5 MiB, both fresh runs alike): not yet explained (docs/local.md,
    # "How memory is counted"), so the bound below is that. Coverage in the runs' processes
    # (pytest-cov hands them COVERAGE_PROCESS_CONFIG) charges a forked no-op 2.7-2.8 MiB of its
    # own on a quiet machine and up to 5.7 on a busy one (warm 17.6 against fresh 15.4 MiB),
    # where without it 1.5-1.8, busy or quiet: 2 MiB more room above then. A footprint left out
    # (the warm run charged its own 1-2 MiB) or counted twice (6 MiB or more above fresh)
    # fails either way.
    footprints = json.loads(cached.read_text()) if cached.is_file() else {}
    measured = ", ".join(f"{value / MiB:.1f}" for value in footprints.values())
    said = f"warm {warm / MiB:.1f} MiB (footprint {measured} MiB), fresh {fresh / MiB:.1f} MiB"
    above = (4 if "COVERAGE_PROCESS_CONFIG" in os.environ else 2) * MiB
    assert fresh - 6 * MiB < warm < fresh + above, said
    assert cached.is_file()  # measured once, kept for the next start


@LAUNCHERS
@pytest.mark.parametrize(
    ("mib", "ending"),
    [(30, (RunState.COMPLETED, "Completed")), (60, (RunState.ERROR, "OOMKilled"))],
)
def test_one_limit_ends_a_run_as_it_would_a_pod(
    launcher: str,
    mib: int,
    ending: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
    make_function: Callable[..., Function],
) -> None:
    fn = make_function(HOLD).with_limits(mem="64Mi")
    with launched(monkeypatch, launcher) as service:
        state, reason, peak = held(service, fn, mib)
    assert (state, reason) == ending, f"{mib} MiB under 64Mi ({launcher}): peak {peak / MiB:.1f}"
    assert peak > (mib + 6) * MiB if state == RunState.COMPLETED else peak <= 64 * MiB


def test_the_footprint_is_measured_once_and_kept_in_the_home(
    monkeypatch: pytest.MonkeyPatch, make_function: Callable[..., Function]
) -> None:
    fn = make_function(HOLD).with_limits(mem="64Mi")
    with launched(monkeypatch, "warm") as service:
        assert held(service, fn, 30)[0] == RunState.COMPLETED
        cached = service.settings.local.home / "footprints.json"
    footprints = json.loads(cached.read_text())
    assert len(footprints) == 1
    # A kept figure is used as it is: one of 40 MiB leaves a 30 MiB run no room.
    cached.write_text(json.dumps({key: 40 * MiB for key in footprints}))
    with launched(monkeypatch, "warm") as service:
        state, reason, peak = held(service, fn, 30)
    assert (state, reason) == (RunState.ERROR, "OOMKilled")
    assert 40 * MiB < peak <= 64 * MiB
