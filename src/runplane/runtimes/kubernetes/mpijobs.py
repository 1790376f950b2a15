"""An MPIJob run's state, from its operator's conditions.

The MPI Operator decides how an MPIJob goes: it runs the launcher as a Job with its own
retries, fails the job when workers are evicted, suspends and resumes it. Its launcher pod
alone cannot tell these apart (a failed launcher pod may be retried; an evicted worker fails
the job while the launcher still runs), so the run's state follows ``status.conditions``:
``Succeeded`` ends it ``completed``, ``Failed`` ``error`` with the operator's reason and message,
``Suspended`` makes it ``pending`` and ``Restarting`` keeps it ``running``, each with the
operator's reason. ``Running`` says what the launcher's start said already (with its node), and
``Created`` adds nothing: the run is pending from its submission, and its pods say better why
it waits; :func:`news` tells the two kinds apart. The launcher's log still gives the results
(and a failing rank's error), which the tracker joins to the operator's end
(:class:`.tracker.RunTracker`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runplane import names
from runplane.runs import Condition, RunState
from runplane.runtimes.events import RunEvent
from runplane.runtimes.kubernetes.pod_events import attempt_of

KIND = "MPIJob"
#: The most of the operator's message a run's record keeps.
MESSAGE_LIMIT = 2000
#: Condition types by precedence: an ended job's end, then what it does now.
_STATES = (
    ("Succeeded", RunState.COMPLETED),
    ("Failed", RunState.ERROR),
    ("Suspended", RunState.PENDING),
    ("Restarting", RunState.RUNNING),
    ("Running", RunState.RUNNING),
)


def mpijob_event(mpijob: Mapping[str, Any]) -> RunEvent | None:
    """What the MPIJob's conditions say of its run; ``None`` when they say nothing yet."""
    meta = mpijob.get("metadata") or {}
    labels = meta.get("labels") or {}
    uid = labels.get(names.RUN_UID)
    if not uid:
        return None
    true = {
        str(c.get("type")): c
        for c in (mpijob.get("status") or {}).get("conditions") or []
        if c.get("status") == "True"
    }
    for kind, state in _STATES:
        condition = true.get(kind)
        if condition is None:
            continue
        reason = str(condition.get("reason") or f"MPIJob{kind}").rstrip("/")
        message = str(condition.get("message") or "").strip()
        if len(message) > MESSAGE_LIMIT:
            message = message[:MESSAGE_LIMIT] + " ..."
        plain = state in (RunState.RUNNING, RunState.COMPLETED) and kind != "Restarting"
        return RunEvent(
            uid,
            state,
            # a running run stays under its ``running`` threshold
            condition=Condition.RUNNING if state is RunState.RUNNING else None,
            reason="" if plain else reason,
            message="" if plain else message,
            attempt=attempt_of(labels),
        )
    return None


def news(event: RunEvent) -> bool:
    """Whether a condition's event says what no pod of the run says: an end, a suspension,
    a restart (the plain ``Running`` is the launcher's start, told by its pod with its node)."""
    return event.state.terminal or bool(event.reason)


def is_launcher(pod: Mapping[str, Any]) -> bool:
    """Whether ``pod`` is an MPIJob's launcher, whose state is its job's, not its own."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return bool(labels.get(names.ROLE) == "launcher")
