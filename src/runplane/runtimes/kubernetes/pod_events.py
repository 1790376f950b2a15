"""One pod observation -> one :class:`RunEvent`: the whole state mapping of the Kubernetes runtime.

Pure on purpose: it reads only the pod as the API returns it (a plain JSON dict), so the same
function serves the live watch, a re-list after a restart, and unit tests, and two replicas
that see the same pod agree on what it means. Times come from the pod (when the pod entered a
phase), not from when we happened to look, so threshold clocks survive a service restart.

Precedence, first match wins:

1. an abort annotation (runplane deleted it on purpose): ``aborting``, then ``aborted``;
2. ``Succeeded``: ``completed``;
3. a ``DisruptionTarget`` condition (scheduler preemption, taint eviction, PodGC after node
   loss, eviction API): ``error``/``Preempted``;
4. ``Failed``: ``error`` with the container's reason (``OOMKilled``, ``Error``) and exit code,
   unless the failure came from someone else deleting the pod;
5. deleted, or being deleted, before finishing: ``error``/``PodDeleted``;
6. ``Running``: ``running``;
7. ``Pending``: image pull back-off, not scheduled, or scheduled and starting.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from runplane import names
from runplane.runs import Condition, Reason, RunState
from runplane.runtimes.events import RunEvent
from runplane.runtimes.kubernetes.kueue import ADMISSION_GATE as KUEUE_GATE
from runplane.runtimes.kubernetes.kueue import QUEUE_LABEL as KUEUE_QUEUE_LABEL
from runplane.runtimes.kubernetes.kueue import WAITING_FOR_QUOTA

#: Container waiting reasons that mean the image cannot be pulled (state ``image_pull_backoff``).
PULL_BACKOFF = frozenset({Reason.IMAGE_PULL_BACKOFF, Reason.ERR_IMAGE_PULL})
MAIN_CONTAINER = "main"
#: The container that runs the handler: runplane's own, or the one the Spark Operator names
#: in the driver pod it makes from a SparkApplication.
MAIN_CONTAINERS = (MAIN_CONTAINER, "spark-kubernetes-driver")


def main_container(pod: Mapping[str, Any]) -> str:
    """The name of the pod's container that runs the handler."""
    names_ = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
    return next((name for name in MAIN_CONTAINERS if name in names_), MAIN_CONTAINER)


Pod = Mapping[str, Any]


def kept(pod: Pod) -> dict[str, Any]:
    """What is kept of a pod between its events: enough to judge it again (its metadata,
    status, node and containers' names), a third of its size; 10,000 live runs hold it."""
    spec = pod.get("spec") or {}
    containers = [{"name": c.get("name")} for c in spec.get("containers") or []]
    return {
        "metadata": pod.get("metadata") or {},
        "spec": {"nodeName": spec.get("nodeName"), "containers": containers},
        "status": pod.get("status") or {},
    }


def _timestamp(value: object) -> float | None:
    """Kubernetes stamps pod times in whole seconds: a time without a fraction stands for the
    middle of the second it names, so a run that began and ended within one second does not
    read as taking no time at all."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment.timestamp() + (0.5 if moment.microsecond == 0 else 0.0)


def attempt_of(labels: Mapping[str, str]) -> int:
    """The run attempt a pod belongs to, from its label (1 when it has none)."""
    try:
        return max(int(labels.get(names.ATTEMPT, "1")), 1)
    except ValueError:
        return 1


def _statuses(status: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]


def _terminated(status: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The state that explains the pod's end: the main container's, else the first non-zero."""
    ends = [
        (s.get("name"), s["state"]["terminated"])
        for s in status.get("containerStatuses") or []
        if (s.get("state") or {}).get("terminated")
    ]
    main = [end for name, end in ends if name in MAIN_CONTAINERS]
    failed = [end for _, end in ends if end.get("exitCode")]
    chosen: Mapping[str, Any] | None = (main or failed or [end for _, end in ends] or [None])[0]
    return chosen


