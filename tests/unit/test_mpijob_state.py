"""An MPIJob run's state is its operator's: the conditions map to run states, and the run's
end joins the operator's end (state, reason, message) to its launcher's (results, node), in
whichever order they come; an abort still ends it as an abort."""

from __future__ import annotations

import threading
from typing import Any

from runplane import names
from runplane.runs import Condition, RunState
from runplane.runtimes.events import RunEvent
from runplane.runtimes.kubernetes.mpijobs import mpijob_event, news
from runplane.runtimes.kubernetes.tracker import RunTracker
from tests.unit.test_kubernetes_events import UID, pod, terminated

RUN = {names.RUN_UID: UID, names.ATTEMPT: "2"}
LAUNCHER = {**RUN, names.ROLE: "launcher"}


def mpijob(*conditions: tuple[str, str, str, str]) -> dict[str, Any]:
    return {
        "metadata": {"name": "allreduce", "uid": "job-uid", "labels": dict(RUN)},
        "status": {
            "conditions": [
                {"type": kind, "status": status, "reason": reason, "message": message}
                for kind, status, reason, message in conditions
            ]
        },
    }


CREATED = ("Created", "True", "MPIJobCreated", "MPIJob runs/allreduce is created.")
RUNNING = ("Running", "True", "MPIJobRunning", "MPIJob runs/allreduce is running.")
SUCCEEDED = (
    "Succeeded",
    "True",
    "MPIJobSucceeded",
    "MPIJob runs/allreduce successfully completed.",
)
FAILED = (
    "Failed",
    "True",
    "BackoffLimitExceeded/",
    "Job has reached the specified backoff limit: ",
)


def test_the_conditions_map_to_run_states() -> None:
    assert mpijob_event(mpijob(CREATED)) is None  # pending since submission; pods say why
    running = mpijob_event(mpijob(CREATED, RUNNING))
    assert running is not None
    assert (running.uid, running.state, running.attempt) == (UID, RunState.RUNNING, 2)
    assert running.condition is Condition.RUNNING  # its running threshold still applies
    assert not news(running)  # the launcher's start says it, with its node
    done = mpijob_event(mpijob(CREATED, ("Running", "False", "MPIJobRunning", ""), SUCCEEDED))
    assert done is not None
    assert done.state is RunState.COMPLETED
    failed = mpijob_event(mpijob(CREATED, RUNNING, FAILED))
    assert failed is not None
    assert (failed.state, failed.reason) == (RunState.ERROR, "BackoffLimitExceeded")
    assert failed.message == "Job has reached the specified backoff limit:"
    suspended = mpijob_event(
        mpijob(CREATED, ("Suspended", "True", "MPIJobSuspended", "MPIJob suspended"))
    )
    assert suspended is not None
    assert (suspended.state, suspended.reason) == (RunState.PENDING, "MPIJobSuspended")
    restarting = mpijob_event(mpijob(("Restarting", "True", "MPIJobRestarting", "evicted")))
    assert restarting is not None
    assert (restarting.state, restarting.reason) == (RunState.RUNNING, "MPIJobRestarting")
    assert news(restarting)
    assert news(suspended)
    assert mpijob_event({"metadata": {"labels": {}}, "status": {}}) is None  # not a run's


def launcher(phase: str, code: int = 0, reason: str = "Completed") -> Any:
    """A launcher pod that ended: its report is on its log's last line, as runplane's is."""
    ended = terminated(code, reason, message='{"results_in_log": true}')
    return pod(phase, node="n1", labels=LAUNCHER, containers=ended)


def reader(results: dict[str, Any], error: str = "") -> Any:
    return lambda _pod: (results, [], error)


