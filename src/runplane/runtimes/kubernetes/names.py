"""Label and annotation keys the Kubernetes runtime reads and writes, in one place.

``render`` puts the run labels on every pod; the runtime adds the ownership labels at submit
time and the abort annotations when it aborts, so any watcher (another service replica, or this
one after a restart) can tell a deliberate abort from a pod that vanished.
"""

from __future__ import annotations

RUN_UID = "runplane.io/run-uid"
ATTEMPT = "runplane.io/attempt"
PROJECT = "runplane.io/project"
FUNCTION = "runplane.io/function"
#: Which runplane service owns a pod, when several share a namespace (optional).
INSTANCE = "runplane.io/instance"
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "runplane"
#: Written on a pod just before runplane deletes it: the run ends ``aborted``, not ``error``.
ABORT_REASON = "runplane.io/abort-reason"
ABORT_MESSAGE = "runplane.io/abort-message"
