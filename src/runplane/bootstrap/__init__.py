"""The program inside every run: load the handler's code, call it with its context, report.

The same package runs a handler everywhere. A local run's process imports it; on Kubernetes it
is shipped to the pod as a ConfigMap, one key per module, and run by the image's own
``python3`` (:mod:`.pod`), so a pod needs nothing of runplane in its image: the package uses
only the standard library, imports nothing of runplane but itself, and keeps to the Python 3.9
language.

Its modules, each of one job: :mod:`.invocation` (one call of a handler and its encodings),
:mod:`.data` (inputs and artifact paths), :mod:`.logger`, :mod:`.context` and
:mod:`.artifacts` (the handler's ``context``), :mod:`.current` (this process's context),
:mod:`.handler` (calling the handler), :mod:`.report` (what a pod leaves for the service),
:mod:`.serving` (a serving handler's requests and answers), :mod:`.server` (a serving pod's HTTP
server) and :mod:`.pod` (a pod's program).
"""

from .context import Context, Terminated, rank_and_size
from .current import become_current, current_context, make_context
from .data import ArtifactPath, DataItem, OutOfScope
from .handler import call_handler, load_module, log_returned
from .invocation import (
    ENV_ARTIFACT_PATH,
    ENV_ATTEMPT,
    ENV_CHECKPOINT_PATH,
    ENV_CODE,
    ENV_CONTEXT_ONLY,
    ENV_FILENAME,
    ENV_FUNCTION,
    ENV_HANDLER,
    ENV_HINTS,
    ENV_HTTP_PORT,
    ENV_HTTP_WORKER_TIMEOUT,
    ENV_HTTP_WORKERS,
    ENV_INPUTS,
    ENV_LABELS,
    ENV_MOUNTS,
    ENV_PARAMS,
    ENV_PROJECT,
    ENV_PROJECT_PARAMS,
    ENV_RANK,
    ENV_RETURNS,
    ENV_RUN_DIR,
    ENV_RUN_UID,
    ENV_SECRET_PREFIX,
    ENV_TAKES_CONTEXT,
    ENV_TERMINATION_LOG,
    ENV_WORLD_SIZE,
    INVOCATION_ENV,
    PROTOCOL,
    Invocation,
)
from .logger import RunLogger
from .pod import SHIPPED_AS, main, main_of_pod, run_pod
from .report import MESSAGE_LIMIT, RESULTS_LIMIT, RESULTS_MARKER, report
from .serving import Event, Response, Server, ServingContext, answer, busy, serving_options

__all__ = [
    "ENV_ARTIFACT_PATH",
    "ENV_ATTEMPT",
    "ENV_CHECKPOINT_PATH",
    "ENV_CODE",
    "ENV_CONTEXT_ONLY",
    "ENV_FILENAME",
    "ENV_FUNCTION",
    "ENV_HANDLER",
    "ENV_HINTS",
    "ENV_HTTP_PORT",
    "ENV_HTTP_WORKERS",
    "ENV_HTTP_WORKER_TIMEOUT",
    "ENV_INPUTS",
    "ENV_LABELS",
    "ENV_MOUNTS",
    "ENV_PARAMS",
    "ENV_PROJECT",
    "ENV_PROJECT_PARAMS",
    "ENV_RANK",
    "ENV_RETURNS",
    "ENV_RUN_DIR",
    "ENV_RUN_UID",
    "ENV_SECRET_PREFIX",
    "ENV_TAKES_CONTEXT",
    "ENV_TERMINATION_LOG",
    "ENV_WORLD_SIZE",
    "INVOCATION_ENV",
    "MESSAGE_LIMIT",
    "PROTOCOL",
    "RESULTS_LIMIT",
    "RESULTS_MARKER",
    "SHIPPED_AS",
    "ArtifactPath",
    "Context",
    "DataItem",
    "Event",
    "Invocation",
    "OutOfScope",
    "Response",
    "RunLogger",
    "Server",
    "ServingContext",
    "Terminated",
    "answer",
    "become_current",
    "busy",
    "call_handler",
    "current_context",
    "load_module",
    "log_returned",
    "main",
    "main_of_pod",
    "make_context",
    "rank_and_size",
    "report",
    "run_pod",
    "serving_options",
]