def test_a_succeeded_mpijob_ends_its_run_with_the_launcher_s_results_in_either_order() -> None:
    for operator_first in (False, True):
        events: list[RunEvent] = []
        tracker = RunTracker(events.append, reader({"total": 3}))
        done = mpijob_event(mpijob(CREATED, SUCCEEDED))
        assert done is not None
        if operator_first:
            tracker.operator_ended(done)
            assert events == []  # waits for the launcher's results
        tracker.observe("MODIFIED", launcher("Succeeded"))
        if not operator_first:
            assert events == []  # the launcher's end alone is not the run's
            tracker.operator_ended(done)
        tracker.operator_ended(done)  # the watch sends it again: once is enough
        assert [(e.state, e.results, e.node) for e in events] == [
            (RunState.COMPLETED, {"total": 3}, "n1")
        ]


def test_a_failed_mpijob_ends_error_with_the_operator_s_reason_and_the_rank_s_error() -> None:
    events: list[RunEvent] = []
    rank = "rank 1: ValueError: rank 1 has no data"
    tracker = RunTracker(events.append, reader({}, rank))
    tracker.observe("MODIFIED", launcher("Failed", 1, "Error"))
    failed = mpijob_event(mpijob(CREATED, RUNNING, FAILED))
    assert failed is not None
    tracker.operator_ended(failed)
    (end,) = events
    assert (end.state, end.reason) == (RunState.ERROR, "BackoffLimitExceeded")
    assert rank in end.message
    assert "the MPI Operator: Job has reached the specified backoff limit" in end.message
    assert end.exit_code == 1


def test_an_operator_s_end_without_a_launcher_is_the_run_s_end_after_a_bound() -> None:
    published = threading.Event()
    events: list[RunEvent] = []

    def publish(event: RunEvent) -> None:
        events.append(event)
        published.set()

    tracker = RunTracker(publish)
    tracker.launcher_wait = 0.05
    failed = mpijob_event(
        mpijob(CREATED, ("Failed", "True", "MPIJobEvicted", "2/2 workers are evicted"))
    )
    assert failed is not None
    tracker.operator_ended(failed)
    assert published.wait(30)
    assert [(e.state, e.reason, e.message) for e in events] == [
        (RunState.ERROR, "MPIJobEvicted", "2/2 workers are evicted")
    ]


def test_an_aborted_mpijob_s_launcher_ends_as_the_abort_and_a_deleted_job_frees_its_end() -> None:
    events: list[RunEvent] = []
    tracker = RunTracker(events.append)
    tracker.abort(UID, "ThresholdExceeded", "too long")
    tracker.observe("DELETED", launcher("Failed", 137, "Error"))
    assert [(e.state, e.reason) for e in events] == [(RunState.ABORTED, "ThresholdExceeded")]
    # Without an abort, a launcher whose MPIJob is deleted ends the run as the launcher did.
    events.clear()
    tracker = RunTracker(events.append)
    tracker.observe("MODIFIED", launcher("Failed", 1, "Error"))
    assert events == []
    tracker.operator_gone(UID, 2)
    assert [e.state for e in events] == [RunState.ERROR]


def test_each_attempt_of_a_retried_mpijob_run_ends_once() -> None:
    """An attempt has an MPIJob of its own, kept after it ends: the first attempt's end must
    not hide the second's."""
    events: list[RunEvent] = []
    tracker = RunTracker(events.append, reader({"total": 3}))
    for number, phase, code, why, condition in (
        (1, "Failed", 1, "Error", FAILED),
        (2, "Succeeded", 0, "Completed", SUCCEEDED),
    ):
        labels = {**RUN, names.ATTEMPT: str(number)}
        job = mpijob(CREATED, condition)
        job["metadata"]["labels"] = labels
        ended = mpijob_event(job)
        assert ended is not None
        tracker.operator_ended(ended)
        ran = terminated(code, why, message='{"results_in_log": true}')
        launched = {**labels, names.ROLE: "launcher"}
        tracker.observe(
            "MODIFIED", pod(phase, node="n1", labels=launched, containers=ran, uid=f"l-{number}")
        )
        tracker.operator_ended(ended)  # the watch sends it again: once is enough
    assert [(e.attempt, e.state) for e in events] == [
        (1, RunState.ERROR),
        (2, RunState.COMPLETED),
    ]
