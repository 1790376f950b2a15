"""What a SparkApplication's own status adds to its driver pod's: a submission that failed.

A spark run's state follows its driver pod (the handler runs there). The operator's
``status.applicationState`` says the same things for a driver that exists (``RUNNING``,
``COMPLETED``, ``FAILED``), but one thing only there: ``SUBMISSION_FAILED``, when
``spark-submit`` could not make the driver (a refused pod template, no rights to create pods,
an image Spark cannot use). No pod will ever tell that, so the run would stay ``pending``; the
application's watch makes it ``error`` with the operator's message instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runplane import names
from runplane.runs import RunState
from runplane.runtimes.events import RunEvent
from runplane.runtimes.kubernetes.pod_events import attempt_of

API_VERSION, KIND = "sparkoperator.k8s.io/v1beta2", "SparkApplication"
#: The operator's states no driver pod will report.
SUBMISSION_FAILED = "SUBMISSION_FAILED"
#: The reason a run ends with when its application was never submitted.
REASON = "SubmissionFailed"
#: The most of the operator's error message a run's record keeps (spark-submit's output).
MESSAGE_LIMIT = 2000


def application_event(application: Mapping[str, Any]) -> RunEvent | None:
    """The run's end when the operator could not submit its application; ``None`` otherwise."""
    meta = application.get("metadata") or {}
    labels = meta.get("labels") or {}
    uid = labels.get(names.RUN_UID)
    state = (application.get("status") or {}).get("applicationState") or {}
    if not uid or state.get("state") != SUBMISSION_FAILED:
        return None
    detail = str(state.get("errorMessage") or "no reason given").strip()
    if len(detail) > MESSAGE_LIMIT:
        detail = detail[:MESSAGE_LIMIT] + " ..."
    return RunEvent(
        uid,
        RunState.ERROR,
        reason=REASON,
        message=f"the Spark operator could not submit SparkApplication {meta.get('name')}: "
        f"{detail}",
        attempt=attempt_of(labels),
    )
