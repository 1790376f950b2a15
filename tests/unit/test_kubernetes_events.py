"""Pod -> RunEvent mapping of the Kubernetes runtime, on plain dict pods; and the watch loop's
resume / 410 / back-off logic against a scripted API. No cluster."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from runplane import names
from runplane.runs import RunState
from runplane.runtimes.events import RunEvent
from runplane.runtimes.kubernetes import pod_to_event
from runplane.runtimes.kubernetes.api.backoff import Backoff
from runplane.runtimes.kubernetes.api.watch import PodWatch
from runplane.runtimes.kubernetes.tracker import RunTracker

UID = "0123456789abcdef0123"
T0 = "2026-01-01T10:00:00Z"
T1 = "2026-01-01T10:00:05Z"
T2 = "2026-01-01T10:01:00Z"
T3 = "2026-01-01T10:02:00Z"


def ts(value: str) -> float:
    """The time runplane reads from a whole-second Kubernetes stamp: the middle of its second."""
    from datetime import datetime

    return datetime.fromisoformat(value).timestamp() + 0.5


def pod(
    phase: str = "Pending",
    *,
    node: str = "",
    conditions: list[dict[str, Any]] | None = None,
    containers: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    **meta: Any,
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if conditions is not None:
        status["conditions"] = conditions
    if containers is not None:
        status["containerStatuses"] = containers
    if phase == "Running":
        status["startTime"] = T1
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "img:1"}]}
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {
            "name": "train-0123456789abcdef-2",
            "uid": "pod-uid-1",
            "creationTimestamp": T0,
            "labels": {names.RUN_UID: UID, names.ATTEMPT: "2"} if labels is None else labels,
            "annotations": annotations or {},
            **meta,
        },
        "spec": spec,
        "status": status,
    }


def scheduled(status: str, reason: str = "", message: str = "") -> dict[str, Any]:
    return {
        "type": "PodScheduled",
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": T1,
    }


def waiting(reason: str, message: str = "") -> list[dict[str, Any]]:
    return [
        {
            "name": "main",
            "image": "img:1",
            "state": {"waiting": {"reason": reason, "message": message}},
        }
    ]


def terminated(
    code: int, reason: str, finished: str = T2, message: str = ""
) -> list[dict[str, Any]]:
    end = {"exitCode": code, "reason": reason, "finishedAt": finished, "startedAt": T1}
    if message:
        end["message"] = message
    return [{"name": "main", "image": "img:1", "state": {"terminated": end}}]


def disruption(reason: str, message: str) -> dict[str, Any]:
    return {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": T2,
    }


# -- pending ------------------------------------------------------------------------------


def test_not_a_run_pod_is_ignored() -> None:
    assert pod_to_event(pod(labels={"app": "other"})) is None


def test_fresh_pod_waits_for_the_scheduler() -> None:
    event = pod_to_event(pod())
    assert event is not None
    assert (event.uid, event.attempt, event.state) == (UID, 2, RunState.PENDING)
    assert event.condition == "pending_not_scheduled"
    assert event.at == ts(T0)


def test_a_stamp_with_a_fraction_is_taken_as_it_is() -> None:
    from datetime import datetime

    event = pod_to_event(pod(creationTimestamp="2026-01-01T10:00:00.250000Z"))
    assert event is not None
    assert event.at == datetime.fromisoformat("2026-01-01T10:00:00.250000Z").timestamp()


def test_unschedulable_carries_the_scheduler_message() -> None:
    text = "0/8 nodes are available: 8 Insufficient cpu. preemption: 0/8 nodes are available"
    event = pod_to_event(pod(conditions=[scheduled("False", "Unschedulable", text)]))
    assert event is not None
    assert event.state is RunState.PENDING
    assert event.condition == "pending_not_scheduled"
    assert (event.reason, event.message) == ("Unschedulable", text)
    assert event.at == ts(T1)


def test_scheduled_and_starting_is_pending_scheduled() -> None:
    event = pod_to_event(
        pod(
            node="on-demand-1",
            conditions=[scheduled("True")],
            containers=waiting("ContainerCreating"),
        )
    )
    assert event is not None
    assert (event.state, event.condition, event.node) == (
        RunState.PENDING,
        "pending_scheduled",
        "on-demand-1",
    )
    assert event.reason == "ContainerCreating"


def test_node_name_without_scheduler_counts_as_scheduled() -> None:
    event = pod_to_event(pod(node="gpu-0"))
    assert event is not None
    assert event.condition == "pending_scheduled"


def test_config_error_stays_pending_scheduled_with_its_reason() -> None:
    message = 'secret "creds" not found'
    event = pod_to_event(
        pod(
            node="n1",
            conditions=[scheduled("True")],
            containers=waiting("CreateContainerConfigError", message),
        )
    )
    assert event is not None
    assert (event.condition, event.reason, event.message) == (
        "pending_scheduled",
        "CreateContainerConfigError",
        message,
    )


@pytest.mark.parametrize("reason", ["ImagePullBackOff", "ErrImagePull"])
def test_image_pull_failure(reason: str) -> None:
    message = 'Back-off pulling image "registry.example/does-not-exist:1"'
    event = pod_to_event(
        pod(node="n1", conditions=[scheduled("True")], containers=waiting(reason, message))
    )
    assert event is not None
    assert (event.state, event.condition, event.reason, event.message) == (
        RunState.PENDING,
        "image_pull_backoff",
        reason,
        message,
    )


def test_init_container_pull_failure_counts_too() -> None:
    p = pod(node="n1", conditions=[scheduled("True")])
    p["status"]["initContainerStatuses"] = waiting("ImagePullBackOff", "no such image")
    event = pod_to_event(p)
    assert event is not None
    assert event.condition == "image_pull_backoff"


# -- running and ends ---------------------------------------------------------------------


def test_running_reports_node_and_start_time() -> None:
    containers = [{"name": "main", "state": {"running": {"startedAt": T2}}}]
    event = pod_to_event(pod("Running", node="spot-1", containers=containers))
    assert event is not None
    assert (event.state, event.condition, event.node) == (RunState.RUNNING, "running", "spot-1")
    assert event.at == ts(T2)


def test_succeeded_is_completed() -> None:
    event = pod_to_event(pod("Succeeded", node="n1", containers=terminated(0, "Completed")))
    assert event is not None
    assert (event.state, event.reason, event.exit_code) == (RunState.COMPLETED, "Completed", 0)
    assert event.at == ts(T2)


def test_oom_killed() -> None:
    event = pod_to_event(pod("Failed", node="n1", containers=terminated(137, "OOMKilled")))
    assert event is not None
    assert (event.state, event.reason, event.exit_code) == (RunState.ERROR, "OOMKilled", 137)
    assert "memory limit" in event.message


def test_plain_failure_names_the_exit_code() -> None:
    event = pod_to_event(pod("Failed", node="n1", containers=terminated(3, "Error")))
    assert event is not None
    assert (event.state, event.reason, event.exit_code) == (RunState.ERROR, "Error", 3)
    assert event.message == "the container exited with code 3"


def test_termination_message_wins() -> None:
    containers = terminated(1, "Error", message="ValueError: bad input\n")
    event = pod_to_event(pod("Failed", containers=containers))
    assert event is not None
    assert event.message == "ValueError: bad input"


def test_main_container_explains_the_end_over_sidecars() -> None:
    containers = [
        {"name": "sidecar", "state": {"terminated": {"exitCode": 2, "reason": "Error"}}},
        *terminated(137, "OOMKilled"),
    ]
    event = pod_to_event(pod("Failed", containers=containers))
    assert event is not None
    assert (event.reason, event.exit_code) == ("OOMKilled", 137)


def test_pod_level_failure_without_container_status() -> None:
    p = pod("Failed")
    p["status"].update(reason="Evicted", message="The node was low on resource: memory.")
    event = pod_to_event(p)
    assert event is not None
    assert (event.reason, event.message) == ("Evicted", "The node was low on resource: memory.")


# -- disruption, deletion, abort ----------------------------------------------------------


@pytest.mark.parametrize(
    ("cause", "text", "phase"),
    [
        ("PreemptionByScheduler", "runplane-runs/core-service: preempting", "Running"),
        ("PreemptionByScheduler", "runplane-runs/core-service: preempting", "Failed"),
        ("DeletionByPodGC", "PodGC: node no longer exists", "Failed"),
        ("DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint", "Failed"),
    ],
)
def test_disruption_is_preempted(cause: str, text: str, phase: str) -> None:
    p = pod(
        phase,
        node="spot-1",
        conditions=[disruption(cause, text)],
        containers=terminated(137, "Error") if phase == "Failed" else None,
        deletionTimestamp=T3,
    )
    event = pod_to_event(p)
    assert event is not None
    assert (event.state, event.reason) == (RunState.ERROR, "Preempted")
    assert event.message == f"{cause}: {text}"
    assert event.at == ts(T2)


def test_completed_before_disruption_stays_completed() -> None:
    p = pod("Succeeded", conditions=[disruption("DeletionByPodGC", "gone")])
    event = pod_to_event(p, deleted=True)
    assert event is not None
    assert event.state is RunState.COMPLETED


def test_deleted_while_running_is_an_error() -> None:
    event = pod_to_event(pod("Running", node="n1"), deleted=True)
    assert event is not None
    assert (event.state, event.reason) == (RunState.ERROR, "PodDeleted")
    assert event.message.startswith("pod deleted")


def test_being_deleted_by_someone_is_reported_at_once() -> None:
    p = pod("Running", node="n1", deletionTimestamp=T3, deletionGracePeriodSeconds=30)
    event = pod_to_event(p)
    assert event is not None
    assert event.reason == "PodDeleted"


def test_failure_caused_by_a_delete_is_a_deletion() -> None:
    # kubectl delete at T2 with a 5 s grace period: the container is killed after the request.
    p = pod(
        "Failed",
        containers=terminated(137, "Error", finished="2026-01-01T10:01:02Z"),
        deletionTimestamp="2026-01-01T10:01:05Z",
        deletionGracePeriodSeconds=5,
    )
    event = pod_to_event(p, deleted=True)
    assert event is not None
    assert event.reason == "PodDeleted"


def test_failure_before_a_later_delete_keeps_its_reason() -> None:
    p = pod(
        "Failed",
        containers=terminated(137, "OOMKilled", finished=T1),
        deletionTimestamp=T3,
        deletionGracePeriodSeconds=0,
    )
    event = pod_to_event(p, deleted=True)
    assert event is not None
    assert (event.reason, event.exit_code) == ("OOMKilled", 137)


def test_deleted_while_pending_is_an_error() -> None:
    event = pod_to_event(pod(), deleted=True)
    assert event is not None
    assert (event.state, event.reason) == (RunState.ERROR, "PodDeleted")


def test_abort_annotation_means_aborting_then_aborted() -> None:
    notes = {names.ABORT_REASON: "ThresholdExceeded", names.ABORT_MESSAGE: "running 1h"}
    live = pod_to_event(pod("Running", node="n1", annotations=notes, deletionTimestamp=T3))
    assert live is not None
    assert (live.state, live.reason, live.message) == (
        RunState.ABORTING,
        "ThresholdExceeded",
        "running 1h",
    )
    ended = pod_to_event(
        pod("Failed", annotations=notes, containers=terminated(137, "Error")), deleted=True
    )
    assert ended is not None
    assert (ended.state, ended.reason, ended.exit_code) == (
        RunState.ABORTED,
        "ThresholdExceeded",
        137,
    )


def test_abort_wins_over_preemption() -> None:
    notes = {names.ABORT_REASON: "Aborted"}
    p = pod("Failed", annotations=notes, conditions=[disruption("DeletionByPodGC", "gone")])
    event = pod_to_event(p)
    assert event is not None
    assert event.state is RunState.ABORTED


def test_unknown_phase_says_nothing() -> None:
    assert pod_to_event(pod("Unknown")) is None


def test_bad_attempt_label_defaults_to_one() -> None:
    event = pod_to_event(pod(labels={names.RUN_UID: UID, names.ATTEMPT: "x"}))
    assert event is not None
    assert event.attempt == 1


# -- the watch loop, against a scripted API -----------------------------------------------


class FakeResponse:
    def __init__(self, lines: list[dict[str, Any]], hold: bool) -> None:
        self._body = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
        self._hold = hold
        self.closed = threading.Event()

    def stream(self, amount: int, decode_content: bool = True) -> Iterator[bytes]:
        # Split mid-line to prove lines are reassembled across chunks.
        for start in range(0, len(self._body), 7):
            yield self._body[start : start + 7]
        if self._hold:
            self.closed.wait(5)
            raise OSError("connection closed")

    def shutdown(self) -> None:
        self.closed.set()

    def close(self) -> None:
        self.closed.set()

    def release_conn(self) -> None:
        pass


class FakeRest:
    """Answers lists and watches from scripts; records the resourceVersion of every watch."""

    def __init__(self, lists: list[Any], watches: list[Any]) -> None:
        self.lists = lists
        self.watches = watches
        self.watched_from: list[str | None] = []
        self.done = threading.Event()

    def json(self, method: str, path: str, query: Any = None, **_: Any) -> dict[str, Any]:
        answer = self.lists.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]

    def stream(self, path: str, query: dict[str, Any], timeout: Any = None) -> FakeResponse:
        self.watched_from.append(query.get("resourceVersion"))
        if not self.watches:
            self.done.set()
            return FakeResponse([], hold=True)
        answer = self.watches.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return FakeResponse(answer, hold=False)


def obj(name: str, version: str, phase: str = "Running") -> dict[str, Any]:
    p = pod(phase, node="n1")
    p["metadata"].update(name=name, uid=f"uid-{name}", resourceVersion=version)
    return p


def listing(version: str, *pods: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"resourceVersion": version}, "items": list(pods)}


def run_watch(rest: FakeRest, **kwargs: Any) -> tuple[PodWatch, list[tuple[str, str]]]:
    seen: list[tuple[str, str]] = []
    watch = PodWatch(
        rest,
        "ns",
        names.RUN_UID,
        lambda kind, p: seen.append((kind, p["metadata"]["name"])),
        backoff=Backoff(0.01, 0.02),
        **kwargs,
    )
    watch.start()
    assert rest.done.wait(5), "the watch never reached the end of its script"
    watch.stop()
    assert not watch.running
    return watch, seen


class Trickle:
    """A watch stream whose events come when the test sends them, each after the watch has
    begun to wait for it."""

    def __init__(self) -> None:
        self._events: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
        self._reading = threading.Event()

    def stream(self, amount: int, decode_content: bool = True) -> Iterator[bytes]:
        while True:
            self._reading.set()
            event = self._events.get()
            self._reading.clear()
            if event is None:
                raise OSError("connection closed")
            yield json.dumps(event).encode() + b"\n"

    def send(self, *events: dict[str, Any]) -> float:
        """``events`` sent together, once the watch has waited for the next a few ms (a read
        that waits that long was woken by its event); when they were sent."""
        assert self._reading.wait(5)
        time.sleep(0.005)
        sent = time.monotonic()
        for event in events:
            self._events.put(event)
        return sent

    def shutdown(self) -> None:
        self._events.put(None)

    close = shutdown

    def release_conn(self) -> None:
        pass


class TrickleRest(FakeRest):
    def __init__(self, trickle: Trickle) -> None:
        super().__init__(lists=[listing("10")], watches=[])
        self.trickle = trickle

    def stream(self, path: str, query: dict[str, Any], timeout: Any = None) -> Any:
        return self.trickle


def test_a_busy_watch_reads_its_events_together_at_most_once_per_pace() -> None:
    pace = 0.3
    trickle = Trickle()
    seen: dict[str, float] = {}
    handled = threading.Semaphore(0)

    def handler(kind: str, p: dict[str, Any]) -> None:
        seen[p["metadata"]["name"]] = time.monotonic()
        handled.release()

    def modified(name: str) -> dict[str, Any]:
        return {"type": "MODIFIED", "object": obj(name, "11")}

    watch = PodWatch(TrickleRest(trickle), "ns", names.RUN_UID, handler, pace=pace).start()
    try:
        sent = trickle.send(modified("a"))  # the first event: read at once
        assert handled.acquire(timeout=5)
        assert seen["a"] - sent < pace / 2
        trickle.send(modified("b"), modified("c"))  # soon after: both wait for the pace
        assert handled.acquire(timeout=5)
        assert handled.acquire(timeout=5)
        assert seen["b"] - seen["a"] >= pace * 0.9
        assert seen["c"] - seen["b"] < pace / 2  # read with b, not paced again
        while time.monotonic() < seen["c"] + pace:  # quiet for a pace: the next is read at once
            time.sleep(pace / 10)
        sent = trickle.send(modified("d"))
        assert handled.acquire(timeout=5)
        assert seen["d"] - sent < pace / 2
    finally:
        watch.stop()
    assert not watch.running


def test_watch_resumes_from_last_version_and_bookmark() -> None:
    rest = FakeRest(
        lists=[listing("10", obj("a", "9"))],
        watches=[
            [{"type": "MODIFIED", "object": obj("a", "11", "Succeeded")}],
            [{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "15"}}}],
        ],
    )
    watch, seen = run_watch(rest)
    assert seen == [("ADDED", "a"), ("MODIFIED", "a")]
    assert rest.watched_from == ["10", "11", "15"]
    assert (watch.stats.lists, watch.stats.bookmarks, watch.stats.expired) == (1, 1, 0)


def test_watch_relists_on_410_and_reports_what_vanished() -> None:
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}
    rest = FakeRest(
        lists=[
            listing("10", obj("a", "9"), obj("b", "9")),
            listing("30", obj("b", "25"), obj("c", "28")),
        ],
        watches=[[gone]],
    )
    watch, seen = run_watch(rest)
    assert seen == [
        ("ADDED", "a"),
        ("ADDED", "b"),
        ("VANISHED", "a"),
        ("MODIFIED", "b"),
        ("ADDED", "c"),
    ]
    assert watch.stats.expired == 1
    assert watch.stats.lists == 2
    assert rest.watched_from == ["10", "30"]


def test_a_watch_finds_what_it_knows_by_its_index_as_objects_come_and_go() -> None:
    def of_run(name: str, version: str, run: str) -> dict[str, Any]:
        made = obj(name, version)
        made["metadata"]["labels"][names.RUN_UID] = run
        return made

    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}
    rest = FakeRest(
        lists=[
            listing("10", of_run("a", "9", "r1"), of_run("b", "9", "r1"), of_run("c", "9", "r2")),
            listing("30", of_run("b", "25", "r2"), of_run("d", "28", "r3")),
        ],
        watches=[
            [
                {"type": "DELETED", "object": of_run("a", "11", "r1")},
                {"type": "ADDED", "object": of_run("e", "12", "r2")},
            ],
            [gone],  # re-listed: a pod that moved to another key, one vanished, one new
        ],
    )
    watch, _ = run_watch(rest, index=lambda p: p["metadata"]["labels"][names.RUN_UID])

    def named(run: str) -> list[str]:
        return sorted(p["metadata"]["name"] for p in watch.known_by(run))

    assert (named("r1"), named("r2"), named("r3")) == ([], ["b"], ["d"])
    assert named("none") == []
    assert sorted(p["metadata"]["name"] for p in watch.known()) == ["b", "d"]


def test_watch_starting_from_an_expired_version_falls_back_to_a_list() -> None:
    rest = FakeRest(
        lists=[listing("50", obj("a", "40"))],
        watches=[ApiException(status=410, reason="Gone")],
    )
    watch, seen = run_watch(rest, resource_version="3")
    assert seen == [("ADDED", "a")]
    assert rest.watched_from == ["3", "50"]
    assert watch.stats.expired == 1


def test_watch_backs_off_on_errors_and_keeps_its_version() -> None:
    rest = FakeRest(
        lists=[ApiException(status=503, reason="Unavailable"), listing("10")],
        watches=[ApiException(status=500, reason="boom"), OSError("refused")],
    )
    watch, _ = run_watch(rest)
    assert watch.stats.errors == 3
    assert rest.watched_from == ["10", "10", "10"]


def test_a_watch_says_why_it_does_not_see_changes_until_it_does() -> None:
    troubles: list[str | None] = []

    class Refusing(FakeRest):
        def json(self, method: str, path: str, query: Any = None, **_: Any) -> dict[str, Any]:
            troubles.append(watch.trouble())
            return super().json(method, path, query)

    rest = Refusing(lists=[ApiException(status=403, reason="Forbidden"), listing("10")], watches=[])
    watch = PodWatch(rest, "ns", names.RUN_UID, lambda kind, p: None, backoff=Backoff(0.01, 0.02))
    assert watch.trouble() == "the watch of /api/v1/namespaces/ns/pods is not running"
    watch.start()
    assert rest.done.wait(5)
    assert troubles == [
        "the watch of /api/v1/namespaces/ns/pods has not listed it yet",
        "the watch of /api/v1/namespaces/ns/pods has not listed it yet (HTTP 403 Forbidden)",
    ]
    deadline = time.monotonic() + 5  # the stream it opened is set up after the fake answers
    while watch.trouble() is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert watch.trouble() is None
    watch.stop()
    assert watch.trouble() == "the watch of /api/v1/namespaces/ns/pods is not running"


def test_a_failing_handler_does_not_stop_the_watch() -> None:
    rest = FakeRest(lists=[listing("10", obj("a", "9"), obj("b", "9"))], watches=[])
    calls: list[str] = []

    def handler(kind: str, p: dict[str, Any]) -> None:
        calls.append(p["metadata"]["name"])
        raise RuntimeError("consumer bug")

    watch = PodWatch(rest, "ns", names.RUN_UID, handler)
    watch.start()
    assert rest.done.wait(5)
    began = time.monotonic()
    watch.stop()
    assert time.monotonic() - began < 2, "stop() must not wait for the next event"
    assert calls == ["a", "b"]


# -- from observations to events (no API calls) ------------------------------------------


def test_each_change_is_published_once_and_nothing_after_the_end() -> None:
    events: list[Any] = []
    tracker = RunTracker(events.append)
    tracker.observe("ADDED", obj("a", "1"))
    tracker.observe("MODIFIED", obj("a", "2"))  # same state: a label or IP change
    tracker.observe("MODIFIED", obj("a", "3", "Succeeded"))
    tracker.observe("DELETED", obj("a", "4", "Succeeded"))
    assert [e.state for e in events] == [RunState.RUNNING, RunState.COMPLETED]


def test_forgetting_a_key_with_no_event_drops_what_it_last_said() -> None:
    """A queued workload that goes (admitted and done, or deleted) leaves nothing behind in the
    tracker; a later word under the same key is news again."""
    events: list[Any] = []
    tracker = RunTracker(events.append)
    waiting = RunEvent(uid=UID, state=RunState.PENDING, at=1.0, reason="Quota", message="m")
    tracker.deliver("kueue-w", waiting)
    tracker.deliver("kueue-w", waiting)  # a repeat says nothing
    tracker.deliver("kueue-w", None, True)
    tracker.deliver("kueue-w", waiting)
    assert len(events) == 2


def test_a_vanished_pod_is_an_unknown_end() -> None:
    events: list[Any] = []
    tracker = RunTracker(events.append)
    tracker.observe("ADDED", obj("a", "1"))
    tracker.observe("VANISHED", obj("a", "1"))
    assert events[-1].reason == "PodDeleted"
    assert "unknown" in events[-1].message


def test_whatever_ends_an_aborting_run_is_its_abort() -> None:
    events: list[Any] = []
    tracker = RunTracker(events.append)
    tracker.abort(UID, "ThresholdExceeded", "too long")  # the annotation could not be written
    tracker.observe("MODIFIED", obj("a", "1"))
    tracker.observe("DELETED", obj("a", "2"))
    tracker.observe("ADDED", obj("b", "3"))  # a later pod of the run is not part of the abort
    assert [(e.state, e.reason) for e in events] == [
        (RunState.ABORTING, "ThresholdExceeded"),
        (RunState.ABORTED, "ThresholdExceeded"),
        (RunState.RUNNING, "Running"),
    ]


def test_results_come_from_the_entry_points_termination_message() -> None:
    summary = json.dumps({"results": {"accuracy": 0.93}})
    done = pod_to_event(pod("Succeeded", containers=terminated(0, "Completed", message=summary)))
    assert done is not None
    assert done.results == {"accuracy": 0.93}
    failed = pod_to_event(pod("Failed", containers=terminated(1, "Error", message=summary)))
    assert failed is not None
    assert failed.results == {"accuracy": 0.93}
    assert failed.message == "the container exited with code 1"


def test_helper_pods_only_tell_why_their_run_waits() -> None:
    events: list[Any] = []
    tracker = RunTracker(events.append)
    run = {names.RUN_UID: UID, names.ATTEMPT: "2"}
    worker = {**run, names.ROLE: "worker"}
    launcher = {**run, names.ROLE: "launcher"}
    unschedulable = scheduled("False", "Unschedulable", "0/3 nodes are available: ...")
    tracker.observe("ADDED", pod(labels=worker, uid="w1", conditions=[unschedulable]))
    assert [(e.state, e.reason) for e in events] == [(RunState.PENDING, "Unschedulable")]
    tracker.observe("MODIFIED", pod("Running", node="n1", labels=worker, uid="w1"))
    tracker.observe("ADDED", pod("Running", node="n1", labels=launcher, uid="l1"))
    tracker.observe("ADDED", pod(labels=worker, uid="w2", conditions=[unschedulable]))
    tracker.observe("DELETED", pod("Running", node="n1", labels=worker, uid="w1"))
    # The worker's running and deletion, and a later worker waiting, are not the run's.
    assert [e.state for e in events] == [RunState.PENDING, RunState.RUNNING]


def test_a_relist_keeps_no_pod_with_its_managed_fields() -> None:
    """Held from the list until every pod of it is dispatched, a pod's managed fields (a
    third of its size, a tree of small dicts) would be the re-list's peak of memory."""

    def managed(name: str, version: str) -> dict[str, Any]:
        made = obj(name, version)
        made["metadata"]["managedFields"] = [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]
        return made

    kept: list[dict[str, Any]] = []

    def keep(p: dict[str, Any]) -> dict[str, Any]:
        kept.append(dict(p["metadata"]))
        return p

    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}
    rest = FakeRest(
        lists=[
            listing("10", managed("a", "9")),
            listing("30", managed("a", "9"), managed("b", "20")),
        ],
        watches=[[gone]],
    )
    watch, seen = run_watch(rest, keep=keep)
    assert seen == [("ADDED", "a"), ("ADDED", "b")]  # "a" unchanged: not dispatched again
    assert {m["name"] for m in kept} == {"a", "b"}
    assert all("managedFields" not in m for m in kept)
    assert all("managedFields" not in p["metadata"] for p in watch.known())
