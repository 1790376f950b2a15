"""Live right-sizing on the embedded default: a job nearing its memory limit has its cgroup's
limit raised in place and completes in its first attempt; without it the job is OOM-killed
and retried; a person's resize goes through the same path; a grow the machine cannot hold
falls back to an OOM retry at the size asked for."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from runplane.config import load_settings
from runplane.errors import InvalidValueError, ResizeRefusedError
from runplane.runs import RunRecord, RunState
from runplane.service.embedded import EmbeddedService
from runplane.spec import Function
from runplane.spec.run_options import RunOptions
from tests.growing import GROWING

MiB = 2**20
#: Long enough for the job to wait out a resize on a busy machine.
PATIENT = RunOptions(params={"room_wait": "120"})
#: Long enough for the job to wait out a refused resize on a busy machine, then grow past it.
REFUSED_WAIT = RunOptions(params={"room_wait": "15"})


def _growing(make_function: Callable[..., Function]) -> Function:
    fn = make_function(GROWING, name="growing")
    return fn.with_requests(mem="64Mi").with_limits(mem="128Mi")


def test_a_growing_job_is_resized_in_place_and_never_restarted(
    service: EmbeddedService, make_function: Callable[..., Function]
) -> None:
    fn = _growing(make_function).with_autoresize(max_mem="1Gi", step=2, window="0.5s")
    record = service.wait(service.submit(fn, PATIENT).uid, timeout=240)
    assert record.state == RunState.COMPLETED, record.status_text
    assert record.results["held_mib"] >= 300
    assert [attempt.number for attempt in record.attempts] == [1]  # never restarted
    grown = [r for r in record.resizes if r.applied]
    assert 1 <= len(grown) <= 2, record.resizes
    assert grown[0].memory_from == 128 * MiB
    assert grown[0].memory_to == 256 * MiB
    assert all(r.mode == "auto" and r.attempt == 1 for r in grown)
    assert "stayed above 90% of its limit" in grown[0].why
    assert record.peak_memory_bytes > 300 * MiB  # measured past the limit it started with


def test_without_autoresize_the_job_is_oom_killed_and_retried_larger(
    service: EmbeddedService, make_function: Callable[..., Function]
) -> None:
    fn = _growing(make_function).with_retries(2, on=["oom"], backoff=0, memory_factor=4)
    record = service.wait(service.submit(fn).uid, timeout=240)
    assert record.state == RunState.COMPLETED, record.status_text
    first, second = record.attempts
    assert (first.reason, first.failure) == ("OOMKilled", "oom")
    assert second.limits["memory"] == "512Mi"
    assert record.resizes == []


def test_a_person_resizes_a_running_job_within_the_machine(
    service: EmbeddedService, make_function: Callable[..., Function]
) -> None:
    fn = _growing(make_function)  # no autoresize: only the person's resize lets it finish
    uid = service.submit(fn, PATIENT).uid
    record = _running(service, uid)
    with pytest.raises(ResizeRefusedError, match="unreserved, less than"):
        service.resize(record.uid, mem="64Gi")  # above the machine's 4Gi
    with pytest.raises(InvalidValueError, match="mem"):
        service.resize(record.uid, mem="lots")
    done = service.resize(record.uid, mem="512Mi", cpu="1")
    assert (done.memory_from, done.memory_to, done.mode) == (128 * MiB, 512 * MiB, "manual")
    assert done.cpu_to == 1000
    record = service.wait(uid, timeout=240)
    assert record.state == RunState.COMPLETED, record.status_text
    assert [attempt.number for attempt in record.attempts] == [1]
    assert [(r.mode, r.memory_to) for r in record.resizes] == [("manual", 512 * MiB)]
    with pytest.raises(ResizeRefusedError, match="has ended"):
        service.resize(uid, mem="1Gi")


def _running(service: EmbeddedService, uid: str) -> RunRecord:
    """The run once it runs (its record's state as the recorder wrote it)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        record = service.get(uid)
        if record.state == RunState.RUNNING:
            return record
        time.sleep(0.05)
    raise AssertionError(f"run {uid} did not start")


def test_a_grow_the_machine_cannot_hold_falls_back_to_a_larger_retry(
    monkeypatch: pytest.MonkeyPatch, make_function: Callable[..., Function]
) -> None:
    # A 384Mi machine: the job (64Mi asked) starts, but growing its 128Mi limit to 512Mi
    # would need 384Mi more of it, and only 320Mi is unreserved.
    monkeypatch.setenv("RUNPLANE_LOCAL__MEMORY", "384Mi")
    service = EmbeddedService(load_settings()).start()
    try:
        fn = (
            _growing(make_function)
            .with_autoresize(max_mem="1Gi", step=4, window="0.5s")
            .with_retries(2, on=["oom"], backoff=0)
        )
        # It waits at its limit for the grow (refused within a second or so), then steps past.
        record = service.wait(service.submit(fn, REFUSED_WAIT).uid, timeout=240)
    finally:
        service.close()
    assert record.state == RunState.COMPLETED, record.status_text
    first, second = record.attempts
    assert (first.reason, first.failure) == ("OOMKilled", "oom")
    (fallback,) = [r for r in record.resizes if r.outcome != "applied"]
    assert (fallback.outcome, fallback.attempt, fallback.mode) == ("fallback", 1, "auto")
    assert (fallback.memory_from, fallback.memory_to) == (128 * MiB, 512 * MiB)
    assert "320Mi of memory unreserved, less than the 384Mi more asked" in fallback.why
    # the retry starts at the size asked for, as far as the machine holds it, and says why
    assert second.limits["memory"] == "384Mi"
    assert "the size live right-sizing asked for and the node could not grant" in (
        second.adjustments
    )
    (retried,) = [t.message for t in record.transitions if t.message.startswith("attempt 2")]
    assert "memory limit 384Mi, the size live right-sizing asked for" in retried
