"""Stopping a run as the kubelet stops a pod: SIGTERM to its first process, its grace period,
then SIGKILL; under a cgroup and under the watchdog."""

from __future__ import annotations

import time

import psutil
import pytest

from runplane.service.embedded import EmbeddedService
from runplane.spec.run_options import RunOptions

from .test_local_runs import wait_for

BOTH = pytest.mark.parametrize("isolation", ["cgroup", "watchdog"], indirect=True)

#: A handler that saves a checkpoint when it is stopped (``context.on_preemption``).
CHECKPOINTING = """
import pathlib, time

def handler(context, ready: str, checkpoint: str):
    def save():
        pathlib.Path(checkpoint).write_text(f"step 7 of attempt {context.attempt}")

    context.on_preemption(save)
    pathlib.Path(ready).write_text("ready")
    time.sleep(120)
"""

#: A handler that will not stop for SIGTERM.
STUBBORN = """
import pathlib, signal, time

def handler(context, ready: str):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pathlib.Path(ready).write_text("ready")
    time.sleep(120)
"""


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@BOTH
@pytest.mark.parametrize("ending", ["aborted", "threshold"])
def test_a_stopped_handler_checkpoints_within_its_grace(
    isolation, service, make_function, tmp_path, ending
):
    ready, checkpoint = tmp_path / "ready", tmp_path / "checkpoint"
    fn = make_function(CHECKPOINTING).with_checkpoints(grace_period_seconds=2)
    thresholds = {"running": "2s"} if ending == "threshold" else {}
    params = {"ready": str(ready), "checkpoint": str(checkpoint)}
    uid = service.submit(fn, RunOptions(params=params, state_thresholds=thresholds)).uid
    wait_for(ready.exists, timeout=30)
    if ending == "aborted":
        service.abort(uid)
    record = service.wait(uid, timeout=30)
    assert record.state == "aborted"
    assert record.reason == ("Aborted" if ending == "aborted" else "ThresholdExceeded")
    assert checkpoint.read_text() == "step 7 of attempt 1"
    assert "after SIGTERM, within its grace period of 2 s" in record.status_text
    assert record.attempts[0].exit_code == 128 + 15  # the bootstrap's exit on SIGTERM


@BOTH
def test_a_handler_that_ignores_sigterm_is_killed_after_its_grace(
    isolation, service, make_function, tmp_path
):
    ready = tmp_path / "ready"
    fn = make_function(STUBBORN).with_checkpoints(grace_period_seconds=2)
    uid = service.submit(fn, RunOptions(params={"ready": str(ready)})).uid
    wait_for(ready.exists, timeout=30)
    # the process may write its file before its pid is recorded
    pid = wait_for(lambda: service.store.get(uid).attempts[0].process_id, timeout=30)
    asked = time.time()
    service.abort(uid)
    # In its grace: the run ``aborting``, its process still there; a second abort changes
    # nothing.
    wait_for(lambda: service.store.get(uid).state == "aborting", timeout=30)
    assert alive(pid)
    service.abort(uid)
    record = service.wait(uid, timeout=30)
    assert record.state == "aborted"
    assert record.ended_at - asked >= 1.9  # SIGKILL came at the end of the grace, not before
    assert "it was killed with SIGKILL (grace period 2 s)" in record.status_text
    assert record.status_text.startswith("aborted by request; still running ")
    assert record.attempts[0].exit_code == 128 + 9
    assert [t.state for t in record.transitions].count("aborting") == 1
    assert not alive(pid)


def test_a_shutdown_kills_at_once_after_its_own_grace(settings, make_function, tmp_path):
    """The service's shutdown gave runs its grace already: what is left is killed at once,
    not after the function's own (here Kubernetes' default 30 s)."""
    ready = tmp_path / "ready"
    service = EmbeddedService(settings).start()
    try:
        uid = service.submit(make_function(STUBBORN), RunOptions(params={"ready": str(ready)})).uid
        wait_for(ready.exists, timeout=30)
        pid = wait_for(lambda: service.store.get(uid).attempts[0].process_id, timeout=30)
    finally:
        closing = time.monotonic()
        service.close(grace=0.5)
        closed = time.monotonic() - closing
    assert not alive(pid)
    assert closed < 10
