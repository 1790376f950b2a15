"""The names runplane writes into Kubernetes objects, in one place.

``rendering`` puts the run labels on every pod, the Kubernetes runtime adds the ownership labels
and the abort annotations and reads them all back, the configuration names node groups by
label, and the testbed labels its nodes the same way.
"""

from __future__ import annotations

PREFIX = "runplane.io/"
#: Labels of every object rendered for a function, and of every pod of a run.
PROJECT = f"{PREFIX}project"
FUNCTION = f"{PREFIX}function"
RUN_UID = f"{PREFIX}run-uid"
ATTEMPT = f"{PREFIX}attempt"
#: Which runplane service owns a pod, when several share a namespace (optional).
INSTANCE = f"{PREFIX}instance"
#: The node label that names a node's group (system, on-demand, spot, gpu...).
NODE_GROUP = f"{PREFIX}node-group"
#: The taint of nodes reserved for core services (the system group).
RESERVED = f"{PREFIX}reserved"
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "runplane"
#: Written on a pod just before runplane deletes it, so any watcher (another replica, or this
#: one after a restart) records the run ``aborted``, not ``error``.
ABORT_REASON = f"{PREFIX}abort-reason"
ABORT_MESSAGE = f"{PREFIX}abort-message"
#: The extended resource ``with_limits(gpus=...)`` asks for unless ``gpu_type`` says otherwise.
GPU = "nvidia.com/gpu"

#: Environment variables of a run's container: what a run's own process reads.
ENV_PROJECT = "RUNPLANE_PROJECT"
ENV_FUNCTION = "RUNPLANE_FUNCTION"
ENV_HANDLER = "RUNPLANE_HANDLER"
ENV_CODE = "RUNPLANE_EXEC_CODE"
ENV_RUN_UID = "RUNPLANE_RUN_UID"
ENV_ATTEMPT = "RUNPLANE_ATTEMPT"
ENV_FILENAME = "RUNPLANE_FILENAME"
ENV_TAKES_CONTEXT = "RUNPLANE_TAKES_CONTEXT"
ENV_PARAMS = "RUNPLANE_PARAMS"
ENV_INPUTS = "RUNPLANE_INPUTS"
ENV_HTTP_WORKERS = "RUNPLANE_HTTP_WORKERS"
ENV_HTTP_WORKER_TIMEOUT = "RUNPLANE_HTTP_WORKER_TIMEOUT"
#: The run's volumes as ``{mount path: local directory}`` JSON, where runs execute here.
ENV_MOUNTS = "RUNPLANE_MOUNTS"

#: Variables runplane sets in every run's container; a function may not set them itself.
RESERVED_ENV = frozenset(
    {
        ENV_PROJECT,
        ENV_FUNCTION,
        ENV_HANDLER,
        ENV_CODE,
        ENV_RUN_UID,
        ENV_ATTEMPT,
        ENV_FILENAME,
        ENV_TAKES_CONTEXT,
        ENV_PARAMS,
        ENV_INPUTS,
        ENV_HTTP_WORKERS,
        ENV_HTTP_WORKER_TIMEOUT,
        ENV_MOUNTS,
    }
)