def _waiting(status: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [
        s["state"]["waiting"] | {"image": s.get("image", "")}
        for s in _statuses(status)
        if (s.get("state") or {}).get("waiting")
    ]


def _deleted_before_end(meta: Mapping[str, Any], end: Mapping[str, Any] | None) -> bool:
    """Did the containers stop because of a delete request, rather than before it?

    ``deletionTimestamp`` is the request time plus the grace period, so the request time is
    recoverable; a container that finished at or after it was stopped by the deletion.
    """
    deleting = _timestamp(meta.get("deletionTimestamp"))
    if deleting is None:
        return False
    requested = deleting - float(meta.get("deletionGracePeriodSeconds") or 0)
    finished = _timestamp((end or {}).get("finishedAt"))
    return finished is None or finished >= requested - 1.0  # timestamps have 1 s resolution


def _event(pod: Pod, state: RunState, at: float | None, **fields: Any) -> RunEvent:
    labels = pod["metadata"]["labels"]
    spec = pod.get("spec") or {}
    return RunEvent(
        uid=labels[names.RUN_UID],
        attempt=attempt_of(labels),
        state=state,
        node=spec.get("nodeName") or "",
        at=time.time() if at is None else at,
        **fields,
    )


def _summary(end: Mapping[str, Any] | None) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    """Results, artifacts and the error text from the termination message.

    runplane's bootstrap writes ``{"results": {...}, "artifacts": [...], "error": "..."}``
    there (or ``{"results_in_log": true}``, see :func:`results_in_log`); anything else (a crash
    before it ran, a user's own image) is taken as plain text.
    """
    text = str((end or {}).get("message") or "").strip()
    if text.startswith("{"):
        try:
            summary = json.loads(text)
        except (ValueError, RecursionError):  # not runplane's report, or one nested past reason
            return {}, [], text
        if isinstance(summary, dict):
            results = summary.get("results")
            artifacts = summary.get("artifacts")
            return (
                results if isinstance(results, dict) else {},
                artifacts if isinstance(artifacts, list) else [],
                str(summary.get("error") or ""),
            )
    return {}, [], text


def results_in_log(pod: Pod) -> bool:
    """Whether the pod's results were too large for its termination message and are on the
    last line of its log instead."""
    end = _terminated(pod.get("status") or {})
    return '"results_in_log": true' in str((end or {}).get("message") or "")


def _failure(end: Mapping[str, Any] | None, status: Mapping[str, Any]) -> tuple[str, str]:
    if end is None:
        reason = status.get("reason") or Reason.ERROR
        return reason, status.get("message") or f"the pod failed ({reason})"
    code = end.get("exitCode")
    reason = end.get("reason") or Reason.ERROR
    _, _, text = _summary(end)
    if text:
        return reason, text
    if reason == Reason.OOM_KILLED:
        return reason, f"the container exceeded its memory limit and was killed (exit code {code})"
    return reason, f"the container exited with code {code}"


def pod_to_event(pod: Pod, *, deleted: bool = False) -> RunEvent | None:
    """What this pod says about its run; ``None`` for a pod that is not a runplane run.

    ``deleted`` is true for the last observation of a pod the API no longer has (a watch
    ``DELETED`` event, or a pod missing from a re-list).
    """
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    if not labels.get(names.RUN_UID):
        return None
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    end = _terminated(status)
    exit_code = end.get("exitCode") if end else None
    finished = _timestamp((end or {}).get("finishedAt"))
    annotations = meta.get("annotations") or {}
    stopped = deleted or phase in ("Succeeded", "Failed")

    if names.ABORT_REASON in annotations:
        return _event(
            pod,
            RunState.ABORTED if stopped else RunState.ABORTING,
            finished if stopped else None,
            reason=annotations[names.ABORT_REASON] or Reason.ABORTED,
            message=annotations.get(names.ABORT_MESSAGE, ""),
            exit_code=exit_code if stopped else None,
        )
    if phase == "Succeeded":
        return _event(
            pod,
            RunState.COMPLETED,
            finished,
            reason=Reason.COMPLETED,
            exit_code=exit_code or 0,
            results=_summary(end)[0],
            artifacts=_summary(end)[1],
        )
    disruption = conditions.get("DisruptionTarget") or _evicted_by_kueue(conditions)
    if disruption and disruption.get("status") == "True":
        cause = disruption.get("reason") or "DisruptionTarget"
        detail = disruption.get("message") or ""
        return _event(
            pod,
            RunState.ERROR,
            _timestamp(disruption.get("lastTransitionTime")),
            reason=Reason.PREEMPTED,
            message=f"{cause}: {detail}" if detail else cause,
            exit_code=exit_code,
        )
    if phase == "Failed" and not _deleted_before_end(meta, end):
        reason, message = _failure(end, status)
        return _event(
            pod,
            RunState.ERROR,
            finished,
            reason=reason,
            message=message,
            exit_code=exit_code,
            results=_summary(end)[0],
            artifacts=_summary(end)[1],
        )
    if stopped or meta.get("deletionTimestamp"):
        return _event(
            pod,
            RunState.ERROR,
            finished,
            reason=Reason.POD_DELETED,
            message=f"pod deleted: {meta.get('name', '')} was deleted before the run finished, "
            "and not by runplane",
            exit_code=exit_code,
        )
    if phase == "Running":
        started = _timestamp(status.get("startTime"))
        for item in status.get("containerStatuses") or []:
            if item.get("name") in MAIN_CONTAINERS:
                running = (item.get("state") or {}).get("running") or {}
                started = _timestamp(running.get("startedAt")) or started
        node = (pod.get("spec") or {}).get("nodeName") or ""
        return _event(
            pod,
            RunState.RUNNING,
            started,
            condition=Condition.RUNNING,
            reason=Reason.RUNNING,
            message=f"running on {node}" if node else "running",
        )
    if phase != "Pending":
        return None  # "Unknown": the node stopped reporting; the next observation decides
    return _pending(pod, meta, status, conditions)


def _pending(
    pod: Pod,
    meta: Mapping[str, Any],
    status: Mapping[str, Any],
    conditions: Mapping[str, Mapping[str, Any]],
) -> RunEvent:
    waiting = _waiting(status)
    for item in waiting:
        if item.get("reason") in PULL_BACKOFF:
            return _event(
                pod,
                RunState.PENDING,
                None,  # a waiting state has no timestamp; the observation time is the best
                condition=Condition.IMAGE_PULL_BACKOFF,
                reason=item["reason"],
                message=item.get("message") or f"cannot pull image {item.get('image', '')!r}",
            )
    scheduled = conditions.get("PodScheduled") or {}
    created = _timestamp(meta.get("creationTimestamp"))
    node = (pod.get("spec") or {}).get("nodeName") or ""
    gates = {g.get("name") for g in (pod.get("spec") or {}).get("schedulingGates") or []}
    if not node and KUEUE_GATE in gates:
        queue = (meta.get("labels") or {}).get(KUEUE_QUEUE_LABEL, "")
        return _event(
            pod,
            RunState.PENDING,
            created,
            condition=Condition.PENDING_NOT_SCHEDULED,
            reason=WAITING_FOR_QUOTA,
            message=f"waiting for quota: Kueue has not admitted it to queue {queue!r} yet",
        )
    if not node and scheduled.get("status") != "True":
        return _event(
            pod,
            RunState.PENDING,
            _timestamp(scheduled.get("lastTransitionTime")) or created,
            condition=Condition.PENDING_NOT_SCHEDULED,
            reason=scheduled.get("reason") or Reason.PENDING,
            message=scheduled.get("message") or "waiting for the scheduler",
        )
    starting = next((w for w in waiting if w.get("reason")), None)
    return _event(
        pod,
        RunState.PENDING,
        _timestamp(scheduled.get("lastTransitionTime")) or created,
        condition=Condition.PENDING_SCHEDULED,
        reason=starting["reason"] if starting else Reason.SCHEDULED,
        message=(starting or {}).get("message") or f"scheduled on {node}, starting",
    )


def _evicted_by_kueue(conditions: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """Kueue's mark on a pod it stops because its workload was evicted (preempted by a higher
    priority, reclaimed by its cohort): a ``TerminationTarget`` condition whose reason is
    ``WorkloadEvictedDueTo<why>``, and the message says who took its place."""
    condition = conditions.get("TerminationTarget") or {}
    if str(condition.get("reason") or "").startswith("WorkloadEvicted"):
        return condition
    return None


def node_lost_event(pod: Pod, node: str) -> RunEvent | None:
    """What a pod says about its run once its node was deleted under it: the run's attempt is
    lost (``None`` for a pod that is not a run's, or that had already finished)."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    phase = (pod.get("status") or {}).get("phase")
    if not labels.get(names.RUN_UID) or phase in ("Succeeded", "Failed"):
        return None
    if names.ABORT_REASON in (meta.get("annotations") or {}):
        return pod_to_event(pod, deleted=True)  # an abort under way ends as the abort
    return _event(
        pod,
        RunState.ERROR,
        None,
        reason=Reason.NODE_LOST,
        message=f"node {node} was deleted while the run was on it (a spot reclaim, a "
        "scale-down or a failed machine)",
    )
