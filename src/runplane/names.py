"""The names runplane writes into Kubernetes objects, in one place.

``rendering`` puts the run labels on every pod, the Kubernetes runtime adds the ownership labels
and the abort annotations and reads them all back, the configuration names node groups by
label, and the testbed labels its nodes the same way.
"""

from __future__ import annotations

from runplane import bootstrap

# The run's variables, defined by the program that reads them.
ENV_ARTIFACT_PATH = bootstrap.ENV_ARTIFACT_PATH
ENV_ATTEMPT = bootstrap.ENV_ATTEMPT
ENV_CHECKPOINT_PATH = bootstrap.ENV_CHECKPOINT_PATH
ENV_CODE = bootstrap.ENV_CODE
ENV_CONTEXT_ONLY = bootstrap.ENV_CONTEXT_ONLY
ENV_FILENAME = bootstrap.ENV_FILENAME
ENV_FUNCTION = bootstrap.ENV_FUNCTION
ENV_HINTS = bootstrap.ENV_HINTS
ENV_LABELS = bootstrap.ENV_LABELS
ENV_HANDLER = bootstrap.ENV_HANDLER
ENV_INPUTS = bootstrap.ENV_INPUTS
ENV_MOUNTS = bootstrap.ENV_MOUNTS
ENV_PARAMS = bootstrap.ENV_PARAMS
ENV_PROJECT = bootstrap.ENV_PROJECT
ENV_RUN_DIR = bootstrap.ENV_RUN_DIR
ENV_RETURNS = bootstrap.ENV_RETURNS
ENV_RUN_UID = bootstrap.ENV_RUN_UID
ENV_TAKES_CONTEXT = bootstrap.ENV_TAKES_CONTEXT

PREFIX = "runplane.io/"
#: Labels of every object rendered for a function, and of every pod of a run.
PROJECT = f"{PREFIX}project"
FUNCTION = f"{PREFIX}function"
RUN_UID = f"{PREFIX}run-uid"
ATTEMPT = f"{PREFIX}attempt"
#: A pod's part in a workload of several (an MPIJob's ``launcher``/``worker``, a
#: SparkApplication's ``driver``/``executor``); the run's state follows the main one's pod.
ROLE = f"{PREFIX}role"
#: The roles whose pods only help: they tell why a run waits, never how it ends.
HELPER_ROLES = frozenset({"worker", "executor"})
#: Which runplane service owns a pod, when several share a namespace (optional).
INSTANCE = f"{PREFIX}instance"
#: The node label that names a node's group (system, on-demand, spot, gpu...).
NODE_GROUP = f"{PREFIX}node-group"
#: The taint of nodes reserved for core services (the system group).
RESERVED = f"{PREFIX}reserved"
MANAGED_BY = "app.kubernetes.io/managed-by"
#: The annotation of a serving deployment made through the service: the user who deployed it,
#: the one (with admins) who may list, call and delete it.
DEPLOYED_BY = f"{PREFIX}deployed-by"
MANAGER = "runplane"
#: Written on a pod just before runplane deletes it, so any watcher (another replica, or this
#: one after a restart) records the run ``aborted``, not ``error``.
ABORT_REASON = f"{PREFIX}abort-reason"
ABORT_MESSAGE = f"{PREFIX}abort-message"
#: A job's live right-sizing (``with_autoresize``) as its pod carries it: the runtimes read it
#: from what they run (``rendering/autoresize.py``).
AUTORESIZE = f"{PREFIX}autoresize"
#: The extended resource ``with_limits(gpus=...)`` asks for unless ``gpu_type`` says otherwise.
GPU = "nvidia.com/gpu"

#: A serving container's server settings, which the program inside every pod reads.
ENV_HTTP_WORKERS = bootstrap.ENV_HTTP_WORKERS
ENV_HTTP_WORKER_TIMEOUT = bootstrap.ENV_HTTP_WORKER_TIMEOUT
ENV_HTTP_PORT = bootstrap.ENV_HTTP_PORT
ENV_RANK = bootstrap.ENV_RANK
ENV_WORLD_SIZE = bootstrap.ENV_WORLD_SIZE

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
        ENV_HTTP_PORT,
        ENV_RANK,
        ENV_WORLD_SIZE,
        ENV_MOUNTS,
        ENV_RUN_DIR,
        ENV_ARTIFACT_PATH,
        ENV_CONTEXT_ONLY,
        ENV_RETURNS,
        ENV_HINTS,
        ENV_CHECKPOINT_PATH,
        ENV_LABELS,
    }
)

#: runplane's own parts of a run's pod: the program that runs the handler (a ConfigMap of
#: runplane.bootstrap, mounted read-only) and the run's directory (an emptyDir). A function's
#: volumes may not take their names or paths.
OWN = "runplane-"
BOOTSTRAP_VOLUME = f"{OWN}bootstrap"
BOOTSTRAP_DIR = "/runplane/bootstrap"
#: The script a run's container starts, at the top of the bootstrap's volume, beside the folder
#: of the package's modules (``rendering.bootstrap``).
BOOTSTRAP_SCRIPT = "__main__.py"
#: What a run's container runs: runplane's bootstrap with the image's own Python.
BOOTSTRAP_COMMAND = ("python3", f"{BOOTSTRAP_DIR}/{BOOTSTRAP_SCRIPT}")
RUN_VOLUME = f"{OWN}run"
RUN_DIR = "/runplane/run"
#: Where runplane's own mounts live in a container.
OWN_DIR = "/runplane"
